#!/usr/bin/env python3
"""How modelfleet-operator holds up with many ModelDeployments, on modelfleet-local with
--simulate-pods (the node agent marks pods Running and Ready without running them, as kwok
does), the operator running outside the cluster with the admin kubeconfig.

Prints one table: time until N ModelDeployments are Ready, time for one more to become Ready
among them, the operator's peak RSS, and reconciles per minute at rest, quiet and while another
client keeps adding labels to our Deployments (server-side apply leaves those alone, so the
rate must stay flat).

    .cache/venv/bin/python bench/operator/operator_scale.py --count 5000
"""
import argparse
import concurrent.futures
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("MODELFLEET_BUILD_DIR", ROOT / "build"))
NS = "bench"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def model_deployment(name):
    return {"apiVersion": "modelfleet.io/v1alpha1", "kind": "ModelDeployment",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": 1, "router": {"replicas": 1},
                     "versions": [{"name": "v1", "storageUri": "file:///models/m/1"},
                                  {"name": "v2", "storageUri": "file:///models/m/2"}],
                     "traffic": {"v1": 90, "v2": 10}}}


def is_ready(md):
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (md.get("status") or {}).get("conditions", []))


def reconciles(metrics_url):
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    return sum(float(m.group(1)) for m in
               re.finditer(r'^modelfleet_operator_reconcile_total\{[^}]*\} ([0-9.e+]+)$', text, re.M))


def queue_depth(metrics_url):
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    return sum(float(m.group(1)) for m in
               re.finditer(r'^modelfleet_operator_queue_depth\{[^}]*\} ([0-9.e+]+)$', text, re.M))


def rss_mb(pid, field):
    """VmRSS (now) or VmHWM (peak) of a process, in MiB."""
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    return int(re.search(field + r":\s+(\d+) kB", status).group(1)) / 1024


def control_plane_pids(data_dir):
    """kube-controller-manager and kube-scheduler of this bench's cluster (their command lines name
    its data directory)."""
    pids = []
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(data_dir) in cmdline and ("kube-controller-manager" in cmdline or "kube-scheduler" in cmdline):
            pids.append(int(proc.name))
    return pids


def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime + stime
        except OSError:
            pass
    return total / os.sysconf("SC_CLK_TCK")


def wait_until_quiet(pids, window=5.0, limit=0.1, timeout=300):
    """Waits (bounded) until `pids` use under `limit` of a core over `window` seconds; returns
    their last measured share."""
    deadline = time.monotonic() + timeout
    while True:
        before = cpu_seconds(pids)
        time.sleep(window)
        share = (cpu_seconds(pids) - before) / window
        if share < limit or time.monotonic() > deadline:
            return share


def stage_times(name, until):
    """Watches one ModelDeployment's objects come up; fills {stage: time.monotonic() when reached}:
    objects applied (the operator), pods created (kube-controller-manager), pods scheduled,
    pods ready (the node agent), Deployments available (kube-controller-manager again)."""
    from kubernetes import client, watch
    core, apps = client.CoreV1Api(), client.AppsV1Api()
    selector = f"modelfleet.io/modeldeployment={name}"
    seen, pods, deployments = {}, {}, {}
    lock = threading.Lock()

    def mark(stage):
        with lock:
            seen.setdefault(stage, time.monotonic())

    def follow(list_fn, on_object):
        w = watch.Watch()
        try:
            for event in w.stream(list_fn, NS, label_selector=selector, timeout_seconds=30):
                on_object(event["object"])
                if until.is_set():
                    w.stop()
        except Exception:  # the cluster went away under a watch still open: its stages are in
            pass

    def on_deployment(d):
        mark("objects applied")
        deployments[d.metadata.name] = (d.status.available_replicas or 0) >= (d.spec.replicas or 0)
        if len(deployments) >= 3 and all(deployments.values()):
            mark("Deployments available")

    def on_pod(p):
        mark("pods created")
        ready = any(c.type == "Ready" and c.status == "True" for c in (p.status.conditions or []))
        pods[p.metadata.name] = (bool(p.spec.node_name), ready)
        if len(pods) >= 3 and all(s for s, _ in pods.values()):
            mark("pods scheduled")
        if len(pods) >= 3 and all(r for _, r in pods.values()):
            mark("pods ready")

    threads = [threading.Thread(target=follow, args=(apps.list_namespaced_deployment, on_deployment), daemon=True),
               threading.Thread(target=follow, args=(core.list_namespaced_pod, on_pod), daemon=True)]
    for t in threads:
        t.start()
    return seen, threads


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--rest-seconds", type=int, default=60)
    parser.add_argument("--timeout", type=int, default=3600)
    parser.add_argument("--one-more", type=int, default=3, help="how many more to time, one after another")
    parser.add_argument("--operator-binary", default=str(BUILD / "operator/modelfleet-operator"),
                        help="another build of the operator to measure (an A/B)")
    parser.add_argument("--operator-prefix", default="",
                        help="a command the operator runs under, e.g. 'heaptrack -o /tmp/operator'")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # so `finally` stops the cluster
    from kubernetes import client, config

    tmp = pathlib.Path(tempfile.mkdtemp(prefix="mf-bench-operator-"))
    kubeconfig = tmp / "kubeconfig"
    local = subprocess.Popen([str(BUILD / "tools/local/modelfleet-local"), "up", "--simulate-pods", "--data-dir",
                              str(tmp / "data"), "--port", str(free_port()), "--kubeconfig", str(kubeconfig),
                              "--log-level", "warning"], stdout=open(tmp / "local.log", "w"),
                             stderr=subprocess.STDOUT, start_new_session=True)
    operator = None
    try:
        deadline = time.monotonic() + 120
        while not kubeconfig.exists():
            if local.poll() is not None or time.monotonic() > deadline:
                sys.exit(f"modelfleet-local did not start: {(tmp / 'local.log').read_text()}")
            time.sleep(0.2)
        env = dict(os.environ, KUBECONFIG=str(kubeconfig))
        subprocess.run(["kubectl", "apply", "-f", str(ROOT / "crds")], env=env, check=True, capture_output=True)
        subprocess.run(["kubectl", "wait", "--for", "condition=Established", "crd/modeldeployments.modelfleet.io"],
                       env=env, check=True, capture_output=True)
        subprocess.run(["kubectl", "create", "namespace", NS], env=env, check=True, capture_output=True)
        metrics_port = free_port()
        operator = subprocess.Popen(args.operator_prefix.split() + [args.operator_binary, f"--kubeconfig={kubeconfig}",
                                     f"--metrics-port={metrics_port}", "--metrics-address=127.0.0.1",
                                     f"--workers={args.workers}", "--api-qps=400", "--api-burst=800",
                                     "--log-level=warning"], stdout=open(tmp / "operator.log", "w"),
                                    stderr=subprocess.STDOUT)
        metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        config.load_kube_config(str(kubeconfig))
        client.Configuration._default.connection_pool_maxsize = 32
        api = client.CustomObjectsApi()
        apps = client.AppsV1Api()

        def create(i):
            api.create_namespaced_custom_object("modelfleet.io", "v1alpha1", NS, "modeldeployments",
                                                model_deployment(f"md-{i:05d}"))

        def ready_count():
            items, cont = [], None
            while True:
                page = api.list_namespaced_custom_object("modelfleet.io", "v1alpha1", NS, "modeldeployments",
                                                         limit=1000, _continue=cont)
                items += page["items"]
                cont = page["metadata"].get("continue")
                if not cont:
                    return sum(is_ready(m) for m in items)

        print(f"creating {args.count} ModelDeployments ...", flush=True)
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            list(pool.map(create, range(args.count)))
        created = time.monotonic() - started
        ready = 0
        # Listing thousands of ModelDeployments is itself work for the API server: poll less often.
        poll = max(2, args.count // 500)
        while ready < args.count:
            if time.monotonic() - started > args.timeout:
                sys.exit(f"only {ready}/{args.count} Ready after {args.timeout} s")
            time.sleep(poll)
            ready = ready_count()
            print(f"  {ready}/{args.count} Ready after {time.monotonic() - started:.0f} s, operator RSS "
                  f"{rss_mb(operator.pid, 'VmRSS'):.0f} MiB (peak {rss_mb(operator.pid, 'VmHWM'):.0f})", flush=True)
        all_ready = time.monotonic() - started

        # "Among them" means at rest: let the operator work off what the last status changes
        # queued, and kube-controller-manager and kube-scheduler theirs (each bounded), so a new
        # one is not timed behind a backlog. Then time a few, one after another, each with the
        # stages its objects went through.
        one_more = []
        controllers = control_plane_pids(tmp / "data")
        for k in range(args.one_more):
            settle_deadline = time.monotonic() + 300
            while queue_depth(metrics_url) > 0 and time.monotonic() < settle_deadline:
                time.sleep(1)
            depth = queue_depth(metrics_url)
            busy = wait_until_quiet(controllers)
            name = f"md-{args.count + k:05d}"
            done = threading.Event()
            stages, _ = stage_times(name, done)
            time.sleep(0.5)  # the watches are open before the object exists
            one_started = time.monotonic()
            create(args.count + k)
            while not is_ready(api.get_namespaced_custom_object("modelfleet.io", "v1alpha1", NS, "modeldeployments",
                                                                name)):
                time.sleep(0.05)
            took = time.monotonic() - one_started
            done.set()
            stages = {s: t - one_started for s, t in stages.items()}
            one_more.append(took)
            print(f"  one more ({name}): Ready in {took:.2f} s, queue depth {depth:.0f} at its start, "
                  f"controller-manager + scheduler at {busy:.0%} of a core; "
                  + ", ".join(f"{s} {t:.2f} s" for s, t in sorted(stages.items(), key=lambda x: x[1])), flush=True)

        time.sleep(5)  # let the last status writes settle
        quiet_start = reconciles(metrics_url)
        time.sleep(args.rest_seconds)
        quiet = (reconciles(metrics_url) - quiet_start) * 60 / args.rest_seconds

        stop = threading.Event()
        labelled = [0]

        def label():
            names = [f"md-{i:05d}-v1" for i in range(args.count)]
            i = 0
            while not stop.is_set():
                apps.patch_namespaced_deployment(names[i % len(names)], NS,
                                                 {"metadata": {"labels": {"team": f"t{i}"}}})
                labelled[0] += 1
                i += 1
        labeller = threading.Thread(target=label, daemon=True)
        busy_start = reconciles(metrics_url)
        labeller.start()
        time.sleep(args.rest_seconds)
        busy = (reconciles(metrics_url) - busy_start) * 60 / args.rest_seconds
        stop.set()
        labeller.join(timeout=10)

        rows = [("ModelDeployments", f"{args.count}"),
                ("created in", f"{created:.1f} s"),
                ("all Ready after", f"{all_ready:.1f} s"),
                ("one more Ready in", " / ".join(f"{t:.2f}" for t in one_more) + " s (one after another, each at rest)"),
                ("operator peak RSS", f"{rss_mb(operator.pid, 'VmHWM'):.0f} MiB"),
                ("reconciles/min at rest", f"{quiet:.0f}"),
                ("reconciles/min while labelling", f"{busy:.0f} ({labelled[0] * 60 / args.rest_seconds:.0f} label patches/min)")]
        width = max(len(r[0]) for r in rows)
        print()
        for k, v in rows:
            print(f"{k:<{width}}  {v}")
    finally:
        if operator:
            operator.terminate()
            try:
                operator.wait(timeout=30)
            except subprocess.TimeoutExpired:
                print("the operator did not exit within 30 s of SIGTERM; killed", flush=True)
                operator.kill()
        local.terminate()
        try:
            local.wait(timeout=120)
        except subprocess.TimeoutExpired:
            local.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
