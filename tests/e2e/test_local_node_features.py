"""What the node agent does as a kubelet beyond running processes, under the real control plane:
in-cluster credentials without a mount namespace (MODELFLEET_SERVICE_ACCOUNT_DIR), termination
messages (terminationMessagePath, FallbackToLogsOnError), GPU device assignment
(NVIDIA_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES, as NVIDIA's device plugin) and simulated pods
(`up --simulate-pods`, as kwok).
"""
import json
import time

import pytest

from local_fixtures import KUBECTL, LocalCluster, wait_until

pytestmark = pytest.mark.go_components


def get(cluster, *args):
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # The GPU count is explicit so the test does not depend on the machine's GPUs.
    c = LocalCluster(tmp_path_factory.mktemp("node-features"), ["--extended-resources", "nvidia.com/gpu=4"])
    c.start()
    try:
        yield c
    finally:
        c.stop()


def namespace(cluster, name):
    cluster.kubectl("create", "namespace", name)
    # Pods need the namespace's default ServiceAccount, which the controller manager creates.
    wait_until(lambda: cluster.kubectl("-n", name, "get", "serviceaccount", "default", check=False).returncode == 0,
               what=f"serviceaccount {name}/default")
    return name


def apply(cluster, ns, *objects):
    cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def pod(name, containers, restart_policy="Never"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": restart_policy, "terminationGracePeriodSeconds": 1,
                     "containers": containers}}


def finished(cluster, ns, name, timeout=60):
    wait_until(lambda: get(cluster, "-n", ns, "pod", name)["status"].get("phase") in ("Succeeded", "Failed"),
               timeout=timeout, what=f"pod {ns}/{name} to finish")
    return get(cluster, "-n", ns, "pod", name)


def test_service_account_dir_reaches_the_api_server(cluster):
    ns = namespace(cluster, "in-cluster")
    # The ServiceAccount admission plugin mounts kube-api-access-* at /var/run/secrets/...: the
    # container finds its directory in MODELFLEET_SERVICE_ACCOUNT_DIR and calls the API with it.
    script = ('d="$MODELFLEET_SERVICE_ACCOUNT_DIR"; cat "$d/namespace"; echo; '
              f'{KUBECTL} --server="https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT" '
              '--token="$(cat "$d/token")" --certificate-authority="$d/ca.crt" auth whoami -o jsonpath="{.status.userInfo.username}"')
    apply(cluster, ns, pod("whoami", [{"name": "main", "image": "busybox", "command": ["sh", "-c", script]}]))
    status = finished(cluster, ns, "whoami")
    log = cluster.kubectl("-n", ns, "logs", "whoami").stdout
    assert status["status"]["phase"] == "Succeeded", log
    assert log.splitlines() == [ns, f"system:serviceaccount:{ns}:default"]
    cluster.kubectl("delete", "namespace", ns, "--wait=false")


def test_termination_messages(cluster):
    ns = namespace(cluster, "termination")
    fails_with_logs = {"name": "main", "image": "busybox", "terminationMessagePolicy": "FallbackToLogsOnError",
                       "command": ["sh", "-c", "echo loading; echo 'error: no CUDA device' >&2; exit 1"]}
    apply(cluster, ns,
          # The message file, at a custom path passed as an argument (rewritten like a mount).
          pod("writes", [{"name": "main", "image": "busybox", "terminationMessagePath": "/tmp/why",
                          "command": ["sh", "-c", 'echo -n "model file is corrupt" > "$1"; exit 3', "sh", "/tmp/why"]}]),
          # Nothing written, FallbackToLogsOnError: the log's tail, in state and (after a restart) lastState.
          pod("falls-back", [fails_with_logs], restart_policy="Always"),
          pod("falls-back-once", [fails_with_logs]),
          # The default policy (File) with nothing written: no message.
          pod("silent", [{"name": "main", "image": "busybox", "command": ["sh", "-c", "echo not a message; exit 1"]}]))

    writes = finished(cluster, ns, "writes")["status"]["containerStatuses"][0]
    assert writes["state"]["terminated"]["exitCode"] == 3
    assert writes["state"]["terminated"]["message"] == "model file is corrupt"
    once = finished(cluster, ns, "falls-back-once")["status"]["containerStatuses"][0]
    assert once["state"]["terminated"]["message"] == "loading\nerror: no CUDA device\n"
    silent = finished(cluster, ns, "silent")["status"]["containerStatuses"][0]
    assert "message" not in silent["state"]["terminated"]

    jsonpath = "{.status.containerStatuses[0].lastState.terminated.message}"
    message = wait_until(lambda: cluster.kubectl("-n", ns, "get", "pod", "falls-back", "-o", f"jsonpath={jsonpath}").stdout,
                         timeout=40, what="lastState.terminated.message after a restart")
    assert message == "loading\nerror: no CUDA device\n"
    cluster.kubectl("delete", "namespace", ns, "--wait=false")


def test_gpu_devices_are_assigned_exclusively(cluster):
    ns = namespace(cluster, "gpus")
    show = {"name": "main", "image": "busybox",
            "command": ["sh", "-c", 'echo "$NVIDIA_VISIBLE_DEVICES|$CUDA_VISIBLE_DEVICES"; sleep 300']}

    def with_gpus(count):
        return dict(show, resources={"limits": {"nvidia.com/gpu": str(count)}})

    def shown(name):
        return wait_until(lambda: cluster.kubectl("-n", ns, "logs", name, check=False).stdout.strip(),
                          what=f"{name}'s devices")

    apply(cluster, ns, pod("two", [with_gpus(2)]))
    assert shown("two") == "0,1|0,1"
    apply(cluster, ns, pod("one", [with_gpus(1)]), pod("none", [show]))
    assert shown("one") == "2|2"
    assert shown("none") == "void|"  # hidden, as the container toolkit hides them
    # Freed when the pod ends: the lowest free indices go to the next pod.
    cluster.kubectl("-n", ns, "delete", "pod", "two", timeout=60)
    apply(cluster, ns, pod("three", [with_gpus(3)]))
    assert shown("three") == "0,1,3|0,1,3"
    cluster.kubectl("delete", "namespace", ns, "--wait=false")


SIMULATED = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: sim}
spec:
  replicas: 20
  selector: {matchLabels: {app: sim}}
  template:
    metadata: {labels: {app: sim}}
    spec:
      initContainers: [{name: fetch, image: example.com/not-in-the-image-map/fetch:1}]
      containers:
      - name: server
        image: example.com/not-in-the-image-map/server:1
        resources: {limits: {nvidia.com/gpu: "1"}}
        readinessProbe: {httpGet: {path: /ready, port: 8080}}
"""


def test_simulated_pods_are_ready_at_once_and_deleted_at_once(tmp_path):
    c = LocalCluster(tmp_path, ["--simulate-pods"])
    c.start()
    try:
        node = get(c, "node", "local")
        assert node["status"]["capacity"]["pods"] == "30k"  # the API server canonicalises 30000
        ns = namespace(c, "sim")
        started = time.monotonic()
        c.kubectl("-n", ns, "apply", "-f", "-", input=SIMULATED)
        c.kubectl("-n", ns, "rollout", "status", "deployment/sim", "--timeout=60s", timeout=90)
        pods = get(c, "-n", ns, "pods", "-l", "app=sim")["items"]
        assert len(pods) == 20, f"ready after {time.monotonic() - started:.1f} s"
        for p in pods:
            status = p["status"]
            assert status["phase"] == "Running"
            assert {cond["type"]: cond["status"] for cond in status["conditions"]}["Ready"] == "True"
            assert status["containerStatuses"][0]["state"]["running"]
            assert status["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
        assert len({p["status"]["podIP"] for p in pods}) == 20
        # Nothing ran: no pod directory, no log.
        assert not (c.data_dir / "pods").exists() or not any((c.data_dir / "pods").iterdir())

        c.kubectl("-n", ns, "delete", "deployment", "sim", "--cascade=foreground", "--timeout=60s", timeout=90)
        wait_until(lambda: not get(c, "-n", ns, "pods")["items"], timeout=30, what="simulated pods deleted")
    finally:
        c.stop()
