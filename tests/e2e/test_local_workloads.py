"""modelfleet-local up runs the built-in controllers and the local kubelet: a Deployment becomes
ready pods whose containers are local processes, `kubectl logs` reads them, `kubectl scale` and
`kubectl delete` reach the processes."""
import json
import time

import pytest

from local_fixtures import LocalCluster

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo}
spec:
  replicas: 2
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      containers:
      - name: echo
        image: local/python
        command: [/usr/bin/python3, -u, -c, "import time; print('hello from', __import__('os').environ['HOSTNAME'], flush=True); time.sleep(3600)"]
"""


@pytest.fixture
def cluster_with_workloads(tmp_path):
    cluster = LocalCluster(tmp_path, workloads=True)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def pods(cluster):
    out = cluster.kubectl("get", "pods", "-l", "app=echo", "-o", "json").stdout
    return json.loads(out)["items"]


def wait_until(predicate, timeout=60, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_deployment_runs_local_processes_with_logs_scale_and_delete(cluster_with_workloads):
    c = cluster_with_workloads
    c.kubectl("apply", "-f", "-", input=DEPLOYMENT)
    c.kubectl("rollout", "status", "deployment/echo", "--timeout=60s", timeout=90)
    running = pods(c)
    assert len(running) == 2 and all(p["status"]["phase"] == "Running" for p in running)
    name = running[0]["metadata"]["name"]
    wait_until(lambda: "hello from" in c.kubectl("logs", name).stdout, what="container output in kubectl logs")
    assert c.kubectl("get", "deployment", "echo").stdout.splitlines()[1].split()[1] == "2/2"

    c.kubectl("scale", "deployment", "echo", "--replicas", "1")
    wait_until(lambda: len(pods(c)) == 1, what="scale down to one pod")

    c.kubectl("delete", "deployment", "echo", "--timeout=60s", timeout=90)
    wait_until(lambda: not pods(c), what="pods garbage-collected with their deployment")
    assert json.loads(c.kubectl("get", "replicasets", "-o", "json").stdout)["items"] == []
