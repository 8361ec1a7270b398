"""modelfleet-local up runs the built-in controllers and the local kubelet: a Deployment becomes
ready pods whose containers are local processes, `kubectl logs` reads them, `kubectl scale` and
`kubectl delete` reach the processes."""
import json
import pathlib
import queue
import threading
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


LOGGER_POD = """
apiVersion: v1
kind: Pod
metadata: {name: logger}
spec:
  restartPolicy: Never
  containers:
  - name: logger
    image: local/python
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


def test_logs_follow_streams_output_and_ends_when_the_container_exits(cluster_with_workloads, tmp_path):
    c = cluster_with_workloads
    go = tmp_path / "go"
    c.kubectl("apply", "-f", "-", input=LOGGER_POD % go)
    c.kubectl("wait", "--for=condition=Ready", "pod/logger", "--timeout=60s", timeout=90)
    wait_until(lambda: "early 4" in c.kubectl("logs", "logger").stdout, what="the first lines")

    # The plain read options, against what the container wrote so far.
    assert c.kubectl("logs", "logger", "--tail=2").stdout == "early 3\nearly 4\n"
    assert c.kubectl("logs", "logger", "--limit-bytes=9").stdout == "early 0\ne"
    refused = c.kubectl("logs", "logger", "--timestamps", check=False)
    assert refused.returncode != 0 and "not supported" in refused.stderr

    follower = c.kubectl_background("logs", "-f", "logger", "--tail=1")
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

    # A finished container: -f returns what there is at once.
    done = c.kubectl("logs", "-f", "logger", timeout=30)
    assert done.stdout.endswith("early 4\nafter go\n")


def server_threads(cluster):
    status = pathlib.Path(f"/proc/{cluster.proc.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


def test_logs_follow_ends_for_a_client_that_goes_away(cluster_with_workloads):
    c = cluster_with_workloads
    c.kubectl("apply", "-f", "-", input=DEPLOYMENT)
    c.kubectl("rollout", "status", "deployment/echo", "--timeout=60s", timeout=90)
    name = pods(c)[0]["metadata"]["name"]
    wait_until(lambda: "hello from" in c.kubectl("logs", name).stdout, what="container output")
    baseline = server_threads(c)
    followers = [c.kubectl_background("logs", "-f", name) for _ in range(3)]
    try:
        for f in followers:
            assert next_line(read_lines_in_background(f.stdout)).startswith("hello from")
        assert server_threads(c) >= baseline + 3  # one follower thread each
    finally:
        for f in followers:
            f.kill()
            f.wait(timeout=10)
    # The server notices the departed clients and ends their followers.
    wait_until(lambda: server_threads(c) <= baseline, timeout=15, what="follower threads to end")
    # The server keeps answering and later follows work as before.
    again = c.kubectl_background("logs", "-f", name)
    try:
        assert next_line(read_lines_in_background(again.stdout)).startswith("hello from")
    finally:
        again.kill()
        again.wait(timeout=10)
    c.kubectl("delete", "deployment", "echo", "--timeout=60s", timeout=90)
