"""modelfleet-router end to end, static mode (--config): real HTTP backends (small threaded
Python servers that say who they are) behind the router binary. Weighted split, header routes,
sticky keys, a config edit under concurrent load, retries, timeouts, ejection, mirroring, the
503 when nothing is ready, and the metrics (docs/router.md)."""
import collections
import json
import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from conftest import build_dir, free_port
from server_fixtures import metric_value, wait_for


def router_binary():
    path = build_dir() / "server" / "router" / "modelfleet-router"
    if not path.exists():
        pytest.skip(f"{path} is not built (build the modelfleet-router target)")
    return path


class Backend:
    """An HTTP/1.1 keep-alive server answering every method with JSON naming itself and echoing
    what it received. `delay` slows answers; `body` overrides the JSON for predictions."""

    def __init__(self, name, host="127.0.0.1"):
        self.name = name
        self.delay = 0.0
        self.predictions = [[0.25, 0.75]]
        self.response_headers = {}  # sent with every answer
        self.requests = []
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are separate writes

            def log_message(self, *args):
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                backend.requests.append((self.command, self.path, headers, body))
                if backend.delay:
                    time.sleep(backend.delay)
                payload = json.dumps({"backend": backend.name, "method": self.command, "path": self.path,
                                      "predictions": backend.predictions}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in backend.response_headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _answer

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.address = f"{host}:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Router:
    def __init__(self, config_path, log_path, *flags, source=None):
        self.rest_port = free_port()
        self.admin_port = free_port()
        self.log_path = log_path
        self._log = open(log_path, "wb")
        cmd = [str(router_binary()), source or f"--config={config_path}", f"--rest-port={self.rest_port}",
               "--grpc-port=0", f"--admin-port={self.admin_port}", "--io-threads=2", "--upstream-threads=2",
               *flags]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.rest_port}"
        self.admin = f"http://127.0.0.1:{self.admin_port}"

    def wait_ready(self, timeout=20.0):
        def ready():
            if self.proc.poll() is not None:
                raise RuntimeError(f"router exited with {self.proc.returncode}:\n{self.log()}")
            try:
                return requests.get(self.admin + "/readyz", timeout=1).status_code == 200
            except requests.RequestException:
                return False
        wait_for(ready, timeout=timeout, what="router /readyz")
        return self

    def metrics(self):
        return requests.get(self.admin + "/metrics", timeout=5).text

    def log(self):
        self._log.flush()
        return self.log_path.read_text(errors="replace")[-5000:]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self._log.close()
        return self.proc.returncode


def write_config(path, versions, routes=None, sticky=None, mirror=None, model="my_mnist_model"):
    """Writes router.yaml (as JSON, which is YAML) atomically: a new file renamed into place."""
    config = {"model": model, "versions": versions}
    if routes:
        config["routes"] = routes
    if sticky:
        config["stickyBy"] = sticky
    if mirror:
        config["mirror"] = mirror
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(config, indent=1))
    os.replace(partial, path)


@pytest.fixture
def backends():
    started = {}

    def make(name):
        started[name] = Backend(name)
        return started[name]

    yield make
    for backend in started.values():
        backend.stop()


@pytest.fixture
def start_router(tmp_path):
    started = []

    def start(*flags, ready=True):
        router = Router(tmp_path / "router.yaml", tmp_path / f"router{len(started)}.log", *flags)
        started.append(router)
        return router.wait_ready() if ready else router

    yield start
    for router in started:
        assert router.stop() == 0, router.log()


def versions_of(router, n, session=None, headers=None, path="/v1/models/my_mnist_model"):
    session = session or requests.Session()
    counts = collections.Counter()
    for _ in range(n):
        r = session.get(router.url + path, headers=headers or {}, timeout=10)
        assert r.status_code == 200, r.text
        assert r.headers["x-modelfleet-version"] == r.json()["backend"].split("-")[0]
        counts[r.headers["x-modelfleet-version"]] += 1
    return counts


def test_weighted_split_70_30_over_keep_alive(tmp_path, backends, start_router):
    v1a, v1b, v2 = backends("v1-a"), backends("v1-b"), backends("v2-a")
    write_config(tmp_path / "router.yaml", [
        {"name": "v1", "service": "mnist-v1", "weight": 70, "endpoints": [v1a.address, v1b.address]},
        {"name": "v2", "service": "mnist-v2", "weight": 30, "endpoints": [v2.address]},
    ])
    router = start_router()
    counts = versions_of(router, 2000)
    assert abs(counts["v1"] / 2000 - 0.70) <= 0.04, counts
    assert abs(counts["v2"] / 2000 - 0.30) <= 0.04, counts
    # Both v1 endpoints took a share (least outstanding with ties spread randomly).
    assert len(v1a.requests) > 200 and len(v1b.requests) > 200
    # The proxy forwards method, path and body, and tags the request.
    r = requests.post(router.url + "/v1/models/my_mnist_model:predict", json={"instances": [[1.0]]}, timeout=5)
    assert r.status_code == 200
    backend = {"v1-a": v1a, "v1-b": v1b, "v2-a": v2}[r.json()["backend"]]
    method, path, headers, body = backend.requests[-1]
    assert (method, path, json.loads(body)) == ("POST", "/v1/models/my_mnist_model:predict", {"instances": [[1.0]]})
    assert headers.get("x-forwarded-for") == "127.0.0.1"
    assert headers.get("x-request-id")
    assert "content-length" in r.headers and "x-modelfleet-version" in r.headers
    metrics = router.metrics()
    assert metric_value(metrics, "modelfleet_router_requests_total", version="v1", code="200") == counts["v1"] + (
        r.headers["x-modelfleet-version"] == "v1")
    assert metric_value(metrics, "modelfleet_router_ready_endpoints", version="v1", protocol="rest") == 2
    assert metric_value(metrics, "modelfleet_router_request_duration_seconds_count", version="v2") >= counts["v2"]
    assert metric_value(metrics, "modelfleet_router_config_generation") == 1
    # A proxy before us is kept in x-forwarded-for; hop-by-hop fields (also those Connection
    # names) stop here; the client's x-request-id is the one passed on.
    r = requests.get(router.url + "/v1/models/m", timeout=5, headers={
        "x-forwarded-for": "10.1.2.3", "connection": "keep-alive, x-hop", "x-hop": "1", "x-end-to-end": "2",
        "x-request-id": "from-client"})
    backend = {"v1-a": v1a, "v1-b": v1b, "v2-a": v2}[r.json()["backend"]]
    headers = backend.requests[-1][2]
    assert headers.get("x-forwarded-for") == "10.1.2.3, 127.0.0.1"
    assert "x-hop" not in headers and headers.get("x-end-to-end") == "2", headers
    assert headers.get("x-request-id") == "from-client" and r.headers["x-request-id"] == "from-client"
    # The same for the answer: the upstream's hop-by-hop fields (and those its Connection names)
    # do not reach the client; its end-to-end ones do.
    for b in (v1a, v1b, v2):
        b.response_headers = {"Connection": "keep-alive, x-resp-hop", "X-Resp-Hop": "1", "X-Resp-End": "2"}
    r = requests.get(router.url + "/v1/models/m", timeout=5)
    assert r.status_code == 200 and r.headers.get("x-resp-end") == "2", r.headers
    assert "x-resp-hop" not in r.headers, r.headers


def test_header_route_and_sticky_users(tmp_path, backends, start_router):
    v1, v2 = backends("v1-a"), backends("v2-a")
    write_config(tmp_path / "router.yaml", [
        {"name": "v1", "service": "s1", "weight": 50, "endpoints": [v1.address]},
        {"name": "v2", "service": "s2", "weight": 50, "endpoints": [v2.address]},
    ], routes=[{"header": "x-experiment", "value": "b", "version": "v2"}], sticky={"header": "x-user-id"})
    router = start_router()
    assert versions_of(router, 50, headers={"X-Experiment": "b"}) == {"v2": 50}
    session = requests.Session()
    seen = collections.Counter()
    for user in range(40):
        counts = versions_of(router, 10, session=session, headers={"x-user-id": f"user-{user}"})
        assert len(counts) == 1, (user, counts)  # a user stays on one version
        seen.update(counts.keys())
    assert seen["v1"] > 5 and seen["v2"] > 5, seen  # and users spread over both
    # The route wins over the sticky key.
    assert versions_of(router, 5, headers={"x-user-id": "user-1", "x-experiment": "b"}) == {"v2": 5}


def test_config_edit_applies_within_two_seconds_without_failed_requests(tmp_path, backends, start_router):
    v1, v2 = backends("v1-a"), backends("v2-a")
    config = tmp_path / "router.yaml"
    versions = [{"name": "v1", "service": "s1", "weight": 100, "endpoints": [v1.address]},
                {"name": "v2", "service": "s2", "weight": 0, "endpoints": [v2.address]}]
    write_config(config, versions)
    router = start_router()

    stop = threading.Event()
    failures, results = [], []
    lock = threading.Lock()

    def load():
        session = requests.Session()
        while not stop.is_set():
            try:
                r = session.post(router.url + "/v1/models/my_mnist_model:predict", json={"instances": [1]}, timeout=10)
                with lock:
                    if r.status_code != 200:
                        failures.append((r.status_code, r.text))
                    results.append((time.monotonic(), r.headers.get("x-modelfleet-version")))
            except requests.RequestException as e:
                with lock:
                    failures.append(repr(e))

    threads = [threading.Thread(target=load) for _ in range(6)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        versions[0]["weight"], versions[1]["weight"] = 0, 100
        edited = time.monotonic()
        write_config(config, versions)
        wait_for(lambda: any(t > edited and v == "v2" for t, v in list(results)), timeout=2.0,
                 what="the edited weights to apply")
        # Once applied, v1 gets nothing more.
        applied = time.monotonic()
        time.sleep(0.5)
        with lock:
            late_v1 = [t for t, v in results if t > applied + 0.05 and v == "v1"]
        assert not late_v1
        # An in-place edit (truncate and write, not a rename) is noticed too.
        versions[0]["weight"], versions[1]["weight"] = 100, 0
        config.write_text(json.dumps({"model": "m", "versions": versions}))
        edited = time.monotonic()
        wait_for(lambda: any(t > edited and v == "v1" for t, v in list(results)), timeout=2.5,
                 what="the in-place edit to apply")
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not failures, failures[:5]
    assert len(results) > 100
    assert metric_value(router.metrics(), "modelfleet_router_config_generation") == 3


def test_bad_config_keeps_the_previous_snapshot(tmp_path, backends, start_router):
    v1 = backends("v1-a")
    config = tmp_path / "router.yaml"
    write_config(config, [{"name": "v1", "service": "s1", "weight": 100, "endpoints": [v1.address]}])
    router = start_router()
    config.write_text("versions: [{name: v1, weight: 60, endpoints: ['%s']}]\n" % v1.address)
    wait_for(lambda: metric_value(router.metrics(), "modelfleet_router_config_errors_total") == 1, timeout=3,
             what="the config error to be counted")
    assert versions_of(router, 20) == {"v1": 20}
    assert "must sum to 100, got 60 (v1) = 60" in router.log()
    assert requests.get(router.admin + "/readyz", timeout=2).status_code == 200


def test_no_ready_endpoint_is_a_clear_503(tmp_path, start_router):
    write_config(tmp_path / "router.yaml", [{"name": "v1", "service": "s1", "weight": 90, "endpoints": []},
                                            {"name": "v2", "service": "s2", "weight": 10}])
    router = start_router()
    r = requests.post(router.url + "/v1/models/my_mnist_model:predict", json={"instances": [1]}, timeout=5)
    assert r.status_code == 503
    assert r.json() == {"error": "no ready endpoint for model my_mnist_model (versions: v1 0/0 ready, v2 0/0 ready)"}
    assert metric_value(router.metrics(), "modelfleet_router_requests_total", version="none", code="503") == 1


def test_refused_router_config_at_start_exits_with_the_reason(tmp_path):
    config = tmp_path / "router.yaml"
    config.write_text("versions: [{name: v1, wieght: 100}]\n")
    out = subprocess.run([str(router_binary()), f"--config={config}", "--rest-port=0", "--admin-port=0",
                          "--grpc-port=0"], capture_output=True, text=True, timeout=10)
    assert out.returncode == 1
    assert "unknown key 'wieght' in a version" in out.stderr + out.stdout


@pytest.mark.parametrize("flag, message", [
    ("--not-ready-grace-seconds=-1", "--drain-seconds and --not-ready-grace-seconds must not be negative"),
    ("--drain-seconds=-5", "--drain-seconds and --not-ready-grace-seconds must not be negative"),
    ("--upstream-timeout-ms=0", "--upstream-timeout-ms and --connect-timeout-ms must be positive"),
    ("--rest-port=70000", "--rest-port must be in 0..65535"),
])
def test_bad_flags_exit_with_the_reason(tmp_path, flag, message):
    config = tmp_path / "router.yaml"
    write_config(config, [{"name": "v1", "service": "s1", "weight": 100, "endpoints": ["127.0.0.1:1"]}])
    out = subprocess.run([str(router_binary()), f"--config={config}", "--rest-port=0", "--admin-port=0",
                          "--grpc-port=0", flag], capture_output=True, text=True, timeout=10)
    assert out.returncode == 1
    assert message in out.stderr + out.stdout


def test_retries_on_another_endpoint_and_ejects_a_dead_one(tmp_path, backends, start_router):
    live = backends("v1-a")
    dead = f"127.0.0.1:{free_port()}"  # nothing listens: connection refused
    write_config(tmp_path / "router.yaml", [
        {"name": "v1", "service": "s1", "weight": 100, "endpoints": [live.address, dead]}])
    router = start_router("--eject-after-failures=3", "--eject-seconds=60")
    session = requests.Session()
    for _ in range(40):
        assert session.get(router.url + "/v1/models/m", timeout=5).status_code == 200
        assert session.post(router.url + "/v1/models/m:predict", json={}, timeout=5).status_code == 200
        assert session.post(router.url + "/v2/models/m/infer", json={}, timeout=5).status_code == 200
    metrics = router.metrics()
    retries = metric_value(metrics, "modelfleet_router_retries_total", version="v1")
    assert 3 <= retries < 20, retries  # a few before the dead endpoint was ejected, then none
    assert metric_value(metrics, "modelfleet_router_ejections_total", version="v1") == 1
    # A POST that is not inference is not sent twice: with only a dead endpoint it fails with 502.
    write_config(tmp_path / "router.yaml", [{"name": "v1", "service": "s1", "weight": 100, "endpoints": [dead]}])
    wait_for(lambda: metric_value(router.metrics(), "modelfleet_router_config_generation") == 2, timeout=3,
             what="the new config")
    r = session.post(router.url + "/v1/models/m/reload", json={}, timeout=5)
    assert r.status_code == 502
    assert f"upstream version v1 endpoint {dead} failed: cannot connect to {dead}" in r.json()["error"]


def test_refused_requests_go_on_to_every_other_endpoint_then_another_version(tmp_path, backends, start_router):
    """Pods that went away while the router still lists them (their EndpointSlice change not yet
    applied) refuse connections: a request is sent on until an endpoint serves it, past several
    refusing ones of its version and then to another version, whatever its method. With no
    ejection, every request that lands on a refusing endpoint shows the retry path."""
    live_v1, live_v2 = backends("v1-a"), backends("v2-a")
    gone = [f"127.0.0.1:{free_port()}" for _ in range(3)]  # nothing listens: connection refused
    write_config(tmp_path / "router.yaml", [
        {"name": "v1", "service": "s1", "weight": 100, "endpoints": [gone[0], gone[1], live_v1.address]},
        {"name": "v2", "service": "s2", "weight": 0, "endpoints": [gone[2], live_v2.address]}])
    router = start_router("--eject-after-failures=0")
    session = requests.Session()
    for _ in range(60):
        r = session.post(router.url + "/v1/models/m/reload", json={}, timeout=5)  # not retry-safe: still resent
        assert r.status_code == 200 and r.json()["backend"] == "v1-a", r.text
    assert metric_value(router.metrics(), "modelfleet_router_retries_total", version="v1") >= 20
    # v1's live endpoint gone too: its requests go on to v2, past v2's refusing endpoint.
    write_config(tmp_path / "router.yaml", [
        {"name": "v1", "service": "s1", "weight": 100, "endpoints": [gone[0], gone[1]]},
        {"name": "v2", "service": "s2", "weight": 0, "endpoints": [gone[2], live_v2.address]}])
    wait_for(lambda: metric_value(router.metrics(), "modelfleet_router_config_generation") == 2, timeout=3,
             what="the new config")
    for _ in range(30):
        r = session.post(router.url + "/v1/models/m:predict", json={}, timeout=5)
        assert r.status_code == 200 and r.json()["backend"] == "v2-a", r.text
        assert r.headers["x-modelfleet-version"] == "v2"
    # Nothing left that listens: the 502 names every refusal.
    write_config(tmp_path / "router.yaml", [{"name": "v1", "service": "s1", "weight": 100, "endpoints": gone}])
    wait_for(lambda: metric_value(router.metrics(), "modelfleet_router_config_generation") == 3, timeout=3,
             what="the third config")
    r = session.post(router.url + "/v1/models/m:predict", json={}, timeout=5)
    assert r.status_code == 502
    assert "(after 2 retries: cannot connect to" in r.json()["error"], r.text


def test_a_request_to_the_only_endpoint_that_went_away_waits_for_its_successor(tmp_path, backends, start_router):
    """A version's one pod went away and its replacement is not in the router's list yet (the
    EndpointSlice update is on its way): the refused request waits for the list to change, up to
    3 s, and is served by the new endpoint instead of failing (docs/router.md, Retry)."""
    successor = backends("v1-b")
    gone = f"127.0.0.1:{free_port()}"
    config = tmp_path / "router.yaml"
    write_config(config, [{"name": "v1", "service": "s1", "weight": 100, "endpoints": [gone]}])
    router = start_router("--eject-after-failures=0")
    answers = []
    sender = threading.Thread(target=lambda: answers.append(
        requests.post(router.url + "/v1/models/m:predict", json={}, timeout=10)))
    sender.start()
    time.sleep(0.5)
    write_config(config, [{"name": "v1", "service": "s1", "weight": 100, "endpoints": [gone, successor.address]}])
    sender.join(timeout=10)
    assert answers and answers[0].status_code == 200, answers and answers[0].text
    assert answers[0].json()["backend"] == "v1-b"
    assert metric_value(router.metrics(), "modelfleet_router_retries_total", version="v1") == 1
    # No successor within the wait: the 502 says how long the request waited.
    write_config(config, [{"name": "v1", "service": "s1", "weight": 100, "endpoints": [gone]}])
    wait_for(lambda: metric_value(router.metrics(), "modelfleet_router_config_generation") == 3, timeout=3,
             what="the third config")
    started = time.monotonic()
    r = requests.post(router.url + "/v1/models/m:predict", json={}, timeout=10)
    assert r.status_code == 502
    assert "(waited 3000 ms for another endpoint)" in r.json()["error"], r.text
    assert 2.9 < time.monotonic() - started < 6


def test_sigterm_turns_readyz_off_then_serves_through_the_grace_then_exits(tmp_path, backends, start_router):
    """On SIGTERM the router answers not-ready at once but goes on proxying for
    --not-ready-grace-seconds (its Service stops sending meanwhile), then drains and exits 0."""
    v1 = backends("v1-a")
    write_config(tmp_path / "router.yaml", [{"name": "v1", "service": "s1", "weight": 100, "endpoints": [v1.address]}])
    router = start_router("--not-ready-grace-seconds=2")
    assert requests.get(router.admin + "/readyz", timeout=2).status_code == 200
    router.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: requests.get(router.admin + "/readyz", timeout=2).status_code == 503, timeout=2,
             what="/readyz to turn 503")
    r = requests.post(router.url + "/v1/models/m:predict", json={}, timeout=5)
    assert r.status_code == 200 and r.json()["backend"] == "v1-a"  # still serving within the grace
    assert router.proc.wait(timeout=15) == 0
    assert "shutting down: not ready, then draining" in router.log()


def test_upstream_timeout_is_a_504(tmp_path, backends, start_router):
    slow = backends("v1-a")
    slow.delay = 2.0
    write_config(tmp_path / "router.yaml", [{"name": "v1", "service": "s1", "weight": 100, "endpoints": [slow.address]}])
    router = start_router("--upstream-timeout-ms=300")
    started = time.monotonic()
    r = requests.get(router.url + "/v1/models/m", timeout=5)
    assert r.status_code == 504
    assert time.monotonic() - started < 1.5
    assert r.json()["error"] == f"upstream version v1 endpoint {slow.address} did not answer within 300 ms"


def test_mirror_sends_copies_and_counts_disagreements(tmp_path, backends, start_router):
    v1, v2 = backends("v1-a"), backends("v2-a")
    write_config(tmp_path / "router.yaml", [
        {"name": "v1", "service": "s1", "weight": 100, "endpoints": [v1.address]},
        {"name": "v2", "service": "s2", "weight": 0, "endpoints": [v2.address]},
    ], mirror={"version": "v2", "percent": 50})
    router = start_router()
    session = requests.Session()
    v2.predictions = [[0.25 + 1e-6, 0.75]]  # within the tolerance: agrees
    for _ in range(200):
        r = session.post(router.url + "/v1/models/my_mnist_model:predict", json={"instances": [1]}, timeout=5)
        assert r.status_code == 200 and r.json()["backend"] == "v1-a"  # the mirror's answer is never returned
    wait_for(lambda: metric_value(router.metrics(), "modelfleet_router_mirrored_total", version="v2") == len(v2.requests),
             timeout=3, what="mirrored requests to arrive")
    mirrored = len(v2.requests)
    assert 60 <= mirrored <= 140, mirrored
    assert metric_value(router.metrics(), "modelfleet_router_mirror_disagreements_total", version="v2") == 0
    v2.predictions = [[0.5, 0.5]]
    for _ in range(100):
        session.post(router.url + "/v1/models/my_mnist_model:predict", json={"instances": [1]}, timeout=5)
    time.sleep(0.3)
    disagreements = metric_value(router.metrics(), "modelfleet_router_mirror_disagreements_total", version="v2")
    assert disagreements == len(v2.requests) - mirrored and disagreements > 20


def test_requests_per_endpoint_limit(tmp_path, backends, start_router):
    slow = backends("v1-a")
    slow.delay = 1.0
    write_config(tmp_path / "router.yaml", [{"name": "v1", "service": "s1", "weight": 100, "endpoints": [slow.address]}])
    router = start_router("--max-requests-per-endpoint=2")
    results = []

    def one():
        r = requests.get(router.url + "/v1/models/m", timeout=10)
        results.append((r.status_code, r.json()))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    codes = sorted(code for code, _ in results)
    assert codes == [200, 200, 503, 503], results
    refused = [body for code, body in results if code == 503][0]
    assert refused["error"] == ("all 1 ready endpoints of version v1 of model my_mnist_model have 2 requests in "
                                "flight (--max-requests-per-endpoint)")
