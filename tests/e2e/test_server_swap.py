"""Version changes while clients are sending: hot swaps and rollbacks, a storage glitch, and a
truncated new version. The clients must see zero failed requests throughout."""
import os
import shutil
import threading
import time

import requests

from server_fixtures import (EXAMPLES, copy_version, metric_value, start_server,  # noqa: F401
                             wait_for)

POLL = "--file_system_poll_wait_seconds=0.2"
X = [[float((3 * i) % 17) for i in range(64)]]


class Load:
    """Client threads posting predictions until stopped; they record every answer."""

    def __init__(self, url, threads=4):
        self.url = f"{url}/v1/models/digits:predict"
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.failures = []
        self.versions = []
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self):
        session = requests.Session()
        while not self.stop_event.is_set():
            try:
                r = session.post(self.url, json={"instances": X}, timeout=10)
                with self.lock:
                    if r.status_code == 200 and len(r.json()["predictions"]) == 1:
                        self.versions.append(int(r.headers["X-Model-Version"]))
                    else:
                        self.failures.append(f"{r.status_code} {r.text[:200]}")
            except requests.RequestException as e:
                with self.lock:
                    self.failures.append(repr(e))

    def last_version(self):
        with self.lock:
            return self.versions[-1] if self.versions else None

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=30)


def serving_version(load, version, timeout=30):
    """Waits until the clients' latest answer came from `version` (a few answers in a row)."""
    def seen():
        with load.lock:
            return len(load.versions) >= 3 and load.versions[-3:] == [version] * 3
    wait_for(seen, timeout=timeout, what=f"responses from version {version}")


def test_hot_swap_and_rollback_under_load(tmp_path, start_server):
    base = tmp_path / "digits"
    copy_version(EXAMPLES / "digits", 1, base)
    server = start_server(["--model_name=digits", f"--model_base_path={base}", POLL])
    with Load(server.url) as load:
        serving_version(load, 1)
        # 10 cycles of: a new version 2 arrives (alternating weights), then is deleted, which
        # rolls back to version 1: 20 version changes, each one while clients are sending.
        for cycle in range(10):
            copy_version(EXAMPLES / "digits", 1 + cycle % 2, base, as_version=2)
            serving_version(load, 2)
            shutil.rmtree(base / "2")
            serving_version(load, 1)
    assert load.failures == [], load.failures[:5]
    assert len(load.versions) > 20


def test_storage_glitch_keeps_serving(tmp_path, start_server):
    """The base path disappears for 5 s. With polls every 0.2 s that is 25 polls that find
    nothing: the same code path a 30 s outage at the default 1 s poll takes, in a sixth of
    the time."""
    base = tmp_path / "digits"
    copy_version(EXAMPLES / "digits", 2, base)
    server = start_server(["--model_name=digits", f"--model_base_path={base}", POLL])
    moved = tmp_path / "moved-away"
    with Load(server.url) as load:
        serving_version(load, 2)
        os.rename(base, moved)
        time.sleep(5)
        status = requests.get(f"{server.url}/v1/models/digits", timeout=5).json()
        entry = status["model_version_status"][0]
        assert entry["version"] == "2" and entry["state"] == "AVAILABLE"
        assert entry["status"]["error_code"] == "NOT_FOUND", entry
        assert requests.get(f"{server.url}/v2/health/ready", timeout=5).status_code == 200
        os.rename(moved, base)
        time.sleep(1)
    assert load.failures == [], load.failures[:5]
    assert set(load.versions) == {2}
    status = requests.get(f"{server.url}/v1/models/digits", timeout=5).json()
    assert status["model_version_status"][0]["status"]["error_code"] == "OK"
    assert metric_value(server.metrics(), "modelfleet_model_storage_errors_total", model="digits") > 0
    assert "loaded versions keep serving" in server.log()


def test_truncated_version_refused_then_loaded_when_complete(tmp_path, start_server):
    base = tmp_path / "digits"
    copy_version(EXAMPLES / "digits", 1, base)
    server = start_server(["--model_name=digits", f"--model_base_path={base}", POLL])
    complete = (EXAMPLES / "digits" / "2" / "model.onnx").read_bytes()
    with Load(server.url) as load:
        serving_version(load, 1)
        (base / "2").mkdir()
        (base / "2" / "model.onnx").write_bytes(complete[: len(complete) // 2])

        def failed_status():
            versions = requests.get(f"{server.url}/v1/models/digits", timeout=5).json()
            return [v for v in versions["model_version_status"]
                    if v["version"] == "2" and v["status"]["error_code"] != "OK"]
        failed = wait_for(failed_status, what="version 2 to fail loading")
        assert failed[0]["state"] == "END" and failed[0]["status"]["error_message"]
        time.sleep(1)
        assert load.last_version() == 1, "the previous version keeps serving"

        with open(base / "2" / "model.onnx", "ab") as f:  # the copy finishes
            f.write(complete[len(complete) // 2:])
        serving_version(load, 2)
    assert load.failures == [], load.failures[:5]
    assert metric_value(server.metrics(), "modelfleet_model_load_failures_total", model="digits") >= 1


def test_base_path_move_by_config_reload_under_load(tmp_path, start_server):
    """A ReloadConfig that moves the model to another base path: the old path's version serves
    until the new path's is AVAILABLE (no 404 gap), and the reload answers once it is."""
    import grpc
    import proto_stubs
    management = proto_stubs.module("tensorflow_serving.apis.model_management_pb2")
    model_services = proto_stubs.module("tensorflow_serving.apis.model_service_pb2_grpc")
    old_base, new_base = tmp_path / "old", tmp_path / "new"
    copy_version(EXAMPLES / "digits", 1, old_base)
    copy_version(EXAMPLES / "digits", 2, new_base)
    server = start_server(["--model_name=digits", f"--model_base_path={old_base}", POLL])
    with Load(server.url) as load, grpc.insecure_channel(server.grpc_target) as channel:
        serving_version(load, 1)
        reload = management.ReloadConfigRequest()
        reload.config.model_config_list.config.add(name="digits", base_path=str(new_base))
        response = model_services.ModelServiceStub(channel).HandleReloadConfigRequest(reload, timeout=30)
        assert response.status.error_code == 0, response.status.error_message
        serving_version(load, 2, timeout=5)
    assert load.failures == [], load.failures[:5]
    wait_for(lambda: "previous base path's versions unloaded" in server.log(), timeout=10,
             what="the old path's version unloaded")


def test_poll_once_serves_what_was_there_at_start(tmp_path, start_server):
    """--file_system_poll_wait_seconds=0 (TF Serving's "poll once"): the versions present at start
    are served; one that appears later is not picked up."""
    base = tmp_path / "digits"
    copy_version(EXAMPLES / "digits", 1, base)
    server = start_server(["--model_name=digits", f"--model_base_path={base}",
                           "--file_system_poll_wait_seconds=0"])
    copy_version(EXAMPLES / "digits", 2, base)
    time.sleep(3.5)  # a 1 s poll would have seen it twice and loaded it by now
    r = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": X}, timeout=10)
    assert r.status_code == 200 and r.headers["X-Model-Version"] == "1", r.text
    versions = [v["version"] for v in requests.get(f"{server.url}/v1/models/digits", timeout=5).json()
                ["model_version_status"]]
    assert versions == ["1"], versions
