"""Per-model and per-version placement from a YAML --model_config_file: `device` per model,
`version_devices` per version, the same rules as --device (auto falls back to the CPU without a
GPU, cuda is strict, cpu never tries the GPU); a bad YAML file stops the start, and a bad reload
changes nothing."""
import pathlib
import re
import subprocess
import textwrap

import requests

from conftest import build_dir
from server_fixtures import start_server, digits_repo, wait_for  # noqa: F401

IMAGE = {"instances": [[0.0] * 64]}


def has_gpu() -> bool:
    return pathlib.Path("/dev/nvidia0").exists()


def write_config(path: pathlib.Path, text: str) -> pathlib.Path:
    """Writes atomically (a reload must never read half a file)."""
    partial = path.with_suffix(".partial")
    partial.write_text(textwrap.dedent(text))
    partial.replace(path)
    return path


def version_status(server, model):
    """[] until the server answers (it may still be starting)."""
    try:
        r = requests.get(f"{server.url}/v1/models/{model}", timeout=5)
    except requests.ConnectionError:
        return []
    return r.json().get("model_version_status", []) if r.status_code == 200 else []


def state_of(server, model, version):
    for s in version_status(server, model):
        if s["version"] == str(version):
            return s
    return None


def predict(server, model, version=None):
    path = f"/v1/models/{model}" + (f"/versions/{version}" if version is not None else "") + ":predict"
    return requests.post(server.url + path, json=IMAGE, timeout=10)


def available_on(server, model, version):
    """The device of the version's 'model version available' log line, or None."""
    pattern = re.compile(rf"model version available model={re.escape(model)} version={version} device=(\w+)")
    found = pattern.findall(server.log_path.read_text(errors="replace"))
    return found[-1] if found else None


def wait_failed(server, model, version):
    return wait_for(lambda: (s := state_of(server, model, version)) and s["state"] == "END" and s,
                    what=f"{model} version {version} to fail its load")


def test_each_model_on_its_device(tmp_path, digits_repo, start_server):
    config = write_config(tmp_path / "models.yaml", f"""\
        model_config_list:
        - {{name: on_cpu, base_path: {digits_repo}, device: cpu}}
        - {{name: on_auto, base_path: {digits_repo}, device: auto}}
        - {{name: on_cuda, base_path: {digits_repo}, device: cuda}}
        """)
    # --device=cuda for the server: the models' own devices win over it.
    server = start_server([f"--model_config_file={config}", "--device=cuda"], ready=has_gpu())
    wait_for(lambda: state_of(server, "on_cpu", 2) and state_of(server, "on_cpu", 2)["state"] == "AVAILABLE",
             what="on_cpu to load")
    wait_for(lambda: state_of(server, "on_auto", 2) and state_of(server, "on_auto", 2)["state"] == "AVAILABLE",
             what="on_auto to load")
    for model in ("on_cpu", "on_auto"):
        r = predict(server, model)
        assert r.status_code == 200, r.text
        assert len(r.json()["predictions"][0]) == 10
    assert available_on(server, "on_cpu", 2) == "cpu", server.log()
    if has_gpu():
        wait_for(lambda: available_on(server, "on_cuda", 2), what="on_cuda to load")
        assert available_on(server, "on_cuda", 2) == "cuda", server.log()
        assert available_on(server, "on_auto", 2) == "cuda", server.log()
        assert predict(server, "on_cuda").status_code == 200
        return
    assert available_on(server, "on_auto", 2) == "cpu", server.log()
    failed = wait_failed(server, "on_cuda", 2)
    assert failed["status"]["error_code"] == "UNAVAILABLE", failed
    assert predict(server, "on_cuda").status_code == 404
    # Not ready while a configured model has nothing to serve, as with --device=cuda alone.
    assert requests.get(f"{server.url}/v2/health/ready", timeout=5).status_code != 200
    assert predict(server, "on_cpu").status_code == 200, "the cpu model keeps serving"


def test_version_override(tmp_path, digits_repo, start_server):
    config = write_config(tmp_path / "models.yml", f"""\
        model_config_list:
        - name: digits
          base_path: {digits_repo}
          model_version_policy: {{all: {{}}}}
          device: cpu
          version_devices: {{2: cuda}}
        """)
    server = start_server([f"--model_config_file={config}"], ready=True)
    assert available_on(server, "digits", 1) == "cpu", server.log()
    if has_gpu():
        wait_for(lambda: available_on(server, "digits", 2), what="version 2 to load")
        assert available_on(server, "digits", 2) == "cuda", server.log()
        assert predict(server, "digits", 2).status_code == 200
        return
    failed = wait_failed(server, "digits", 2)
    assert failed["status"]["error_code"] == "UNAVAILABLE", failed
    r = predict(server, "digits")
    assert r.status_code == 200, r.text
    assert r.headers.get("X-Model-Version") == "1", "latest is the version that could load"
    assert predict(server, "digits", 1).status_code == 200
    assert predict(server, "digits", 2).status_code == 404


def test_reload_moves_a_failed_version_and_a_bad_file_changes_nothing(tmp_path, digits_repo, start_server):
    config = tmp_path / "models.yaml"
    write_config(config, f"""\
        model_config_list:
        - {{name: digits, base_path: {digits_repo}, model_version_policy: {{all: {{}}}},
           device: cpu, version_devices: {{2: cuda}}}}
        """)
    server = start_server([f"--model_config_file={config}", "--model_config_file_poll_wait_seconds=1"],
                          ready=True)
    if not has_gpu():
        wait_failed(server, "digits", 2)
    # A file with a mistake: refused whole and logged; what serves keeps serving.
    write_config(config, f"""\
        model_config_list:
        - {{name: digits, base_path: {digits_repo}, device: cpu, version_devices: {{2: cpu}}}}
        - {{name: other, base_path: {digits_repo}, devise: cpu}}
        """)
    wait_for(lambda: "unknown key 'devise'" in server.log_path.read_text(errors="replace"),
             what="the reload to be refused")
    assert "model config reload refused" in server.log()
    assert predict(server, "digits", 1).status_code == 200
    assert version_status(server, "other") == []
    if not has_gpu():
        # Still failing on the GPU it cannot have; a retry (with backoff) may be LOADING right now,
        # so wait for it to end again rather than sampling once.
        assert wait_failed(server, "digits", 2)["status"]["error_code"] == "UNAVAILABLE"

    # The fixed file: version 2 moves to the CPU and loads at once (not after its backoff).
    write_config(config, f"""\
        model_config_list:
        - {{name: digits, base_path: {digits_repo}, model_version_policy: {{all: {{}}}},
           device: cpu, version_devices: {{2: cpu}}}}
        """)
    if not has_gpu():
        wait_for(lambda: available_on(server, "digits", 2) == "cpu", timeout=20, what="version 2 on the CPU")
    assert predict(server, "digits", 2).status_code == 200
    assert predict(server, "digits", 1).status_code == 200


def test_bad_yaml_stops_the_start(tmp_path):
    config = write_config(tmp_path / "models.yaml", """\
        model_config_list:
        - name: digits
          base_path: /models/digits
          device: gpu
        """)
    proc = subprocess.run([str(build_dir() / "server" / "main" / "modelfleet-server"),
                           f"--model_config_file={config}", "--port=0", "--rest_api_port=0"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    assert f"{config}:4:11: device must be auto, cpu or cuda, got 'gpu'" in proc.stderr + proc.stdout
