"""The kubelet API of the node agent, through the real kube-apiserver: `kubectl logs` (tail,
limit-bytes, previous, follow), `kubectl exec` (output streams, exit codes, stdin) and
`kubectl port-forward` to a pod and to a Service, on a model server pod."""
import json
import pathlib
import queue
import re
import subprocess
import threading
import time
import urllib.request

import pytest

from conftest import build_dir
from local_fixtures import LocalCluster, wait_until

pytestmark = pytest.mark.go_components

SERVER = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: digits}
spec:
  replicas: 1
  selector: {matchLabels: {app: digits}}
  template:
    metadata: {labels: {app: digits}}
    spec:
      containers:
      - name: server
        image: modelfleet/server:dev
        env:
        - name: POD_IP
          valueFrom: {fieldRef: {fieldPath: status.podIP}}
        args: ["--model_name=digits", "--model_base_path=MODELS", "--rest_api_address=$(POD_IP)",
               "--grpc_address=$(POD_IP)", "--rest_api_port=8501", "--port=8500"]
        ports: [{containerPort: 8501, name: rest}]
        readinessProbe:
          httpGet: {path: /v2/health/ready, port: 8501}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: digits}
spec:
  selector: {app: digits}
  ports: [{name: rest, port: 8501, targetPort: rest}]
"""

LOGGER_POD = """
apiVersion: v1
kind: Pod
metadata: {name: logger}
spec:
  restartPolicy: Never
  containers:
  - name: logger
    image: python:3.11
    command:
    - /usr/bin/python3
    - -u
    - -c
    - |
      import os, sys, time
      for i in range(5):
          print("early", i)
      deadline = time.monotonic() + 120
      while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
          time.sleep(0.05)
      print("after go")
    - "%s"
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kubelet-api")
    server = (build_dir() / "server" / "main" / "modelfleet-server").resolve()
    if not server.exists():
        pytest.skip(f"{server} is not built")
    (tmp / "images.yaml").write_text(f"images:\n  modelfleet/server: {server}\n")
    c = LocalCluster(tmp, extra_args=["--image-map", str(tmp / "images.yaml")])
    c.start()
    models = pathlib.Path(__file__).resolve().parents[2] / "examples" / "models" / "digits"
    c.kubectl("apply", "-f", "-", input=SERVER.replace("MODELS", str(models)))
    c.kubectl("rollout", "status", "deployment/digits", "--timeout=90s", timeout=120)
    try:
        yield c
    finally:
        c.stop()


def server_pod(cluster):
    pods = json.loads(cluster.kubectl("get", "pods", "-l", "app=digits", "-o", "json").stdout)["items"]
    return pods[0]["metadata"]["name"]


def test_logs_of_a_model_server_pod(cluster):
    pod = server_pod(cluster)
    out = wait_until(lambda: cluster.kubectl("logs", pod, check=False).stdout, what="server output")
    assert "digits" in out
    assert cluster.kubectl("logs", "deployment/digits").stdout.startswith(out[:50])


def test_exec_streams_exit_codes_and_stdin(cluster):
    pod = server_pod(cluster)
    result = cluster.kubectl("exec", pod, "--", "sh", "-c", "echo out; echo err >&2; exit 3", check=False)
    assert result.returncode == 3
    assert result.stdout == "out\n"
    assert "err" in result.stderr
    # The container's environment: the pod IP the downward API gave it.
    ip = json.loads(cluster.kubectl("get", "pod", pod, "-o", "json").stdout)["status"]["podIP"]
    assert cluster.kubectl("exec", pod, "--", "sh", "-c", "echo $POD_IP").stdout.strip() == ip
    echoed = cluster.kubectl("exec", "-i", pod, "--", "cat", input="through stdin\n")
    assert echoed.stdout == "through stdin\n"
    missing = cluster.kubectl("exec", pod, "--", "/no/such/program", check=False)
    assert missing.returncode != 0


def forward(cluster, target, remote_port):
    """Starts `kubectl port-forward TARGET :REMOTE`; returns (process, local port)."""
    proc = cluster.kubectl_background("port-forward", target, f":{remote_port}")
    line = proc.stdout.readline()
    match = re.search(r"Forwarding from 127\.0\.0\.1:(\d+)", line)
    if not match:
        proc.kill()
        raise AssertionError(f"kubectl port-forward said {line!r}: {proc.stderr.read()}")
    return proc, int(match.group(1))


@pytest.mark.parametrize("target", ["pod", "svc/digits"])
def test_port_forward_reaches_the_model_server(cluster, target):
    if target == "pod":
        target = "pod/" + server_pod(cluster)
    proc, port = forward(cluster, target, 8501)
    try:
        for _ in range(3):  # several connections over one forward
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models/digits", timeout=10) as r:
                status = json.load(r)
            assert status["model_version_status"][0]["state"] == "AVAILABLE"
    finally:
        proc.kill()
        proc.wait(timeout=10)


def read_lines_in_background(pipe):
    lines = queue.Queue()

    def pump():
        for line in pipe:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def next_line(lines, timeout=30):
    try:
        return lines.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"no log line within {timeout} s")


def test_logs_tail_limit_and_follow_until_the_container_exits(cluster, tmp_path):
    go = tmp_path / "go"
    cluster.kubectl("apply", "-f", "-", input=LOGGER_POD % go)
    cluster.kubectl("wait", "--for=condition=Ready", "pod/logger", "--timeout=60s", timeout=90)
    wait_until(lambda: "early 4" in cluster.kubectl("logs", "logger").stdout, what="the first lines")
    assert cluster.kubectl("logs", "logger", "--tail=2").stdout == "early 3\nearly 4\n"
    assert cluster.kubectl("logs", "logger", "--limit-bytes=9").stdout == "early 0\ne"

    follower = cluster.kubectl_background("logs", "-f", "logger", "--tail=1")
    try:
        lines = read_lines_in_background(follower.stdout)
        assert next_line(lines) == "early 4\n"
        time.sleep(0.5)
        assert follower.poll() is None, "kubectl logs -f ended while the container still runs"
        go.write_text("")
        assert next_line(lines) == "after go\n"
        assert follower.wait(timeout=30) == 0  # the stream ends because the container exited
        assert next_line(lines) is None
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait(timeout=10)
    done = cluster.kubectl("logs", "-f", "logger", timeout=30)
    assert done.stdout.endswith("early 4\nafter go\n")
    cluster.kubectl("delete", "pod", "logger")
