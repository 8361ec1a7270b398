"""Model placement: --device=auto serves on the GPU when the runtime has one and on the CPU
otherwise; --device=cuda never falls back silently; --gpu_memory_fraction is exported."""
import pathlib
import subprocess

import requests

from conftest import build_dir
from server_fixtures import metric_value, start_server, digits_repo, wait_for  # noqa: F401


def has_gpu() -> bool:
    return pathlib.Path("/dev/nvidia0").exists()


def version_status(server, model="digits"):
    """[] until the server answers (it may still be starting)."""
    try:
        return requests.get(f"{server.url}/v1/models/{model}", timeout=5).json()["model_version_status"]
    except requests.ConnectionError:
        return []


def test_auto_serves_and_reports_where(digits_repo, start_server):
    server = start_server([f"--model_base_path={digits_repo}", "--model_name=digits",
                           "--gpu_memory_fraction=0.5"])
    r = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": [[0.0] * 64]},
                      timeout=10)
    assert r.status_code == 200, r.text
    metrics = server.metrics()
    assert metric_value(metrics, "modelfleet_gpu_memory_fraction") == 0.5
    assert metric_value(metrics, "modelfleet_device_choice_info", device="auto") == 1
    log = server.log()
    if has_gpu():
        assert "device=cuda" in log, log
        assert metric_value(metrics, "modelfleet_model_gpu_memory_bytes", model="digits", version="2") > 0
    else:
        assert "no usable GPU; --device=auto loads models on the CPU" in log, log
        assert "device=cpu" in log, log
        assert "modelfleet_model_gpu_memory_bytes{" not in metrics


def test_cuda_is_strict(digits_repo, start_server):
    server = start_server([f"--model_base_path={digits_repo}", "--model_name=digits", "--device=cuda"],
                          ready=has_gpu())
    if has_gpu():
        assert "device=cuda" in server.log()
        return
    # No GPU: the version is refused (and retried), never quietly run on the CPU.
    status = wait_for(lambda: [s for s in version_status(server) if s["state"] == "END"],
                      what="the version to fail its load")
    assert status[0]["status"]["error_code"] == "UNAVAILABLE", status
    assert requests.get(f"{server.url}/v2/health/ready", timeout=5).status_code != 200
    r = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": [[0.0] * 64]},
                      timeout=10)
    assert r.status_code == 404, r.text


def test_cpu_never_touches_the_gpu(digits_repo, start_server):
    server = start_server([f"--model_base_path={digits_repo}", "--model_name=digits", "--device=cpu"])
    assert "no usable GPU" not in server.log()
    assert "device=cpu" in server.log()


def test_unknown_precision_is_refused_at_start(tmp_path):
    proc = subprocess.run([str(build_dir() / "server" / "main" / "modelfleet-server"), "--precision=fp8",
                           "--model_name=digits", f"--model_base_path={tmp_path}", "--port=0", "--rest_api_port=0"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert "--precision must be fp32, tf32 or fp16, got 'fp8'" in proc.stderr + proc.stdout
