"""modelfleet-server's REST APIs (TF Serving /v1, KServe v2, metrics) against real models."""
import numpy as np
import requests
import torch
from sklearn.datasets import load_digits

from server_fixtures import load_example, metric_value, start_server, digits_repo, wait_for  # noqa: F401


def test_predict_matches_pytorch(tmp_path, start_server):
    """The TF Serving doc-style request returns PyTorch's numbers for the same exported model."""
    make_digits = load_example("make_digits")
    torch.manual_seed(7)
    model = make_digits.build_mlp(48)
    base = tmp_path / "mlp"
    make_digits.export(model, base / "1" / "model.onnx")
    x = load_digits().data[:16].astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()

    server = start_server([f"--model_name=mlp", f"--model_base_path={base}"])
    r = requests.post(f"{server.url}/v1/models/mlp:predict",
                      json={"signature_name": "serving_default", "instances": x.tolist()}, timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.headers["X-Model-Version"] == "1"
    np.testing.assert_allclose(np.array(r.json()["predictions"]), expected, rtol=1e-4, atol=1e-4)

    columnar = requests.post(f"{server.url}/v1/models/mlp/versions/1:predict",
                             json={"inputs": {"images": x[:3].tolist()}}, timeout=30)
    assert columnar.status_code == 200, columnar.text
    np.testing.assert_allclose(np.array(columnar.json()["outputs"]), expected[:3], rtol=1e-4, atol=1e-4)


def test_status_metadata_and_errors(digits_repo, start_server):
    server = start_server([f"--model_name=digits", f"--model_base_path={digits_repo}"])
    url = server.url
    status = requests.get(f"{url}/v1/models/digits", timeout=10).json()
    assert status == {"model_version_status": [
        {"version": "2", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}

    meta = requests.get(f"{url}/v1/models/digits/metadata", timeout=10).json()
    assert meta["model_spec"]["version"] == "2"
    sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert sig["inputs"]["images"]["dtype"] == "DT_FLOAT"
    assert [d["size"] for d in sig["inputs"]["images"]["tensor_shape"]["dim"]] == ["-1", "64"]

    cases = [
        ("GET", "/v1/models", 400, "Missing model name in request."),
        ("GET", "/v1/models/nope", 404, "Could not find any versions of model nope"),
        ("POST", "/v1/models/nope:predict", 404, "Servable not found for request: Latest(nope)"),
        ("POST", "/v1/models/digits/versions/9:predict", 404,
         "Servable not found for request: Specific(digits, 9)"),
        ("POST", "/v1/models/digits/versions/1/labels/x:predict", 400,
         "Malformed request: POST /v1/models/digits/versions/1/labels/x:predict"),
        ("GET", "/v1/models/digits/versions/abc", 400,
         "Malformed request: GET /v1/models/digits/versions/abc"),
    ]
    for method, path, code, message in cases:
        r = requests.request(method, url + path, json={"instances": [[0.0] * 64]}, timeout=10)
        assert r.status_code == code, (path, r.text)
        assert r.json() == {"error": message}, path

    bad_type = requests.post(f"{url}/v1/models/digits:predict", json={"instances": [["x"] * 64]},
                             timeout=10)
    assert bad_type.status_code == 400 and "error" in bad_type.json()
    bad_rank = requests.post(f"{url}/v1/models/digits:predict", json={"instances": [[1.0] * 63]},
                             timeout=10)
    assert bad_rank.status_code == 400, bad_rank.text
    classify = requests.post(f"{url}/v1/models/digits:classify", json={"examples": []}, timeout=10)
    assert classify.status_code == 400 and "classification" in classify.json()["error"]
    # A bad request changed nothing: the model still answers.
    ok = requests.post(f"{url}/v1/models/digits:predict", json={"instances": [[0.0] * 64]}, timeout=10)
    assert ok.status_code == 200

    # TF Serving's order: the body is parsed before the model is looked up, so a malformed body is
    # a 400 even for a model that does not exist (a well-formed one gets the lookup's 404).
    for model in ("digits", "nope"):
        for body in (b"not json", b'{"instances": [[1.0, 2.0], [3.0,, 4.0]]}'):
            r = requests.post(f"{url}/v1/models/{model}:predict", data=body, timeout=10)
            assert r.status_code == 400, (model, body, r.text)
            assert r.json()["error"].startswith("JSON Parse error: "), (model, body, r.text)
        r = requests.post(f"{url}/v1/models/{model}:classify", data=b"{", timeout=10)
        assert r.status_code == 400 and r.json()["error"].startswith("JSON Parse error: "), r.text
    ragged = requests.post(f"{url}/v1/models/digits:predict",
                           json={"instances": [[0.0] * 64, [0.0] * 63]}, timeout=10)
    assert ragged.status_code == 400
    assert ragged.json()["error"] == ("Failed to process element: 1 of 'instances' list. Error: "
                                      "INVALID_ARGUMENT: Expecting tensor size: 64 but got: 63")
    too_big = requests.get(f"{url}/v1/models/digits/versions/99999999999999999999", timeout=10)
    assert too_big.status_code == 400
    assert too_big.json() == {"error": "Failed to convert version: 99999999999999999999 to numeric."}
    nameless = requests.post(f"{url}/v1/models", json={"instances": [[0.0] * 64]}, timeout=10)
    assert nameless.status_code == 400 and nameless.json() == {"error": "Malformed request: POST /v1/models"}


def test_labels_from_model_config_file(tmp_path, digits_repo, start_server):
    config = tmp_path / "models.config"
    config.write_text(f"""
model_config_list {{
  config {{
    name: "digits"
    base_path: "{digits_repo}"
    model_platform: "onnx"
    model_version_policy {{ all {{}} }}
    version_labels {{ key: "stable" value: 1 }}
    version_labels {{ key: "canary" value: 2 }}
  }}
}}""")
    # TF Serving needs --allow_version_labels_for_unavailable_models for such configs; taken as is.
    server = start_server([f"--model_config_file={config}", "--allow_version_labels_for_unavailable_models=true"])
    x = [[float(i % 16) for i in range(64)]]
    # Ready means a version of digits is AVAILABLE; the other may still be loading.
    wait_for(lambda: all(requests.post(f"{server.url}/v1/models/digits/labels/{label}:predict",
                                       json={"instances": x}, timeout=10).status_code == 200
                         for label in ("stable", "canary")), what="both labelled versions")
    answers = {}
    for label in ("stable", "canary"):
        r = requests.post(f"{server.url}/v1/models/digits/labels/{label}:predict",
                          json={"instances": x}, timeout=10)
        assert r.status_code == 200, r.text
        answers[label] = (r.headers["X-Model-Version"], r.json()["predictions"])
    assert answers["stable"][0] == "1" and answers["canary"][0] == "2"
    assert answers["stable"][1] != answers["canary"][1]
    unknown = requests.post(f"{server.url}/v1/models/digits/labels/nope:predict",
                            json={"instances": x}, timeout=10)
    assert unknown.status_code == 400


def test_kserve_v2(digits_repo, start_server):
    server = start_server([f"--model_name=digits", f"--model_base_path={digits_repo}"])
    url = server.url
    assert requests.get(f"{url}/v2/health/live", timeout=5).status_code == 200
    assert requests.get(f"{url}/v2/health/ready", timeout=5).status_code == 200
    assert requests.get(f"{url}/v2/models/digits/ready", timeout=5).status_code == 200
    assert requests.get(f"{url}/v2/models/nope/ready", timeout=5).status_code == 400
    meta = requests.get(f"{url}/v2/models/digits", timeout=5).json()
    assert meta["name"] == "digits" and meta["platform"] == "onnx_onnxv1"
    assert meta["inputs"][0]["name"] == "images" and meta["inputs"][0]["datatype"] == "FP32"

    x = load_digits().data[:2].astype(np.float32)
    body = {"id": "req-1", "inputs": [{"name": "images", "shape": [2, 64], "datatype": "FP32",
                                       "data": x.flatten().tolist()}]}
    r = requests.post(f"{url}/v2/models/digits/infer", json=body, timeout=10)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["model_name"] == "digits" and out["model_version"] == "2" and out["id"] == "req-1"
    assert out["outputs"][0]["name"] == "scores" and out["outputs"][0]["shape"] == [2, 10]
    v1 = requests.post(f"{url}/v1/models/digits:predict", json={"instances": x.tolist()}, timeout=10)
    np.testing.assert_allclose(np.array(out["outputs"][0]["data"]).reshape(2, 10),
                               np.array(v1.json()["predictions"]), rtol=1e-6)
    bad = requests.post(f"{url}/v2/models/digits/infer",
                        json={"inputs": [{"name": "images", "shape": [1, 63], "datatype": "FP32",
                                          "data": [0.0] * 63}]}, timeout=10)
    assert bad.status_code == 400 and "error" in bad.json()


def test_metrics_names(tmp_path, digits_repo, start_server):
    monitoring = tmp_path / "monitoring.config"
    monitoring.write_text('prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }')
    server = start_server([f"--model_name=digits", f"--model_base_path={digits_repo}",
                           f"--monitoring_config_file={monitoring}"])
    for _ in range(3):
        requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": [[0.0] * 64]},
                      timeout=10)
    requests.post(f"{server.url}/v1/models/digits/versions/7:predict",
                  json={"instances": [[0.0] * 64]}, timeout=10)
    text = requests.get(f"{server.url}/monitoring/prometheus/metrics", timeout=5).text
    assert metric_value(text, ":tensorflow:serving:request_count", model_name="digits", status="OK") == 3
    assert metric_value(text, ":tensorflow:serving:request_count", model_name="digits",
                        status="NOT_FOUND") == 1
    assert metric_value(text, ":tensorflow:serving:request_latency_count", model_name="digits",
                        API="Predict", entrypoint="REST") == 4
    assert metric_value(text, "modelfleet_requests_total", model="digits", version="2",
                        api="Predict", status="OK") == 3
    assert metric_value(text, "modelfleet_model_version_state", model="digits", version="2") == 30
    assert metric_value(text, "modelfleet_compute_latency_seconds_count", model="digits") >= 3
    assert metric_value(text, "modelfleet_model_memory_bytes", model="digits", version="2") > 0


def test_kserve_v2_binary_tensor_extension(digits_repo, start_server):
    import json
    server = start_server([f"--model_name=digits", f"--model_base_path={digits_repo}"])
    x = load_digits().data[:2].astype("<f4")
    header = json.dumps({
        "inputs": [{"name": "images", "shape": [2, 64], "datatype": "FP32",
                    "parameters": {"binary_data_size": x.nbytes}}],
        "outputs": [{"name": "scores", "parameters": {"binary_data": True}}]}).encode()
    r = requests.post(f"{server.url}/v2/models/digits/infer", data=header + x.tobytes(),
                      headers={"Inference-Header-Content-Length": str(len(header)),
                               "Content-Type": "application/octet-stream"}, timeout=10)
    assert r.status_code == 200, r.text
    json_length = int(r.headers["Inference-Header-Content-Length"])
    meta = json.loads(r.content[:json_length])
    assert meta["model_version"] == "2"
    out = meta["outputs"][0]
    assert out["shape"] == [2, 10] and out["parameters"]["binary_data_size"] == 80
    scores = np.frombuffer(r.content[json_length:], dtype="<f4").reshape(2, 10)
    v1 = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": x.tolist()},
                       timeout=10).json()["predictions"]
    np.testing.assert_allclose(scores, np.array(v1), rtol=1e-6)
    bad = requests.post(f"{server.url}/v2/models/digits/infer", data=header + x.tobytes()[:-4],
                        headers={"Inference-Header-Content-Length": str(len(header))}, timeout=10)
    assert bad.status_code == 400 and "error" in bad.json()


def write_lookup_model(base):
    """out = table[idx] (Gather) for int64 idx of shape [N]: an index outside the 4-entry table
    fails the model run itself, after the request was decoded for a resolved version."""
    import onnx
    from onnx import TensorProto, helper
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, ["N"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N"])
    table = helper.make_tensor("table", TensorProto.FLOAT, [4], [0.5, 1.5, 2.5, 3.5])
    graph = helper.make_graph([helper.make_node("Gather", ["table", "idx"], ["out"], axis=0)],
                              "lookup", [idx], [out], initializer=[table])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    (base / "1").mkdir(parents=True)
    onnx.save(model, str(base / "1" / "model.onnx"))


NV_SERIES = ["nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
             "nv_inference_exec_count", "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
             "nv_inference_compute_infer_duration_us"]


def nv_values(server, model):
    text = server.metrics()
    return {name: metric_value(text, name, model=model, version="1") for name in NV_SERIES}


def test_triton_metrics_move_by_exact_amounts(tmp_path, start_server):
    base = tmp_path / "lookup"
    write_lookup_model(base)
    server = start_server(["--model_name=lookup", f"--model_base_path={base}"])
    before = nv_values(server, "lookup")
    assert before == {name: 0 for name in NV_SERIES}, "the warm-up run is not an inference"
    rows = [1, 3, 2, 4, 1]
    for n in rows:
        r = requests.post(f"{server.url}/v1/models/lookup:predict",
                          json={"instances": [i % 4 for i in range(n)]}, timeout=10)
        assert r.status_code == 200, r.text
        assert r.json()["predictions"] == [0.5 + i % 4 for i in range(n)]
    for _ in range(2):  # the model run fails: Triton failures
        r = requests.post(f"{server.url}/v1/models/lookup:predict", json={"instances": [1, 9]}, timeout=10)
        assert r.status_code >= 400, r.text
    # Refused before reaching the model (undecodable body, unknown version): not counted.
    assert requests.post(f"{server.url}/v1/models/lookup:predict", data="{", timeout=10).status_code == 400
    assert requests.post(f"{server.url}/v1/models/lookup/versions/7:predict",
                         json={"instances": [1]}, timeout=10).status_code == 404
    after = nv_values(server, "lookup")
    delta = {name: after[name] - before[name] for name in NV_SERIES}
    assert delta["nv_inference_request_success"] == len(rows)
    assert delta["nv_inference_request_failure"] == 2
    assert delta["nv_inference_count"] == sum(rows)
    assert delta["nv_inference_exec_count"] == len(rows), "one execution per request without batching"
    assert delta["nv_inference_queue_duration_us"] == 0, "no batching queue"
    assert 0 < delta["nv_inference_compute_infer_duration_us"] <= delta["nv_inference_request_duration_us"]
    assert after["nv_inference_request_duration_us"] == int(after["nv_inference_request_duration_us"]), "whole µs"


def test_triton_metrics_of_a_batched_run(tmp_path, start_server):
    import threading
    base = tmp_path / "lookup"
    write_lookup_model(base)
    params = tmp_path / "batching.config"
    params.write_text("max_batch_size { value: 16 }\nbatch_timeout_micros { value: 500000 }\n"
                      "num_batch_threads { value: 1 }\n")
    server = start_server(["--model_name=lookup", f"--model_base_path={base}", "--enable_batching",
                           f"--batching_parameters_file={params}"])
    clients = 8
    rows = [1 + i % 2 for i in range(clients)]
    codes = [None] * clients
    barrier = threading.Barrier(clients)

    def client(i):
        barrier.wait(timeout=30)
        codes[i] = requests.post(f"{server.url}/v1/models/lookup:predict",
                                 json={"instances": [i % 4] * rows[i]}, timeout=60).status_code

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert codes == [200] * clients
    nv = nv_values(server, "lookup")
    assert nv["nv_inference_request_success"] == clients
    assert nv["nv_inference_count"] == sum(rows)
    batches = metric_value(server.metrics(), "modelfleet_batch_size_count", model="lookup")
    assert nv["nv_inference_exec_count"] == batches
    assert 0 < nv["nv_inference_exec_count"] < clients, f"requests shared executions: {nv}"
    assert nv["nv_inference_exec_count"] < nv["nv_inference_count"]
    assert nv["nv_inference_queue_duration_us"] > 0
    assert nv["nv_inference_compute_infer_duration_us"] > 0


def test_cors_support_as_tf_serving(digits_repo, start_server):
    """--rest_api_enable_cors_support: a browser's preflight gets 204 with the allowed methods
    and headers, and every answer (errors too) carries Access-Control-Allow-Origin: *. Off by
    default, as in TF Serving."""
    plain = start_server(["--model_name=digits", f"--model_base_path={digits_repo}"])
    assert "Access-Control-Allow-Origin" not in requests.get(f"{plain.url}/v1/models/digits", timeout=10).headers

    server = start_server(["--model_name=digits", f"--model_base_path={digits_repo}",
                           "--rest_api_enable_cors_support"])
    preflight = requests.options(f"{server.url}/v1/models/digits:predict", timeout=10, headers={
        "Origin": "http://notebook.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert preflight.status_code == 204
    assert preflight.headers["Access-Control-Allow-Origin"] == "*"
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
    assert preflight.headers["Access-Control-Allow-Headers"] == "content-type"
    ok = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": [[0.0] * 64]},
                       headers={"Origin": "http://notebook.example"}, timeout=10)
    assert ok.status_code == 200 and ok.headers["Access-Control-Allow-Origin"] == "*"
    missing = requests.get(f"{server.url}/v1/models/nope", timeout=10)
    assert missing.status_code == 404 and missing.headers["Access-Control-Allow-Origin"] == "*"
