"""modelfleet-local's controllers and local kubelet, driven through kubectl.

A Deployment of `python3 -m http.server` (bound to its pod IP) becomes ready pods reachable through
its Service's endpoints, its Service VIP (port 8080 -> targetPort 8000) and by Service DNS name;
scaling starts and stops processes; deleting the
Deployment stops them all (checked in the process table); logs, exit codes and restarts reach
`kubectl logs` and the pod status.
"""
import json
import os
import pathlib
import signal
import subprocess
import time
import urllib.request

import pytest

from conftest import build_dir, free_port

KUBECTL = "/usr/bin/kubectl"


def _wait(predicate, timeout=60.0, interval=0.25, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class Cluster:
    def __init__(self, tmp: pathlib.Path):
        binary = build_dir() / "tools" / "local" / "modelfleet-local"
        if not binary.exists():
            pytest.skip(f"{binary} is not built")
        self.binary = binary
        self.tmp = tmp
        self.data_dir = tmp / "data"
        self.kubeconfig = tmp / "kubeconfig"
        self.log = open(tmp / "modelfleet-local.log", "a")
        self.start()

    def start(self):
        self.kubeconfig.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [str(self.binary), "up", f"--data-dir={self.data_dir}", f"--port={free_port()}",
             f"--kubeconfig={self.kubeconfig}"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        _wait(lambda: self.proc.poll() is not None or self.kubeconfig.exists() and
              self.kubectl("get", "namespaces", check=False).returncode == 0,
              timeout=30, what="the API server")
        assert self.proc.poll() is None, (self.tmp / "modelfleet-local.log").read_text()

    def crash(self):
        """SIGKILL: no chance to stop the pods' processes."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def kubectl(self, *args, check=True, stdin=None, timeout=60):
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig))
        result = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True,
                                env=env, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
        return result

    def get(self, *args):
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.stop()


def http_server_processes():
    """pid -> bind address of every live `http.server` started by a pod (from /proc)."""
    found = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and b"http.server" in argv and b"--bind" in argv:
            found[int(entry.name)] = argv[argv.index(b"--bind") + 1].decode()
    return found


MANIFEST = """
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  type: LoadBalancer
  selector: {app: web}
  ports: [{name: http, port: 8080, targetPort: http}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: web
        image: python:3.11
        command: [python3, -u, -m, http.server, "8000", --bind, $(POD_IP)]
        env:
        - name: POD_IP
          valueFrom: {fieldRef: {fieldPath: status.podIP}}
        ports: [{name: http, containerPort: 8000}]
        readinessProbe:
          httpGet: {path: /, port: http}
          periodSeconds: 1
"""


def ready_addresses(cluster):
    ep = cluster.get("endpoints", "web")
    return sorted(a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or [])


def web_pods(cluster):
    return [p for p in cluster.get("pods", "-l", "app=web")["items"]
            if not p["metadata"].get("deletionTimestamp")]


def test_deployment_behind_service_scales_and_deletes(cluster):
    cluster.kubectl("apply", "-f", "-", stdin=MANIFEST)
    cluster.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)

    deployment = cluster.get("deployment", "web")
    assert deployment["status"]["availableReplicas"] == 2
    assert deployment["status"]["observedGeneration"] == deployment["metadata"]["generation"]
    available = {c["type"]: c["status"] for c in deployment["status"]["conditions"]}
    assert available == {"Available": "True", "Progressing": "True"}

    ips = _wait(lambda: len(ready_addresses(cluster)) == 2 and ready_addresses(cluster), what="2 endpoints")
    assert len(set(ips)) == 2 and all(ip.startswith("127.") for ip in ips)
    for ip in ips:
        with urllib.request.urlopen(f"http://{ip}:8000/", timeout=5) as response:
            assert response.status == 200
    # The Service's VIP (its LoadBalancer ingress, reachable from the host) maps port 8080 to 8000
    # (not 80: CI runs unprivileged).
    ingress = _wait(lambda: cluster.get("service", "web").get("status", {}).get("loadBalancer", {}).get("ingress"),
                    what="a LoadBalancer ingress")
    url = f"http://{ingress[0]['ip']}:8080/"

    def get_status():
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status
        except OSError as e:
            return repr(e)

    # The proxy follows Endpoints on its next sync, as kube-proxy does.
    _wait(lambda: get_status() == 200, what=f"GET {url}")
    assert [get_status() for _ in range(4)] == [200] * 4
    slices = cluster.get("endpointslices", "-l", "kubernetes.io/service-name=web")["items"]
    assert len(slices) == 1 and len(slices[0]["endpoints"]) == 2
    # One process per pod, each bound to its own pod IP.
    assert sorted(http_server_processes().values()) == ips

    # Logs: the requests above were logged by the server to stderr.
    pod = web_pods(cluster)[0]["metadata"]["name"]
    logs = _wait(lambda: "GET / HTTP/1.1" in (out := cluster.kubectl("logs", pod).stdout) and out,
                 what="request lines in kubectl logs")
    assert "Serving HTTP on" in logs

    cluster.kubectl("scale", "deployment/web", "--replicas=3")
    _wait(lambda: len(ready_addresses(cluster)) == 3, what="3 endpoints")
    _wait(lambda: len(http_server_processes()) == 3, what="3 processes")

    cluster.kubectl("scale", "deployment/web", "--replicas=1")
    _wait(lambda: len(ready_addresses(cluster)) == 1 and len(web_pods(cluster)) == 1, what="1 pod")
    _wait(lambda: len(http_server_processes()) == 1, what="1 process")
    assert list(http_server_processes().values()) == ready_addresses(cluster)

    cluster.kubectl("delete", "deployment", "web", "--wait=true", timeout=90)
    _wait(lambda: not cluster.get("pods", "-l", "app=web")["items"], what="the pods to go")
    _wait(lambda: not http_server_processes(), what="every http.server process to exit")
    assert not cluster.get("replicasets")["items"]
    _wait(lambda: ready_addresses(cluster) == [], what="empty endpoints")


def test_service_names_resolve_inside_pods(cluster):
    cluster.kubectl("apply", "-f", "-", stdin=MANIFEST.replace("replicas: 2", "replicas: 1"))
    cluster.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
    _wait(lambda: ready_addresses(cluster), what="an endpoint")
    client = """
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: python:3.11
    command: [python3, -c]
    args:
    - |
      import urllib.request
      for host in ["web", "web.default", "web.default.svc", "web.default.svc.cluster.local"]:
          with urllib.request.urlopen(f"http://{host}:8080/", timeout=5) as r:
              print(host, r.status)
"""
    cluster.kubectl("apply", "-f", "-", stdin=client)
    _wait(lambda: cluster.get("pod", "client")["status"].get("phase") in ("Succeeded", "Failed"),
          what="the client pod to finish")
    logs = cluster.kubectl("logs", "client").stdout
    assert cluster.get("pod", "client")["status"]["phase"] == "Succeeded", logs
    assert logs.splitlines() == ["web 200", "web.default 200", "web.default.svc 200",
                                 "web.default.svc.cluster.local 200"]
    cluster.kubectl("delete", "deployment", "web")


def test_exit_codes_restarts_and_previous_logs(cluster):
    pods = """
apiVersion: v1
kind: Pod
metadata: {name: fails}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: busybox, command: [sh, -c, "echo about to fail; exit 42"]}
---
apiVersion: v1
kind: Pod
metadata: {name: crashes}
spec:
  restartPolicy: Always
  containers:
  - {name: main, image: busybox, command: [sh, -c, "echo run at $(date +%s%N); exit 1"]}
"""
    cluster.kubectl("apply", "-f", "-", stdin=pods)
    _wait(lambda: cluster.get("pod", "fails")["status"].get("phase") == "Failed", what="phase Failed")
    status = cluster.get("pod", "fails")["status"]["containerStatuses"][0]
    assert status["state"]["terminated"]["exitCode"] == 42
    assert cluster.kubectl("logs", "fails").stdout == "about to fail\n"

    # The first restart comes after a 10 s back-off, as the kubelet's CrashLoopBackOff.
    _wait(lambda: cluster.get("pod", "crashes")["status"]["containerStatuses"][0]["restartCount"] >= 1,
          timeout=40, what="a restart")
    crashed = cluster.get("pod", "crashes")["status"]["containerStatuses"][0]
    assert crashed["lastState"]["terminated"]["exitCode"] == 1
    assert cluster.kubectl("logs", "crashes", "--previous").stdout.startswith("run at ")
    cluster.kubectl("delete", "pod", "fails", "crashes", timeout=60)
    assert cluster.get("pods")["items"] == []


def test_restart_after_a_crash_replaces_orphaned_containers(cluster):
    cluster.kubectl("apply", "-f", "-", stdin=MANIFEST)
    cluster.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
    _wait(lambda: len(http_server_processes()) == 2, what="2 processes")
    orphans = http_server_processes()
    cluster.crash()
    # The containers outlive the crashed kubelet (their own sessions), still holding the pod IPs.
    assert set(http_server_processes()) == set(orphans)

    cluster.start()
    _wait(lambda: not set(http_server_processes()) & set(orphans), what="the orphans to be killed")
    cluster.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
    _wait(lambda: len(http_server_processes()) == 2, what="2 new processes")
    # Same pods, same addresses: the restarted containers took over the pod IPs.
    assert sorted(http_server_processes().values()) == sorted(orphans.values())
    _wait(lambda: ready_addresses(cluster) == sorted(orphans.values()), what="ready endpoints again")
    cluster.kubectl("delete", "deployment", "web", "--wait=true", timeout=90)
    _wait(lambda: not http_server_processes(), what="every http.server process to exit")
