#!/usr/bin/env python3
"""Runs a TensorFlow trainer as a whole cluster of local processes, each with the TF_CONFIG a
TrainingJob would give its pod, on 127.0.0.1 ports. No Kubernetes involved.

    python examples/training/run_tf_local.py mwms --workers 2            # chief + 2 workers
    python examples/training/run_tf_local.py ps --workers 2 --ps 1       # chief + 2 workers + 1 ps
    python examples/training/run_tf_local.py mwms --no-chief --workers 2 -- --epochs=2

Arguments after `--` go to every trainer. Each task's output is printed with its name in front.
The run succeeds when the chief (worker 0 without a chief) exits 0 and, for MultiWorkerMirrored,
every worker too; parameter servers and PS-strategy workers serve until they are stopped, as in
a TrainingJob, so they are stopped once the chief is done.
"""
import argparse
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = pathlib.Path(__file__).resolve().parent
TRAINERS = {"mwms": HERE / "tf_digits_mwms.py", "ps": HERE / "tf_digits_ps.py"}


def free_ports(n: int):
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def cluster_spec(chief: bool, workers: int, ps: int):
    ports = iter(free_ports(int(chief) + workers + ps))
    cluster = {}
    if chief:
        cluster["chief"] = [f"127.0.0.1:{next(ports)}"]
    if workers:
        cluster["worker"] = [f"127.0.0.1:{next(ports)}" for _ in range(workers)]
    if ps:
        cluster["ps"] = [f"127.0.0.1:{next(ports)}" for _ in range(ps)]
    return cluster


def pump(name: str, stream, sink) -> None:
    for line in stream:
        sink.write(f"{name}: {line}")
        sink.flush()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("strategy", choices=sorted(TRAINERS))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--ps", type=int, default=None, help="parameter servers (ps strategy; default 1)")
    parser.add_argument("--no-chief", action="store_true", help="no chief task (MultiWorkerMirrored only)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds before every task is killed")
    parser.add_argument("--python", default=sys.executable)
    argv = sys.argv[1:]
    trainer_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    ps = args.ps if args.ps is not None else (1 if args.strategy == "ps" else 0)
    if args.strategy == "ps" and (args.no_chief or ps < 1 or args.workers < 1):
        parser.error("the ps strategy needs its chief (the coordinator), >= 1 worker and >= 1 ps")
    if args.strategy == "mwms" and ps:
        parser.error("MultiWorkerMirroredStrategy has no parameter servers")
    if args.no_chief and args.workers < 1:
        parser.error("a cluster without a chief needs workers")

    cluster = cluster_spec(not args.no_chief, args.workers, ps)
    leader = ("chief", 0) if "chief" in cluster else ("worker", 0)
    processes = {}
    pumps = []
    for job, tasks in cluster.items():
        for index in range(len(tasks)):
            env = dict(os.environ, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": job, "index": index}}),
                       PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "1"))
            p = subprocess.Popen([args.python, str(TRAINERS[args.strategy]), *trainer_args], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
            processes[(job, index)] = p
            t = threading.Thread(target=pump, args=(f"{job}-{index}", p.stdout, sys.stdout), daemon=True)
            t.start()
            pumps.append(t)

    # Who must finish: every trainer of the synchronous strategy, only the coordinator of the PS one.
    must_finish = list(processes) if args.strategy == "mwms" else [leader]
    deadline = time.monotonic() + args.timeout
    codes = {}
    try:
        while time.monotonic() < deadline:
            for key in must_finish:
                if key not in codes and processes[key].poll() is not None:
                    codes[key] = processes[key].returncode
            if len(codes) == len(must_finish) or any(codes.values()):
                break
            time.sleep(0.2)
    finally:
        for key, p in processes.items():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        for key, p in processes.items():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for t in pumps:
            t.join(timeout=5)
    missing = [f"{j}-{i}" for j, i in must_finish if (j, i) not in codes]
    if missing:
        print(f"run_tf_local: timed out after {args.timeout:.0f} s waiting for {missing}", file=sys.stderr)
        return 124
    failed = {f"{j}-{i}": c for (j, i), c in codes.items() if c}
    if failed:
        print(f"run_tf_local: failed tasks (exit codes): {failed}", file=sys.stderr)
        return 1
    print(f"run_tf_local: {args.strategy} cluster {json.dumps(cluster)} finished", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
