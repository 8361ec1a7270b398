"""Fixtures for the modelfleet-local end-to-end tests: the real control plane (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler built from their Go modules) and our node
agent, started by `modelfleet-local up` with a temporary data directory, its API server forwarded
to a free port on 127.0.0.1; kubectl and the Python client pointed at it with the admin's
kubeconfig (client certificate, the cluster's own CA)."""
import itertools
import os
import pathlib
import re
import signal
import ssl
import subprocess
import time
import urllib.request

import pytest
import yaml

from conftest import build_dir, free_port, go_binary

KUBECTL = "/usr/bin/kubectl"
DATA = pathlib.Path(__file__).resolve().parent / "local_data"
START_TIMEOUT = 120  # a cold kube-apiserver on a loaded 2-core machine takes tens of seconds


def wait_until(predicate, timeout=60.0, what="condition", interval=0.2):
    """Polls `predicate` until it returns something truthy (returned) or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what} did not happen in {timeout} s (last: {last!r})")


class LocalCluster:
    def __init__(self, tmp: pathlib.Path, extra_args=()):
        self.binary = build_dir() / "tools" / "local" / "modelfleet-local"
        if not self.binary.exists():
            pytest.skip(f"{self.binary} is not built")
        go_binary("kube-apiserver")
        self.tmp = tmp
        self.data_dir = tmp / "data"
        self.kubeconfig = tmp / "kubeconfig"
        self.port = free_port()
        self.extra_args = list(extra_args)
        self.proc = None
        self.log_path = tmp / "modelfleet-local.log"

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> pathlib.Path:
        return self.data_dir / "pki" / "ca.crt"

    def component_log(self, name: str) -> pathlib.Path:
        return self.data_dir / "logs" / f"{name}.log"

    def urlopen(self, request, timeout: float = 5):
        """Opens a path (GET self.url + path) or a urllib Request as the admin (client certificate)."""
        if isinstance(request, str):
            request = self.url + request
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(str(self.data_dir / "pki" / "admin.crt"), str(self.data_dir / "pki" / "admin.key"))
        return urllib.request.urlopen(request, timeout=timeout, context=context)

    def start(self):
        self.kubeconfig.unlink(missing_ok=True)  # a restart must not find the last one
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(self.binary), "up", "--data-dir", str(self.data_dir), "--port", str(self.port),
             "--kubeconfig", str(self.kubeconfig), "--log-level", "warning", *self.extra_args],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"modelfleet-local exited: {self.log_path.read_text()}")
            if self.kubeconfig.exists():  # written once the API server answers and the node is Ready
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"modelfleet-local did not become ready in {START_TIMEOUT} s: {self.log_path.read_text()}")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None

    def crash(self):
        """SIGKILL of `up` itself: its components die with it (parent-death signal)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None

    def restart(self):
        self.stop()
        self.start()

    def env(self):
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        return env

    def kubectl(self, *args, input=None, check=True, timeout=60):
        result = subprocess.run([KUBECTL, *args], env=self.env(), input=input, capture_output=True,
                                text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    def kubectl_background(self, *args):
        return subprocess.Popen([KUBECTL, *args], env=self.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)


@pytest.fixture
def local_cluster(tmp_path):
    cluster = LocalCluster(tmp_path)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def widgets(local_cluster):
    """The test CRD applied and established, plus the two sample widgets."""
    local_cluster.kubectl("apply", "-f", str(DATA / "widgets_crd.yaml"))
    local_cluster.kubectl("wait", "--for=condition=Established", "crd/widgets.example.modelfleet.io", "--timeout=20s")
    local_cluster.kubectl("apply", "-f", str(DATA / "widgets.yaml"))
    return local_cluster


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory):
    """One cluster for a whole test module (start and stop cost seconds each); tests that need
    isolation take `namespaced` instead, tests that restart or configure `up` differently start
    their own LocalCluster."""
    cluster = LocalCluster(tmp_path_factory.mktemp("local-cluster"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


class NamespacedCluster:
    """A view of a shared LocalCluster whose kubectl, kubeconfig and namespace default to one
    namespace of its own (the kubeconfig's context names it); everything else is the cluster's."""

    def __init__(self, cluster: LocalCluster, namespace: str):
        self.cluster = cluster
        self.namespace = namespace
        config = yaml.safe_load(cluster.kubeconfig.read_text())
        for context in config["contexts"]:
            context["context"]["namespace"] = namespace
        self.kubeconfig = cluster.tmp / f"kubeconfig-{namespace}"
        self.kubeconfig.write_text(yaml.safe_dump(config))

    def __getattr__(self, name):
        return getattr(self.cluster, name)

    def env(self):
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        return env

    kubectl = LocalCluster.kubectl
    kubectl_background = LocalCluster.kubectl_background


_namespace_numbers = itertools.count()


def namespace_for(test_name: str) -> str:
    """A namespace name (a DNS label) made from a test's name, unique within the session."""
    name = re.sub(r"[^a-z0-9]+", "-", test_name.lower().removeprefix("test_")).strip("-")
    return f"{name[:54].rstrip('-')}-{next(_namespace_numbers)}"


@pytest.fixture
def namespaced(module_cluster, request):
    """The module's cluster seen through a fresh namespace of this test's own (deleted, without
    waiting, afterwards)."""
    name = namespace_for(request.node.name)
    module_cluster.kubectl("create", "namespace", name)
    try:
        yield NamespacedCluster(module_cluster, name)
    finally:
        module_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
