"""TF_CONFIG for the TensorFlow trainers: read and check it, wait until every task's address
resolves, and hand TensorFlow the same TF_CONFIG with addresses in place of host names.

TensorFlow reads TF_CONFIG itself (TFConfigClusterResolver); this module prepares it before
TensorFlow is imported, for what TensorFlow's gRPC layer does not do: peers' names appear in DNS
only once their pods run (a headless Service lists ready pods only), and TensorFlow's C++ gRPC
resolver fails a name that is not there yet. So every host is resolved here first, waiting up to
a deadline, with Python's resolver, which on modelfleet-local also reads the cluster's hosts file
(docs/local-cluster.md; TensorFlow's C++ resolver does not).

Ports are used as given: where pods share one network namespace (modelfleet-local) the operator
gives each task its own port, since TensorFlow's server listens on 0.0.0.0:<port>.
"""
import json
import os
import socket
import sys
import time
from typing import Callable, Dict, List, Optional

# The jobs TensorFlow 2's strategies accept (multi_worker_util._validate_cluster_spec).
JOBS = ("chief", "worker", "ps", "evaluator")


class ConfigError(ValueError):
    """TF_CONFIG is unusable; the message says what to change."""


def log(message: str) -> None:
    print(f"[tf_cluster] {message}", file=sys.stderr, flush=True)


def parse(text: str) -> dict:
    """Checks a TF_CONFIG value and returns it with every job as a list of "host:port" strings."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"TF_CONFIG is not JSON ({e}): {text[:200]!r}") from None
    if not isinstance(config, dict):
        raise ConfigError("TF_CONFIG must be a JSON object with 'cluster' and 'task'")
    cluster = config.get("cluster") or {}
    if not isinstance(cluster, dict):
        raise ConfigError("TF_CONFIG 'cluster' must be an object of job name -> addresses")
    if "master" in cluster:
        raise ConfigError("TF_CONFIG has a 'master' job, which TensorFlow 2's strategies refuse "
                          "(allowed: chief, worker, ps, evaluator): use a Chief replica instead of Master")
    unknown = sorted(set(cluster) - set(JOBS))
    if unknown:
        raise ConfigError(f"TF_CONFIG has jobs {unknown}; TensorFlow 2 accepts only {list(JOBS)}")
    dense = {}
    for job, tasks in cluster.items():
        if isinstance(tasks, dict):  # {"0": "host:port", ...}, which ClusterSpec accepts too
            try:
                by_index = {int(i): address for i, address in tasks.items()}
            except ValueError:
                raise ConfigError(f"TF_CONFIG job {job!r} has a non-integer task index") from None
            if sorted(by_index) != list(range(len(by_index))):
                raise ConfigError(f"TF_CONFIG job {job!r} lists tasks {sorted(by_index)}; these trainers need "
                                  f"every task 0..n-1 (the sparse, dynamic-worker form is not supported)")
            tasks = [by_index[i] for i in range(len(by_index))]
        if not isinstance(tasks, list) or not all(isinstance(t, str) and _split(t) for t in tasks):
            raise ConfigError(f"TF_CONFIG job {job!r} must list 'host:port' strings, got {tasks!r}")
        dense[job] = tasks
    task = config.get("task") or {}
    task_type, task_id = task.get("type"), task.get("index", 0)
    if dense:
        if task_type not in dense:
            raise ConfigError(f"TF_CONFIG task type {task_type!r} is not a job of the cluster {sorted(dense)}")
        if not isinstance(task_id, int) or not 0 <= task_id < len(dense[task_type]):
            raise ConfigError(f"TF_CONFIG task index {task_id!r} is out of range for job {task_type!r} "
                              f"({len(dense[task_type])} tasks)")
    out = dict(config)
    out["cluster"] = dense
    return out


def _split(address: str):
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host.strip("[]"), int(port)


def resolve(cluster: Dict[str, List[str]], timeout_s: float,
            lookup: Callable[[str], str] = socket.gethostbyname,
            sleep: Callable[[float], None] = time.sleep) -> Dict[str, List[str]]:
    """Replaces every host by its IPv4 address, retrying names that do not resolve yet (peers whose
    pods have not started) until `timeout_s`. Raises ConfigError naming the ones still missing."""
    deadline = time.monotonic() + timeout_s
    resolved: Dict[str, str] = {}
    next_report = 0.0
    while True:
        missing = []
        for tasks in cluster.values():
            for address in tasks:
                host = _split(address)[0]
                if host in resolved:
                    continue
                try:
                    resolved[host] = lookup(host)
                except OSError:
                    missing.append(host)
        if not missing:
            break
        now = time.monotonic()
        if now >= deadline:
            raise ConfigError(f"after {timeout_s:.0f} s these TF_CONFIG hosts still do not resolve: "
                              f"{sorted(set(missing))} (are their pods running?)")
        if now >= next_report:
            log(f"waiting for {len(set(missing))} host(s) to resolve: {sorted(set(missing))[:4]}")
            next_report = now + 5
        sleep(0.5)
    return {job: [f"{resolved[_split(a)[0]]}:{_split(a)[1]}" for a in tasks] for job, tasks in cluster.items()}


def prepare(timeout_s: float = 120.0, environ=os.environ) -> Optional[dict]:
    """Reads TF_CONFIG from `environ`, resolves its hosts and stores it back. Returns the rewritten config, or None when there is
    no cluster (a single local process)."""
    text = environ.get("TF_CONFIG", "")
    if not text.strip():
        return None
    config = parse(text)
    if not config["cluster"]:
        return None
    cluster = resolve(config["cluster"], timeout_s)
    config["cluster"] = cluster
    task = config["task"]
    check_port_free(_split(cluster[task["type"]][task.get("index", 0)])[1])
    environ["TF_CONFIG"] = json.dumps(config)
    log(f"task {task['type']}:{task.get('index', 0)} of {json.dumps(cluster)}")
    return config


def check_port_free(port: int) -> None:
    """TensorFlow's server listens on 0.0.0.0:<port> and, when the port is taken, fails deep in
    the strategy's setup with "Could not start gRPC server". Say so first, and why it happens."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does: TIME_WAIT is no conflict
        try:
            s.bind(("0.0.0.0", port))
        except OSError as e:
            raise ConfigError(f"this task's port {port} is taken ({e.strerror}): where pods share one network "
                              f"namespace (modelfleet-local, hostNetwork), another job's task may hold it; give "
                              f"TrainingJobs that run at the same time spec.port values further apart") from None


def is_chief(config: Optional[dict]) -> bool:
    """As multi_worker_util.is_chief: the chief, else worker 0 when there is no chief."""
    if not config:
        return True
    task = config["task"]
    if task["type"] == "chief":
        return True
    return task["type"] == "worker" and task.get("index", 0) == 0 and "chief" not in config["cluster"]


def wait_for_listeners(config: dict, jobs, timeout_s: float) -> None:
    """Blocks until every task of `jobs` accepts TCP connections (its tf.distribute.Server is up)."""
    deadline = time.monotonic() + timeout_s
    pending = [a for job in jobs for a in config["cluster"].get(job, [])]
    next_report = 0.0
    while pending:
        still = []
        for address in pending:
            host, port = _split(address)
            try:
                socket.create_connection((host, port), timeout=2).close()
            except OSError:
                still.append(address)
        pending = still
        if not pending:
            break
        now = time.monotonic()
        if now >= deadline:
            raise ConfigError(f"after {timeout_s:.0f} s nothing listens at {pending}")
        if now >= next_report:
            log(f"waiting for {len(pending)} server(s) to listen: {pending[:4]}")
            next_report = now + 5
        time.sleep(0.5)
