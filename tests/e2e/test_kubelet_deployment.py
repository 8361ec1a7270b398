"""The node agent under the real control plane, driven through kubectl.

A Deployment of `python3 -m http.server` (bound to its pod IP) gets its ReplicaSet from the real
ReplicaSet controller, its pods bound by the real scheduler and run by our node agent as processes;
they are reachable through their Service (cluster IP and DNS name from inside the cluster, the
LoadBalancer address from the host); scaling starts and stops processes; deleting the Deployment
garbage-collects the ReplicaSet and the pods and stops every process (checked in the process
table). Exit codes and restarts reach the pod status. `up` and each of its components survive a
kill -9 with the cluster's objects intact.
"""
import json
import os
import pathlib
import signal
import subprocess
import urllib.request

import pytest

from conftest import build_dir
from local_fixtures import LocalCluster, wait_until

pytestmark = pytest.mark.go_components


def get(cluster, *args):
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Four GPUs whatever the machine has, for the scheduling test.
    c = LocalCluster(tmp_path_factory.mktemp("node-agent"), ["--extended-resources", "nvidia.com/gpu=4"])
    c.start()
    try:
        yield c
    finally:
        c.stop()


def http_server_processes(marker):
    """pid -> bind address of every live `http.server` started with `--directory marker`."""
    found = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and b"http.server" in argv and str(marker).encode() in argv and b"--bind" in argv:
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
        command: [python3, -u, -m, http.server, "8000", --bind, $(POD_IP), --directory, "MARKER"]
        env:
        - name: POD_IP
          valueFrom: {fieldRef: {fieldPath: status.podIP}}
        ports: [{name: http, containerPort: 8000}]
        readinessProbe:
          httpGet: {path: /, port: http}
          periodSeconds: 1
"""


def manifest(marker, replicas=2):
    return MANIFEST.replace("MARKER", str(marker)).replace("replicas: 2", f"replicas: {replicas}")


def ready_addresses(cluster, ns):
    ep = get(cluster, "-n", ns, "endpoints", "web")
    return sorted(a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or [])


def web_pods(cluster, ns):
    return [p for p in get(cluster, "-n", ns, "pods", "-l", "app=web")["items"]
            if not p["metadata"].get("deletionTimestamp")]


def namespace(cluster, name):
    cluster.kubectl("create", "namespace", name)
    # Pods need the namespace's default ServiceAccount, which the controller manager creates.
    wait_until(lambda: cluster.kubectl("-n", name, "get", "serviceaccount", "default", check=False).returncode == 0,
          what=f"serviceaccount {name}/default")
    return name


def run_in_cluster(cluster, ns, name, script, timeout=60):
    """Runs a Python script in a pod (inside the cluster's network); returns (phase, output)."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "python:3.11", "command": ["python3", "-c", script]}]}}
    cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(pod))
    wait_until(lambda: get(cluster, "-n", ns, "pod", name)["status"].get("phase") in ("Succeeded", "Failed"),
          timeout=timeout, what=f"pod {name} to finish")
    output = (cluster.data_dir / "pods" / f"{ns}_{name}" / "main.log")
    phase = get(cluster, "-n", ns, "pod", name)["status"]["phase"]
    return phase, output.read_text() if output.exists() else ""


def test_deployment_behind_service_scales_and_deletes(cluster, tmp_path):
    ns = namespace(cluster, "scale")
    cluster.kubectl("-n", ns, "apply", "-f", "-", input=manifest(tmp_path))
    cluster.kubectl("-n", ns, "rollout", "status", "deployment/web", "--timeout=90s", timeout=120)

    deployment = get(cluster, "-n", ns, "deployment", "web")
    assert deployment["status"]["availableReplicas"] == 2
    assert deployment["status"]["observedGeneration"] == deployment["metadata"]["generation"]
    available = {c["type"]: c["status"] for c in deployment["status"]["conditions"]}
    assert available == {"Available": "True", "Progressing": "True"}
    # The real controllers and scheduler did the work: a ReplicaSet owned by the Deployment, pods
    # owned by it, bound to the node by the scheduler.
    [rs] = get(cluster, "-n", ns, "replicasets")["items"]
    assert rs["metadata"]["ownerReferences"][0]["name"] == "web"
    events = get(cluster, "-n", ns, "events")["items"]
    assert any(e["reason"] == "Scheduled" and e.get("source", {}).get("component") == "default-scheduler"
               or e.get("reportingComponent") == "default-scheduler" for e in events), events
    for pod in web_pods(cluster, ns):
        assert pod["spec"]["nodeName"] == "local"
        assert pod["metadata"]["ownerReferences"][0]["name"] == rs["metadata"]["name"]

    ips = wait_until(lambda: len(ready_addresses(cluster, ns)) == 2 and ready_addresses(cluster, ns), what="2 endpoints")
    assert len(set(ips)) == 2 and all(ip.startswith("10.244.") for ip in ips)  # not loopback: real Endpoints
    slices = get(cluster, "-n", ns, "endpointslices", "-l", "kubernetes.io/service-name=web")["items"]
    assert len(slices) == 1 and sorted(e["addresses"][0] for e in slices[0]["endpoints"]) == ips
    # One process per pod, each bound to its own pod IP.
    assert sorted(http_server_processes(tmp_path).values()) == ips

    # From the host: the LoadBalancer address the node agent wrote, port 8080 -> 8000.
    ingress = wait_until(lambda: get(cluster, "-n", ns, "service", "web").get("status", {}).get("loadBalancer", {})
                    .get("ingress"), what="a LoadBalancer ingress")
    assert ingress[0]["ip"].startswith("127.0.0.")
    url = f"http://{ingress[0]['ip']}:8080/"

    def get_status():
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.status
        except OSError as e:
            return repr(e)

    wait_until(lambda: get_status() == 200, what=f"GET {url}")
    assert [get_status() for _ in range(4)] == [200] * 4

    # From inside the cluster: each pod IP, the cluster IP and the Service's DNS names.
    cluster_ip = get(cluster, "-n", ns, "service", "web")["spec"]["clusterIP"]
    assert cluster_ip.startswith("10.96.")
    targets = [f"http://{ip}:8000/" for ip in ips] + [f"http://{cluster_ip}:8080/"] + [
        f"http://{host}:8080/" for host in ["web", f"web.{ns}", f"web.{ns}.svc", f"web.{ns}.svc.cluster.local"]]
    # ... and the API server as in-cluster clients find it: KUBERNETES_SERVICE_HOST/PORT (the
    # `kubernetes` Service) with the pod's own ServiceAccount token from its projected volume,
    # which authenticates (403 for the default account, not 401).
    script = ("import json, os, ssl, urllib.error, urllib.request\n"
              f"for url in {targets!r}:\n"
              "    with urllib.request.urlopen(url, timeout=5) as r:\n"
              "        print(url, r.status)\n"
              f"ctx = ssl.create_default_context(cafile={str(cluster.ca_file)!r})\n"
              "api = 'https://%s:%s' % (os.environ['KUBERNETES_SERVICE_HOST'], os.environ['KUBERNETES_SERVICE_PORT'])\n"
              "with urllib.request.urlopen(api + '/version', timeout=5, context=ctx) as r:\n"
              "    print('version', json.load(r)['gitVersion'][:5])\n"
              "volume = next(v for k, v in os.environ.items() if k.startswith('MODELFLEET_VOLUME_KUBE_API_ACCESS'))\n"
              "token = open(os.path.join(volume, 'token')).read()\n"
              "request = urllib.request.Request(api + '/api/v1/secrets', headers={'Authorization': 'Bearer ' + token})\n"
              "try:\n"
              "    urllib.request.urlopen(request, timeout=5, context=ctx)\n"
              "except urllib.error.HTTPError as e:\n"
              "    print('secrets', e.code, json.load(e)['message'].split(' cannot')[0])\n")
    phase, output = run_in_cluster(cluster, ns, "client", script)
    assert phase == "Succeeded", output
    assert output.splitlines() == [f"{t} 200" for t in targets] + [
        "version v1.37", f'secrets 403 secrets is forbidden: User "system:serviceaccount:{ns}:default"']

    cluster.kubectl("-n", ns, "scale", "deployment/web", "--replicas=3")
    wait_until(lambda: len(ready_addresses(cluster, ns)) == 3, what="3 endpoints")
    wait_until(lambda: len(http_server_processes(tmp_path)) == 3, what="3 processes")

    cluster.kubectl("-n", ns, "scale", "deployment/web", "--replicas=1")
    wait_until(lambda: len(ready_addresses(cluster, ns)) == 1 and len(web_pods(cluster, ns)) == 1, what="1 pod")
    wait_until(lambda: len(http_server_processes(tmp_path)) == 1, what="1 process")
    assert list(http_server_processes(tmp_path).values()) == ready_addresses(cluster, ns)

    # The garbage collector removes the ReplicaSet and the pods; the node agent stops them.
    cluster.kubectl("-n", ns, "delete", "deployment", "web", "--wait=true", timeout=90)
    wait_until(lambda: not get(cluster, "-n", ns, "pods", "-l", "app=web")["items"], what="the pods to go")
    wait_until(lambda: not http_server_processes(tmp_path), what="every http.server process to exit")
    wait_until(lambda: not get(cluster, "-n", ns, "replicasets")["items"], what="the ReplicaSet to go")
    wait_until(lambda: ready_addresses(cluster, ns) == [], what="empty endpoints")
    cluster.kubectl("delete", "namespace", ns, "--wait=false")


def test_exit_codes_and_restarts(cluster):
    ns = namespace(cluster, "exits")
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
    cluster.kubectl("-n", ns, "apply", "-f", "-", input=pods)
    wait_until(lambda: get(cluster, "-n", ns, "pod", "fails")["status"].get("phase") == "Failed", what="phase Failed")
    status = get(cluster, "-n", ns, "pod", "fails")["status"]["containerStatuses"][0]
    assert status["state"]["terminated"]["exitCode"] == 42

    # The first restart comes after a 10 s back-off, as the kubelet's CrashLoopBackOff.
    wait_until(lambda: get(cluster, "-n", ns, "pod", "crashes")["status"]["containerStatuses"][0]["restartCount"] >= 1,
          timeout=40, what="a restart")
    crashed = get(cluster, "-n", ns, "pod", "crashes")["status"]["containerStatuses"][0]
    assert crashed["lastState"]["terminated"]["exitCode"] == 1
    # The instance before the restart keeps its log: the kubelet API's `previous`.
    assert cluster.kubectl("-n", ns, "logs", "crashes", "--previous").stdout.startswith("run at ")
    cluster.kubectl("-n", ns, "delete", "pod", "fails", "crashes", timeout=60)
    assert get(cluster, "-n", ns, "pods")["items"] == []
    cluster.kubectl("delete", "namespace", ns, "--wait=false")


def test_gpu_pods_schedule_on_the_extended_resource(cluster):
    ns = namespace(cluster, "gpu")
    node = get(cluster, "node", "local")
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "4"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "NAME"},
           "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "300"],
                                    "resources": {"limits": {"nvidia.com/gpu": "3"}}}]}}
    cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(pod).replace("NAME", "three"))
    wait_until(lambda: get(cluster, "-n", ns, "pod", "three")["status"].get("phase") == "Running", what="3-GPU pod running")
    # 3 of 4 GPUs are taken: the scheduler leaves a second 3-GPU pod Pending, with its reason.
    cluster.kubectl("-n", ns, "apply", "-f", "-", input=json.dumps(pod).replace("NAME", "more"))
    reason = wait_until(lambda: next((c.get("message", "") for c in get(cluster, "-n", ns, "pod", "more")["status"]
                                 .get("conditions", []) if c["type"] == "PodScheduled" and c["status"] == "False"),
                                None), what="an Unschedulable condition")
    assert "Insufficient nvidia.com/gpu" in reason
    cluster.kubectl("-n", ns, "delete", "pod", "three", timeout=60)
    wait_until(lambda: get(cluster, "-n", ns, "pod", "more")["status"].get("phase") == "Running", what="the second pod scheduled")
    cluster.kubectl("delete", "namespace", ns, "--wait=false")


def components(cluster):
    """name -> pid of the processes `up` supervises (its direct children)."""
    found = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if int(stat[1]) != cluster.proc.pid or stat[0] == "Z":
            continue
        name = os.path.basename(argv[0].decode())
        found["node-agent" if len(argv) > 1 and argv[1] == b"node-agent" else name] = int(entry.name)
    return found


def test_kill_9_of_any_component_or_of_up_recovers_with_objects_intact(tmp_path):
    c = LocalCluster(tmp_path)
    c.start()
    try:
        c.kubectl("apply", "-f", "-", input=manifest(tmp_path, replicas=1))
        c.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
        c.kubectl("create", "configmap", "keep", "--from-literal=k=v")
        replicas = 1
        for name in ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "node-agent"]:
            before = components(c)
            assert name in before, before
            os.kill(before[name], signal.SIGKILL)
            wait_until(lambda: components(c).get(name) not in (None, before[name]), timeout=60, what=f"{name} restarted")
            # Every object is still there and every controller still acts: scale up by one.
            replicas += 1
            wait_until(lambda: c.kubectl("scale", "deployment/web", f"--replicas={replicas}", check=False).returncode == 0,
                  timeout=60, what=f"the API after killing {name}")
            assert get(c, "configmap", "keep")["data"] == {"k": "v"}
            c.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
            wait_until(lambda: len(http_server_processes(tmp_path)) == replicas, timeout=60,
                  what=f"{replicas} processes after killing {name}")

        # kill -9 of `up` itself: its components go with it (parent-death signal); the pods'
        # processes outlive it, still holding their addresses, and the next `up` replaces them.
        orphans = http_server_processes(tmp_path)
        c.crash()
        wait_until(lambda: not any(pathlib.Path(f"/proc/{pid}").exists() for pid in before.values()), timeout=20,
              what="the components to die with up")
        assert set(http_server_processes(tmp_path)) == set(orphans)
        c.start()
        wait_until(lambda: not set(http_server_processes(tmp_path)) & set(orphans), what="the orphans to be killed")
        c.kubectl("rollout", "status", "deployment/web", "--timeout=90s", timeout=120)
        wait_until(lambda: len(http_server_processes(tmp_path)) == replicas, what=f"{replicas} new processes")
        # Same pods, same addresses: the restarted containers took over the pod IPs.
        assert sorted(http_server_processes(tmp_path).values()) == sorted(orphans.values())
        assert get(c, "configmap", "keep")["data"] == {"k": "v"}
        c.kubectl("delete", "deployment", "web", "--wait=true", timeout=90)
        wait_until(lambda: not http_server_processes(tmp_path), what="every http.server process to exit")
    finally:
        c.stop()


@pytest.mark.parametrize("flags, message", [
    (["--extended-resources", "nvidia.com/gpu"], "is not NAME=COUNT"),
    (["--extended-resources", "nvidia.com/gpu=-1"], "is not NAME=COUNT"),
    (["--port", "70000"], "--port must be between 0 and 65535"),
    (["--log-level", "loud"], "--log-level must be"),
])
def test_up_refuses_malformed_flags_before_starting_anything(tmp_path, flags, message):
    binary = build_dir() / "tools" / "local" / "modelfleet-local"
    if not binary.exists():
        pytest.skip(f"{binary} is not built")
    result = subprocess.run([str(binary), "up", "--data-dir", str(tmp_path / "data"), *flags],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert not (tmp_path / "data").exists()  # nothing was created
