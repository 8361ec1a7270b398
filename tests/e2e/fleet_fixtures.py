"""A ModelFleet installation on modelfleet-local the way users get one: the local cluster maps
the images the chart and the operator name (modelfleet/{operator,server,router,sync}) to the
binaries of this build tree, `helm install` puts the operator in modelfleet-system under the
chart's RBAC, and the operator runs in its pods with its ServiceAccount."""
import collections
import json
import os
import pathlib
import signal
import subprocess
import threading
import time

import numpy as np
import pytest
import requests
from sklearn.datasets import load_digits

import proto_stubs
from conftest import ROOT, build_dir, go_binary
from local_fixtures import LocalCluster, wait_until

CHART = ROOT / "helm" / "modelfleet"
RELEASE = "modelfleet"
SYSTEM_NS = "modelfleet-system"
BINARIES = {
    "modelfleet/operator": "operator/modelfleet-operator",
    "modelfleet/server": "server/main/modelfleet-server",
    "modelfleet/router": "server/router/modelfleet-router",
    "modelfleet/sync": "server/sync/modelfleet-sync",
}
# The image training examples name; on modelfleet-local it maps to the venv's python.
TRAIN_IMAGE = "modelfleet/python-train"
PYTHON = ROOT / ".cache" / "venv" / "bin" / "python"
DIGITS = load_digits().data[:2].astype(np.float32)
PREDICT = {"signature_name": "serving_default", "instances": DIGITS.tolist()}
HELM_ENV = {"HELM_CACHE_HOME": "/tmp/modelfleet-helm/cache", "HELM_CONFIG_HOME": "/tmp/modelfleet-helm/config",
            "HELM_DATA_HOME": "/tmp/modelfleet-helm/data"}


def write_image_map(path: pathlib.Path) -> pathlib.Path:
    lines = ["images:"]
    for image, relative in BINARIES.items():
        binary = build_dir() / relative
        if not binary.exists():
            pytest.skip(f"{binary} is not built")
        lines.append(f"  {image}: {binary}")
    # Training pods (examples/training/) run Python: the tests' venv, with Debian's torch and
    # tensorflow-cpu (docs/training.md, "On modelfleet-local").
    lines.append(f"  {TRAIN_IMAGE}: {PYTHON}")
    path.write_text("\n".join(lines) + "\n")
    return path


class Fleet:
    def __init__(self, cluster: LocalCluster):
        self.cluster = cluster

    def kubectl(self, *args, **kwargs):
        return self.cluster.kubectl(*args, **kwargs)

    def json(self, *args):
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def helm(self, *args, check=True, timeout=180):
        env = dict(self.cluster.env(), **HELM_ENV)
        result = subprocess.run([str(go_binary("helm")), *args], capture_output=True, text=True,
                                timeout=timeout, env=env)
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def apply(self, manifest: str):
        return self.kubectl("apply", "-f", "-", input=manifest)

    def local_example(self) -> str:
        text = (ROOT / "examples" / "modeldeployment-digits-local.yaml").read_text()
        return text.replace("/MODELFLEET_ROOT", str(ROOT))

    def md(self, name="digits", ns="default"):
        return self.json("modeldeployment", name, "-n", ns)

    def condition(self, md: dict, kind: str) -> dict:
        for c in md.get("status", {}).get("conditions", []):
            if c["type"] == kind:
                return c
        return {}

    def wait_ready(self, name="digits", ns="default", timeout=180):
        self.kubectl("wait", f"modeldeployment/{name}", "-n", ns, "--for", "condition=Ready",
                     f"--timeout={timeout}s", timeout=timeout + 10)

    def lb_address(self, service="digits", ns="default") -> str:
        def address():
            svc = self.json("service", service, "-n", ns)
            ingress = svc.get("status", {}).get("loadBalancer", {}).get("ingress") or []
            return ingress[0].get("ip") if ingress else None
        return wait_until(address, timeout=30, what=f"a LoadBalancer address for {service}")

    def operator_pods(self):
        pods = self.json("pods", "-n", SYSTEM_NS, "-l", "app.kubernetes.io/name=modelfleet-operator")["items"]
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def leader(self) -> str:
        lease = self.json("lease", "modelfleet-operator", "-n", SYSTEM_NS)
        return lease["spec"].get("holderIdentity", "")


def processes(program: str):
    """(pid, argv, environment) of each local process whose argv[0] ends with `program`: the node
    agent runs pods' containers on this machine, so tests find them in /proc."""
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(program.encode()):
            yield int(proc.name), argv, dict(e.decode(errors="replace").split("=", 1) for e in environ if b"=" in e)


def pids_of_pod(pod_name: str, program: str):
    """Processes of a pod's container (the chart sets POD_NAME by the downward API)."""
    return [pid for pid, _, env in processes(program) if env.get("POD_NAME") == pod_name]


def grpc_predict_request():
    """A TF Serving PredictRequest of the two digits in PREDICT."""
    predict_pb2 = proto_stubs.module("tensorflow_serving.apis.predict_pb2")
    tensor_pb2 = proto_stubs.module("tensorflow.core.framework.tensor_pb2")
    types_pb2 = proto_stubs.module("tensorflow.core.framework.types_pb2")
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "digits"
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
    for d in DIGITS.shape:
        tensor.tensor_shape.dim.add(size=d)
    tensor.tensor_content = DIGITS.astype("<f4").tobytes()
    request.inputs["images"].CopyFrom(tensor)
    return request


def kill9(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture(scope="session")
def fleet(tmp_path_factory):
    """One installation for every module that needs one (each uses ModelDeployments of its own
    names): a cluster start and a helm install cost half a minute each."""
    tmp = tmp_path_factory.mktemp("fleet")
    images = write_image_map(tmp / "images.yaml")
    cluster = LocalCluster(tmp, ["--image-map", str(images)])
    go_binary("helm")
    cluster.start()
    try:
        fleet = Fleet(cluster)
        fleet.helm("install", RELEASE, str(CHART), "-n", SYSTEM_NS, "--create-namespace", "--wait", "--timeout", "150s")
        yield fleet
        # Uninstalling removes the operator and its RBAC but keeps the CRDs (helm never deletes
        # CRDs), so ModelDeployments and their fleets outlive the operator.
        fleet.helm("uninstall", RELEASE, "-n", SYSTEM_NS, "--wait", "--timeout", "120s")
        left = fleet.kubectl("get", "deployments,serviceaccounts,clusterroles,clusterrolebindings", "-A", "-l",
                             f"app.kubernetes.io/instance={RELEASE}", "-o", "name").stdout.split()
        assert not left, f"helm uninstall left {left}"
        fleet.kubectl("get", "crd", "modeldeployments.modelfleet.io")
    finally:
        cluster.stop()


def audit_calls(fleet, username):
    calls = set()
    for line in (fleet.cluster.data_dir / "logs" / "audit.log").read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") != username or "objectRef" not in event:
            continue
        ref = event["objectRef"]
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        calls.add((event["verb"], ref.get("apiGroup", ""), resource))
    return calls


def granted(fleet, sa_name):
    rules = []
    for kind, ns in (("clusterroles", None), ("roles", SYSTEM_NS)):
        args = [kind, "-l", "app.kubernetes.io/instance=modelfleet"] + (["-n", ns] if ns else [])
        for role in fleet.json(*args)["items"]:
            if "router" in role["metadata"]["name"]:
                continue
            rules += role.get("rules", [])
    out = set()
    for r in rules:
        for group in r.get("apiGroups", []):
            for resource in r.get("resources", []):
                for verb in r.get("verbs", []):
                    out.add((verb, group, resource))
    return out


# Grants that only TrainingJobs exercise (pods the operator creates and deletes itself, gang
# admission's node list, the hand-off to a ModelDeployment, TTL deletion): called once a training
# suite has run, so test_training.py checks them, not test_operator.py.
TRAINING_ONLY_GRANTS = {
    ("create", "", "pods"), ("delete", "", "pods"), ("list", "", "nodes"),
    ("delete", "modelfleet.io", "trainingjobs"), ("patch", "modelfleet.io", "trainingjobs/status"),
    ("get", "modelfleet.io", "modeldeployments"), ("patch", "modelfleet.io", "modeldeployments"),
}
# Likewise for hyperparameter studies (their end-to-end test checks them once studies have run).
STUDY_ONLY_GRANTS = {("create", "modelfleet.io", "trainingjobs"), ("get", "", "pods/log")}


def rest_url(fleet, service="digits", model="digits"):
    return f"http://{fleet.lb_address(service)}:8501/v1/models/{model}:predict"


class Load:
    """Keep-alive clients posting predictions until stopped; counts answers by outcome."""

    def __init__(self, url, clients=4):
        self.url = url
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.outcomes = collections.Counter()
        self.failures = []
        self.answers = []  # (monotonic time, version) of every successful answer
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(clients)]

    def run(self):
        with requests.Session() as session:
            while not self.stop_event.is_set():
                try:
                    r = session.post(self.url, json=PREDICT, timeout=10)
                    outcome = f"{r.status_code} {r.headers.get('x-modelfleet-version', '-')}"
                    ok = r.status_code == 200 and len(r.json()["predictions"]) == 2
                    detail = "" if ok else r.text[:300]
                except Exception as e:  # noqa: BLE001 (a failed request is what is counted)
                    outcome, ok, detail = f"error {type(e).__name__}", False, str(e)[:300]
                with self.lock:
                    self.outcomes[outcome] += 1
                    if ok:
                        self.answers.append((time.monotonic(), r.headers.get("x-modelfleet-version")))
                    if not ok and len(self.failures) < 10:
                        self.failures.append(f"{outcome}: {detail}")

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=15)

    def total(self):
        with self.lock:
            return sum(self.outcomes.values())

    def failed(self):
        with self.lock:
            return sum(n for o, n in self.outcomes.items() if not o.startswith("200 "))


