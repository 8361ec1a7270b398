"""Fixtures for the modelfleet-local end-to-end tests: a local cluster on a free port with a
temporary data directory and kubeconfig, kubectl and the Python client pointed at it. The cluster
serves HTTPS with its own CA (DATA_DIR/pki/ca.crt, also in the kubeconfig) unless tls=False."""
import os
import pathlib
import ssl
import subprocess
import time
import urllib.request

import pytest

from conftest import build_dir, free_port

KUBECTL = "/usr/bin/kubectl"
DATA = pathlib.Path(__file__).resolve().parent / "local_data"


class LocalCluster:
    def __init__(self, tmp: pathlib.Path, workloads: bool = False, extra_args=(), tls: bool = True):
        self.binary = build_dir() / "tools" / "local" / "modelfleet-local"
        if not self.binary.exists():
            pytest.skip(f"{self.binary} is not built")
        self.data_dir = tmp / "data"
        self.kubeconfig = tmp / "kubeconfig"
        self.port = free_port()
        self.workloads = workloads
        self.tls = tls
        self.extra_args = list(extra_args)
        self.proc = None
        self.log_path = tmp / "modelfleet-local.log"

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> pathlib.Path:
        return self.data_dir / "pki" / "ca.crt"

    def urlopen(self, request, timeout: float = 5):
        """Opens a path (GET self.url + path) or a urllib Request, trusting the cluster's CA."""
        if isinstance(request, str):
            request = self.url + request
        context = ssl.create_default_context(cafile=str(self.ca_file)) if self.tls else None
        return urllib.request.urlopen(request, timeout=timeout, context=context)

    def start(self):
        self.kubeconfig.unlink(missing_ok=True)  # a restart must not find the last one
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [str(self.binary), "up", "--data-dir", str(self.data_dir), "--port", str(self.port),
             "--kubeconfig", str(self.kubeconfig), f"--workloads={'true' if self.workloads else 'false'}",
             "--log-level", "warning", f"--tls={'true' if self.tls else 'false'}", *self.extra_args],
            stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"modelfleet-local exited: {self.log_path.read_text()}")
            try:
                if self.kubeconfig.exists():  # written once it listens (and, with TLS, has its CA)
                    with self.urlopen("/readyz", timeout=1) as r:
                        if r.status == 200:
                            return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("modelfleet-local did not become ready in 20 s")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
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
