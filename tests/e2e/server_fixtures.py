"""Fixtures for the modelfleet-server end-to-end tests: a model repository in a temporary
directory built from the example models, and a server process on free loopback ports that is
always stopped (SIGTERM, then SIGKILL) when the test ends.
"""
import importlib.util
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest
import requests

from conftest import ROOT, build_dir, free_port

EXAMPLES = ROOT / "examples" / "models"


def server_binary() -> pathlib.Path:
    path = build_dir() / "server" / "main" / "modelfleet-server"
    if not path.exists():
        pytest.skip(f"{path} is not built (build the modelfleet-server target)")
    return path


def load_example(name: str):
    """Imports examples/models/<name>.py as a module (the model builders the tests reuse)."""
    spec = importlib.util.spec_from_file_location(f"mf_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_version(src_base: pathlib.Path, version: int, dst_base: pathlib.Path, as_version=None):
    """Copies <src_base>/<version>/model.onnx into <dst_base>/<as_version>/ atomically (write to
    a temporary name in the target directory, then rename), as a model sync sidecar would."""
    target = dst_base / str(as_version if as_version is not None else version)
    target.mkdir(parents=True, exist_ok=True)
    partial = target / "model.onnx.partial"
    shutil.copyfile(src_base / str(version) / "model.onnx", partial)
    os.replace(partial, target / "model.onnx")


class ServerProcess:
    def __init__(self, args, log_path: pathlib.Path):
        self.rest_port = free_port()
        self.grpc_port = free_port()
        self.log_path = log_path
        cmd = [str(server_binary()), f"--rest_api_port={self.rest_port}", f"--port={self.grpc_port}",
               "--rest_api_address=127.0.0.1", "--grpc_address=127.0.0.1"] + list(args)
        self._log = open(log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.rest_port}"
        self.grpc_target = f"127.0.0.1:{self.grpc_port}"

    def wait_ready(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if requests.get(self.url + "/v2/health/ready", timeout=1).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"server not ready within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-5000:]

    def metrics(self) -> str:
        return requests.get(self.url + "/metrics", timeout=5).text

    def stop(self, timeout=20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
        return self.proc.returncode


@pytest.fixture
def start_server(tmp_path):
    """start_server(args) -> a ready ServerProcess; every one is stopped at teardown."""
    started = []

    def start(args, ready=True):
        server = ServerProcess(args, tmp_path / f"server{len(started)}.log")
        started.append(server)
        return server.wait_ready() if ready else server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def digits_repo(tmp_path):
    """A base path holding versions 1 and 2 of the example digits model."""
    base = tmp_path / "models" / "digits"
    for version in (1, 2):
        copy_version(EXAMPLES / "digits", version, base)
    return base


def wait_for(predicate, timeout=30.0, interval=0.1, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def metric_value(text: str, name: str, **labels) -> float:
    """Sum of the samples of `name` whose labels include `labels` (Prometheus text format)."""
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name) or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        metric, _, label_text = head.partition("{")
        if metric != name:
            continue
        if all(f'{k}="{v}"' in label_text for k, v in labels.items()):
            total += float(value)
    return total
