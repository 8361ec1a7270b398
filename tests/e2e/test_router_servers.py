"""modelfleet-router in front of two real modelfleet-server processes (static mode): server A
serves digits version 1, server B version 2, as a ModelDeployment's two versions would. TF
Serving REST and gRPC Predict through the router reach the version the routing chose, answer
exactly what the server answers directly, and mirroring compares real predictions."""
import json

import grpc
import numpy as np
import pytest
import requests
from sklearn.datasets import load_digits

import proto_stubs
import server_fixtures
from conftest import ROOT, build_dir, free_port
from server_fixtures import EXAMPLES, copy_version, metric_value, start_server, wait_for  # noqa: F401
from test_router import start_router, write_config  # noqa: F401  (fixture)
from test_server_grpc import tensor_proto, to_numpy


@pytest.fixture
def servers(tmp_path, monkeypatch, start_server):
    # The server may come from this build tree or the default one (it is not a router target).
    for candidate in (build_dir(), ROOT / "build"):
        path = candidate / "server" / "main" / "modelfleet-server"
        if path.exists():
            monkeypatch.setattr(server_fixtures, "server_binary", lambda path=path: path)
            break
    else:
        pytest.skip("modelfleet-server is not built")
    started = []
    for version in (1, 2):
        base = tmp_path / f"models{version}" / "digits"
        copy_version(EXAMPLES / "digits", version, base)
        started.append(start_server(["--model_name=digits", f"--model_base_path={base}"]))
    return started


def predict_rest(url, x, headers=None):
    r = requests.post(f"{url}/v1/models/digits:predict", json={"instances": x.tolist()}, headers=headers or {},
                      timeout=10)
    assert r.status_code == 200, r.text
    return r


def mirror_agrees_then_disagrees(router, config, versions, same_weights, send, n):
    """`send()` makes n calls through `router`, whose config mirrors to `same_weights` (the
    primary's model): every call is mirrored and none disagrees. Then the mirror moves to v2
    (other weights) and every one of n more calls disagrees."""
    send()
    wait_for(lambda: metric_value(router.metrics(), "modelfleet_router_mirrored_total", version=same_weights) == n,
             timeout=5, what=f"{n} mirrored calls")
    assert metric_value(router.metrics(), "modelfleet_router_mirror_disagreements_total", version=same_weights) == 0
    write_config(config, versions, mirror={"version": "v2", "percent": 100}, model="digits")
    wait_for(lambda: metric_value(router.metrics(), "modelfleet_router_config_generation") == 2, timeout=3,
             what="the new config")
    send()
    wait_for(lambda: metric_value(router.metrics(), "modelfleet_router_mirror_disagreements_total", version="v2")
             == n, timeout=5, what=f"{n} disagreements between two different model versions")


def test_rest_and_grpc_predict_through_the_router(tmp_path, servers, start_router):
    a, b = servers
    write_config(tmp_path / "router.yaml", [
        {"name": "v1", "service": "s1", "weight": 100, "endpoints": [f"127.0.0.1:{a.rest_port}"],
         "grpcEndpoints": [a.grpc_target]},
        {"name": "v2", "service": "s2", "weight": 0, "endpoints": [f"127.0.0.1:{b.rest_port}"],
         "grpcEndpoints": [b.grpc_target]},
    ], routes=[{"header": "x-experiment", "value": "b", "version": "v2"}], model="digits")
    grpc_port = free_port()
    router = start_router(f"--grpc-port={grpc_port}")
    x = load_digits().data[:4].astype(np.float32)

    via_v1 = predict_rest(router.url, x)
    via_v2 = predict_rest(router.url, x, {"x-experiment": "b"})
    assert via_v1.headers["x-modelfleet-version"] == "v1" and via_v2.headers["x-modelfleet-version"] == "v2"
    assert via_v1.json() == predict_rest(a.url, x).json()
    assert via_v2.json() == predict_rest(b.url, x).json()
    assert not np.allclose(via_v1.json()["predictions"], via_v2.json()["predictions"])
    status = requests.get(f"{router.url}/v1/models/digits", headers={"x-experiment": "b"}, timeout=5).json()
    assert status["model_version_status"][0]["version"] == "2"

    predict_pb2 = proto_stubs.module("tensorflow_serving.apis.predict_pb2")
    services = proto_stubs.module("tensorflow_serving.apis.prediction_service_pb2_grpc")
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub = services.PredictionServiceStub(channel)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "digits"
        request.inputs["images"].CopyFrom(tensor_proto(x))
        response, call = stub.Predict.with_call(request, timeout=10)
        assert response.model_spec.version.value == 1
        assert dict(call.initial_metadata())["x-modelfleet-version"] == "v1"
        routed = stub.Predict(request, metadata=(("x-experiment", "b"),), timeout=10)
        assert routed.model_spec.version.value == 2
        assert np.allclose(to_numpy(routed.outputs["scores"]), np.array(via_v2.json()["predictions"]), atol=1e-5)
        # A version the server does not have: its NOT_FOUND comes back through the router.
        request.model_spec.version.value = 7
        with pytest.raises(grpc.RpcError) as missing:
            stub.Predict(request, timeout=10)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    metrics = router.metrics()
    assert metric_value(metrics, "modelfleet_router_requests_total", version="v2", protocol="grpc", code="OK") == 1


def test_mirror_compares_real_predictions(tmp_path, servers, start_router):
    a, b = servers
    config = tmp_path / "router.yaml"
    versions = [
        {"name": "v1", "service": "s1", "weight": 100, "endpoints": [f"127.0.0.1:{a.rest_port}"]},
        {"name": "v2", "service": "s2", "weight": 0, "endpoints": [f"127.0.0.1:{b.rest_port}"]},
        {"name": "v1-copy", "service": "s3", "weight": 0, "endpoints": [f"127.0.0.1:{a.rest_port}"]},
    ]
    write_config(config, versions, mirror={"version": "v1-copy", "percent": 100}, model="digits")
    router = start_router()
    x = load_digits().data[:2].astype(np.float32)

    def send():
        for _ in range(20):
            predict_rest(router.url, x)
    mirror_agrees_then_disagrees(router, config, versions, "v1-copy", send, 20)


def test_grpc_mirror_compares_real_predictions(tmp_path, servers, start_router, start_server):
    """gRPC Predict and KServe ModelInfer mirrored: a copy of version 1 served as version 7 answers
    with other bytes (the version it names) but the same prediction, so it agrees; version 2
    disagrees. The mirror's answer never reaches the client."""
    a, b = servers
    base = tmp_path / "models7" / "digits"
    copy_version(EXAMPLES / "digits", 1, base, as_version=7)
    c = start_server(["--model_name=digits", f"--model_base_path={base}"])
    config = tmp_path / "router.yaml"
    versions = [
        {"name": "v1", "service": "s1", "weight": 100, "endpoints": [f"127.0.0.1:{a.rest_port}"],
         "grpcEndpoints": [a.grpc_target]},
        {"name": "v2", "service": "s2", "weight": 0, "endpoints": [f"127.0.0.1:{b.rest_port}"],
         "grpcEndpoints": [b.grpc_target]},
        {"name": "v7", "service": "s3", "weight": 0, "endpoints": [f"127.0.0.1:{c.rest_port}"],
         "grpcEndpoints": [c.grpc_target]},
    ]
    write_config(config, versions, mirror={"version": "v7", "percent": 100}, model="digits")
    grpc_port = free_port()
    router = start_router(f"--grpc-port={grpc_port}")
    x = load_digits().data[:2].astype(np.float32)
    predict_pb2 = proto_stubs.module("tensorflow_serving.apis.predict_pb2")
    services = proto_stubs.module("tensorflow_serving.apis.prediction_service_pb2_grpc")
    v2 = proto_stubs.module("inference.grpc_predict_v2_pb2")
    v2_grpc = proto_stubs.module("inference.grpc_predict_v2_pb2_grpc")
    predict = predict_pb2.PredictRequest()
    predict.model_spec.name = "digits"
    predict.inputs["images"].CopyFrom(tensor_proto(x))
    infer = v2.ModelInferRequest(model_name="digits")
    infer.inputs.add(name="images", datatype="FP32", shape=[2, 64])
    infer.raw_input_contents.append(x.astype("<f4").tobytes())

    def call_both(stub, v2_stub, n):
        for _ in range(n):
            assert stub.Predict(predict, timeout=10).model_spec.version.value == 1  # the primary's answer
            assert v2_stub.ModelInfer(infer, timeout=10).model_version == "1"

    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        stub, v2_stub = services.PredictionServiceStub(channel), v2_grpc.GRPCInferenceServiceStub(channel)
        mirror_agrees_then_disagrees(router, config, versions, "v7", lambda: call_both(stub, v2_stub, 10), 20)
    assert metric_value(router.metrics(), "modelfleet_router_mirrored_total", version="v2") == 20
