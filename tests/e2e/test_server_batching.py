"""Dynamic batching: 64 concurrent clients on a CNN get the same numbers as unbatched requests,
and the batch size metrics show that batches of more than one request really ran."""
import re
import subprocess
import sys
import threading
import time

import numpy as np
import requests
from sklearn.datasets import load_digits

import proto_stubs
from server_fixtures import EXAMPLES, metric_value, start_server  # noqa: F401

CLIENTS = 64


def make_cnn(base):
    subprocess.run([sys.executable, str(EXAMPLES / "make_cnn.py"), "--out", str(base),
                    "--version", "1", "--epochs", "3"], check=True, timeout=240,
                   capture_output=True)


def test_concurrent_clients_are_batched(tmp_path, start_server):
    base = tmp_path / "cnn"
    make_cnn(base)
    params = tmp_path / "batching.config"
    params.write_text("max_batch_size { value: 32 }\n"
                      "batch_timeout_micros { value: 20000 }\n"
                      "max_enqueued_batches { value: 100 }\n"
                      "num_batch_threads { value: 2 }\n"
                      "allowed_batch_sizes: 8 allowed_batch_sizes: 16 allowed_batch_sizes: 32\n")
    batched = start_server(["--model_name=cnn", f"--model_base_path={base}", "--enable_batching",
                            f"--batching_parameters_file={params}"])
    plain = start_server(["--model_name=cnn", f"--model_base_path={base}"])

    images = load_digits().images[:CLIENTS].astype(np.float32).reshape(CLIENTS, 1, 8, 8)
    expected = np.array(requests.post(f"{plain.url}/v1/models/cnn:predict",
                                      json={"instances": images.tolist()}, timeout=60)
                        .json()["predictions"])

    results = [None] * CLIENTS
    barrier = threading.Barrier(CLIENTS)

    def client(i):
        session = requests.Session()
        barrier.wait(timeout=30)
        r = session.post(f"{batched.url}/v1/models/cnn:predict",
                         json={"instances": images[i:i + 1].tolist()}, timeout=60)
        results[i] = (r.status_code, r.json())

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(r is not None and r[0] == 200 for r in results), [r for r in results if not r or r[0] != 200][:3]
    got = np.array([r[1]["predictions"][0] for r in results])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)

    metrics = batched.metrics()
    batches = metric_value(metrics, "modelfleet_batch_size_count", model="cnn")
    rows = metric_value(metrics, "modelfleet_batch_size_sum", model="cnn")
    assert rows == CLIENTS, "every request's row went through a batch (warm-up runs unbatched)"
    assert 0 < batches < CLIENTS / 2, f"{batches} batches for {CLIENTS} concurrent requests"
    assert metric_value(metrics, "modelfleet_batch_size_bucket", model="cnn", le="1") < batches
    assert metric_value(metrics, "modelfleet_queue_latency_seconds_count", model="cnn") == CLIENTS
    # TF Serving's batching names, for its dashboards: one queue wait per request, one wrapped
    # run per batch.
    assert metric_value(metrics, ":tensorflow:serving:batching_session:queuing_latency_count",
                        thread_pool_name="batch_threads") == CLIENTS
    assert metric_value(metrics, ":tensorflow:serving:batching_session:wrapped_run_count") == batches


def test_rest_timeout_answers_504(tmp_path, start_server):
    """A prediction still waiting at --rest_api_timeout_in_ms is answered 504, as TF Serving's
    run timeout does; the server keeps serving afterwards."""
    base = tmp_path / "digits"
    base.mkdir()
    (base / "1").symlink_to(EXAMPLES / "digits" / "1", target_is_directory=True)
    params = tmp_path / "batching.config"
    # Batches wait 1 s for company, longer than the 200 ms request timeout.
    params.write_text("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 1000000 }\n")
    server = start_server(["--model_name=digits", f"--model_base_path={base}", "--enable_batching",
                           f"--batching_parameters_file={params}", "--rest_api_timeout_in_ms=200"])
    r = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": [[0.0] * 64]},
                      timeout=30)
    assert r.status_code == 504, r.text
    assert "Deadline exceeded" in r.json()["error"]
    full = requests.post(f"{server.url}/v1/models/digits:predict",
                         json={"instances": [[0.0] * 64] * 8}, timeout=30)
    assert full.status_code == 200, "a full batch runs at once"


def test_grpc_deadline_answered_while_queued(tmp_path, start_server):
    """A gRPC call whose grpc-timeout passes while its request waits in a batch queue is answered
    DEADLINE_EXCEEDED at its deadline, not when the batch finally runs, and is then left out of
    its batch. h2load is the client: a grpcio client would give up on its own at the deadline and
    hide when the server answered."""
    base = tmp_path / "digits"
    base.mkdir()
    (base / "1").symlink_to(EXAMPLES / "digits" / "1", target_is_directory=True)
    params = tmp_path / "batching.config"
    params.write_text("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 3000000 }\n")  # 3 s
    server = start_server(["--model_name=digits", f"--model_base_path={base}", "--enable_batching",
                           f"--batching_parameters_file={params}"])
    request = proto_stubs.float_predict_request("digits", "images", np.zeros((1, 64)), tensor_content=False)
    message = request.SerializeToString()
    body = tmp_path / "call.bin"
    body.write_bytes(b"\x00" + len(message).to_bytes(4, "big") + message)
    out = subprocess.run(
        ["h2load", "-n1", "-c1", "-d", str(body), "-H", "content-type: application/grpc", "-H", "te: trailers",
         "-H", "grpc-timeout: 300m", f"http://{server.grpc_target}/tensorflow.serving.PredictionService/Predict"],
        capture_output=True, text=True, timeout=30, check=True).stdout
    assert "1 succeeded" in out, out
    value, unit = re.search(r"time for request:\s+([\d.]+)(us|ms|s)\b", out).groups()
    seconds = float(value) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]
    assert 0.25 < seconds < 1.5, f"answered after {seconds:.3f} s, the deadline was 0.3 s and the batch waits 3 s"

    def counted():
        return metric_value(server.metrics(), "modelfleet_requests_total", model="digits", api="Predict",
                            status="DEADLINE_EXCEEDED")
    deadline = time.monotonic() + 20
    while counted() < 1 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert counted() == 1, "the late run is counted as the DEADLINE_EXCEEDED the client got"
    # When its batch closes the expired call is left out, so no batch runs at all.
    metrics = server.metrics()
    assert metric_value(metrics, "modelfleet_batch_skipped_requests_total", model="digits",
                        reason="DEADLINE_EXCEEDED") == 1, metrics
    assert metric_value(metrics, "modelfleet_batch_size_count", model="digits") == 0, "the expired call ran"


def test_per_model_batching_parameters(tmp_path, start_server):
    """--enable_per_model_batching_parameters: a version's batching_params.pbtxt replaces the
    global parameters for that model only; a malformed one fails that version's load."""
    from server_fixtures import copy_version, wait_for
    for name in ("wide", "narrow", "broken"):
        copy_version(EXAMPLES / "digits", 1, tmp_path / name)
    (tmp_path / "narrow" / "1" / "batching_params.pbtxt").write_text(
        "max_batch_size { value: 2 }\nbatch_timeout_micros { value: 100000 }\n")
    (tmp_path / "broken" / "1" / "batching_params.pbtxt").write_text("max_batch_size { value: -1 }\n")
    config = tmp_path / "models.config"
    config.write_text("model_config_list {\n" + "".join(
        f'  config {{ name: "{name}" base_path: "{tmp_path / name}" }}\n' for name in ("wide", "narrow", "broken"))
        + "}\n")
    params = tmp_path / "batching.config"
    params.write_text("max_batch_size { value: 32 }\nbatch_timeout_micros { value: 100000 }\n")
    server = start_server([f"--model_config_file={config}", "--enable_batching", f"--batching_parameters_file={params}",
                           "--enable_per_model_batching_parameters"], ready=False)
    def status_of(model):
        try:
            r = requests.get(f"{server.url}/v1/models/{model}", timeout=5)
        except requests.ConnectionError:
            return None  # not listening yet
        return r.json()["model_version_status"][0] if r.status_code == 200 else None

    wait_for(lambda: all((status_of(m) or {}).get("state") in ("AVAILABLE", "END")
                         for m in ("wide", "narrow", "broken")), timeout=60, what="every model loaded or failed")
    broken = status_of("broken")
    assert broken["state"] == "END" and "per-model batching parameters" in broken["status"]["error_message"], broken

    def burst(model, n=8):
        barrier = threading.Barrier(n)
        codes = []

        def one():
            barrier.wait(timeout=30)
            codes.append(requests.post(f"{server.url}/v1/models/{model}:predict",
                                       json={"instances": [[0.0] * 64]}, timeout=30).status_code)
        threads = [threading.Thread(target=one) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert codes == [200] * n, codes

    burst("wide")
    burst("narrow")
    metrics = server.metrics()
    narrow_batches = metric_value(metrics, "modelfleet_batch_size_count", model="narrow")
    assert narrow_batches >= 4, metrics
    assert metric_value(metrics, "modelfleet_batch_size_bucket", model="narrow", le="2") == narrow_batches
    assert metric_value(metrics, "modelfleet_batch_size_bucket", model="wide", le="2") < \
        metric_value(metrics, "modelfleet_batch_size_count", model="wide"), "the global 32 still batches 'wide'"
