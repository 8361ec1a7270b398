"""modelfleet-server's gRPC APIs with stubs generated from our .proto files: TF Serving
PredictionService / ModelService, KServe v2 GRPCInferenceService, grpc.health.v1."""
import grpc
import numpy as np
import pytest
import requests
from sklearn.datasets import load_digits

import proto_stubs
from server_fixtures import start_server, digits_repo, wait_for  # noqa: F401


def tensor_proto(array: np.ndarray):
    tensor_pb2 = proto_stubs.module("tensorflow.core.framework.tensor_pb2")
    types_pb2 = proto_stubs.module("tensorflow.core.framework.types_pb2")
    proto = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
    for d in array.shape:
        proto.tensor_shape.dim.add(size=d)
    proto.tensor_content = array.astype("<f4").tobytes()
    return proto


def to_numpy(proto) -> np.ndarray:
    shape = [d.size for d in proto.tensor_shape.dim]
    if proto.tensor_content:
        return np.frombuffer(proto.tensor_content, dtype="<f4").reshape(shape)
    return np.array(proto.float_val, dtype=np.float32).reshape(shape)


@pytest.fixture
def server(tmp_path, digits_repo, start_server):
    """Both digits versions loaded (policy all), so requests can pick either."""
    config = tmp_path / "models.config"
    config.write_text('model_config_list { config { name: "digits" base_path: "%s" '
                      'model_version_policy { all {} } } }' % digits_repo)
    server = start_server([f"--model_config_file={config}"])
    # Ready means every model has a version; the other version may still be loading.
    wait_for(lambda: sorted(v["state"] for v in requests.get(f"{server.url}/v1/models/digits", timeout=5)
                            .json().get("model_version_status", [])) == ["AVAILABLE", "AVAILABLE"],
             what="both digits versions AVAILABLE")
    return server


def test_predict_outputs_like_tf_serving_and_config_file_wins(tmp_path, digits_repo, start_server):
    """TF Serving answers Predict with typed fields (float_val), which clients read directly;
    --grpc_predict_tensor_content switches to bytes. As in tensorflow_model_server (and its
    image's entrypoint), --model_config_file wins over --model_name / --model_base_path."""
    predict_pb2 = proto_stubs.module("tensorflow_serving.apis.predict_pb2")
    services = proto_stubs.module("tensorflow_serving.apis.prediction_service_pb2_grpc")
    config = tmp_path / "models.config"
    config.write_text('model_config_list { config { name: "digits" base_path: "%s" } }' % digits_repo)
    x = load_digits().data[:3].astype(np.float32)
    answers = {}
    for extra in ([], ["--grpc_predict_tensor_content",
                       "--grpc_channel_arguments=grpc.max_connection_age_ms=1,grpc.max_receive_message_length=2000"]):
        server = start_server(["--model_name=model", "--model_base_path=/nonexistent",
                               f"--model_config_file={config}"] + extra)
        assert "are ignored" in server.log()
        with grpc.insecure_channel(server.grpc_target) as channel:
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "digits"
            request.inputs["images"].CopyFrom(tensor_proto(x))
            out = services.PredictionServiceStub(channel).Predict(request, timeout=10).outputs["scores"]
        answers[bool(extra)] = to_numpy(out)
        if extra:
            assert out.tensor_content and not out.float_val
            assert "max_connection_age_ms" in server.log()  # reported as not implemented
            request.inputs["images"].CopyFrom(tensor_proto(np.zeros((8, 64), np.float32)))  # 2 KiB + framing
            with grpc.insecure_channel(server.grpc_target) as channel:
                with pytest.raises(grpc.RpcError) as too_large:
                    services.PredictionServiceStub(channel).Predict(request, timeout=10)
            assert too_large.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        else:
            assert len(out.float_val) == 30 and not out.tensor_content
    np.testing.assert_array_equal(answers[False], answers[True])


def test_predict_names_version_and_matches_rest(server):
    predict_pb2 = proto_stubs.module("tensorflow_serving.apis.predict_pb2")
    services = proto_stubs.module("tensorflow_serving.apis.prediction_service_pb2_grpc")
    x = load_digits().data[:4].astype(np.float32)
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = services.PredictionServiceStub(channel)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "digits"
        request.model_spec.signature_name = "serving_default"
        request.inputs["images"].CopyFrom(tensor_proto(x))
        response = stub.Predict(request, timeout=10)
        assert response.model_spec.name == "digits"
        assert response.model_spec.version.value == 2
        scores = to_numpy(response.outputs["scores"])

        request.model_spec.version.value = 1
        older = stub.Predict(request, timeout=10)
        assert older.model_spec.version.value == 1
        assert not np.allclose(to_numpy(older.outputs["scores"]), scores)

        request.model_spec.version.value = 42
        with pytest.raises(grpc.RpcError) as missing:
            stub.Predict(request, timeout=10)
        assert missing.value.code() == grpc.StatusCode.NOT_FOUND

        nameless = predict_pb2.PredictRequest()
        nameless.inputs["images"].CopyFrom(tensor_proto(x))
        with pytest.raises(grpc.RpcError) as no_name:
            stub.Predict(nameless, timeout=10)
        assert no_name.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "ModelSpec has no name specified" in no_name.value.details()

        # An unknown signature: TF Serving's gRPC Predict (predict_util) answers FAILED_PRECONDITION.
        unknown = predict_pb2.PredictRequest()
        unknown.model_spec.name = "digits"
        unknown.model_spec.signature_name = "classify_v9"
        unknown.inputs["images"].CopyFrom(tensor_proto(x))
        with pytest.raises(grpc.RpcError) as no_signature:
            stub.Predict(unknown, timeout=10)
        assert no_signature.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert no_signature.value.details() == 'Serving signature key "classify_v9" not found.'

        bad = predict_pb2.PredictRequest()
        bad.model_spec.name = "digits"
        bad.inputs["images"].CopyFrom(tensor_proto(np.zeros((1, 63), np.float32)))
        with pytest.raises(grpc.RpcError) as invalid:
            stub.Predict(bad, timeout=10)
        assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT

        # An input the model does not have is refused before it is decoded: this one would
        # broadcast one float_val over 16 Mi elements per copy.
        tensor_pb2 = proto_stubs.module("tensorflow.core.framework.tensor_pb2")
        unknown = predict_pb2.PredictRequest()
        unknown.model_spec.name = "digits"
        unknown.inputs["images"].CopyFrom(tensor_proto(x))
        for i in range(64):
            huge = tensor_pb2.TensorProto(dtype=1, float_val=[1.0])
            huge.tensor_shape.dim.add(size=4096)
            huge.tensor_shape.dim.add(size=4096)
            unknown.inputs[f"extra{i}"].CopyFrom(huge)
        with pytest.raises(grpc.RpcError) as alias:
            stub.Predict(unknown, timeout=10)
        assert alias.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        # TF Serving's VerifyRequestInputsSize comes first.
        assert alias.value.details().startswith("input size does not match signature: 65!=1 len({extra0,")
        assert alias.value.details().endswith("}) != len({images}). Sent extra: {" +
                                              ",".join(sorted(f"extra{i}" for i in range(64))) +
                                              "}. Missing but required: {}.")

        unknown = predict_pb2.PredictRequest()
        unknown.model_spec.name = "digits"
        unknown.inputs["pixels"].CopyFrom(tensor_proto(x))
        with pytest.raises(grpc.RpcError) as alias:
            stub.Predict(unknown, timeout=10)
        assert alias.value.details() == ("input tensor alias not found in signature: pixels. "
                                         "Inputs expected to be in the set {images}.")

        classify_pb2 = proto_stubs.module("tensorflow_serving.apis.classification_pb2")
        with pytest.raises(grpc.RpcError) as unimplemented:
            stub.Classify(classify_pb2.ClassificationRequest(), timeout=10)
        assert unimplemented.value.code() == grpc.StatusCode.UNIMPLEMENTED

    rest = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": x.tolist()},
                         timeout=10).json()["predictions"]
    np.testing.assert_allclose(scores, np.array(rest), rtol=1e-5, atol=1e-5)


def test_model_status_and_metadata(server):
    status_pb2 = proto_stubs.module("tensorflow_serving.apis.get_model_status_pb2")
    model_services = proto_stubs.module("tensorflow_serving.apis.model_service_pb2_grpc")
    meta_pb2 = proto_stubs.module("tensorflow_serving.apis.get_model_metadata_pb2")
    services = proto_stubs.module("tensorflow_serving.apis.prediction_service_pb2_grpc")
    with grpc.insecure_channel(server.grpc_target) as channel:
        request = status_pb2.GetModelStatusRequest()
        request.model_spec.name = "digits"
        status = model_services.ModelServiceStub(channel).GetModelStatus(request, timeout=10)
        assert [(v.version, v.state) for v in status.model_version_status] == [(2, 30), (1, 30)]  # newest first
        assert status.model_version_status[0].status.error_code == 0

        meta_request = meta_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        meta_request.model_spec.name = "digits"
        meta = services.PredictionServiceStub(channel).GetModelMetadata(meta_request, timeout=10)
        assert meta.model_spec.version.value == 2
        sigs = meta_pb2.SignatureDefMap()
        meta.metadata["signature_def"].Unpack(sigs)
        assert "images" in sigs.signature_def["serving_default"].inputs

        assert proto_stubs.health_check(channel) == "SERVING"
        assert proto_stubs.health_check(channel, "digits") == "SERVING"


def test_kserve_v2_grpc(server):
    v2 = proto_stubs.module("inference.grpc_predict_v2_pb2")
    v2_grpc = proto_stubs.module("inference.grpc_predict_v2_pb2_grpc")
    x = load_digits().data[:2].astype(np.float32)
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = v2_grpc.GRPCInferenceServiceStub(channel)
        assert stub.ServerLive(v2.ServerLiveRequest(), timeout=5).live
        assert stub.ServerReady(v2.ServerReadyRequest(), timeout=5).ready
        assert stub.ModelReady(v2.ModelReadyRequest(name="digits"), timeout=5).ready
        assert not stub.ModelReady(v2.ModelReadyRequest(name="nope"), timeout=5).ready
        meta = stub.ModelMetadata(v2.ModelMetadataRequest(name="digits"), timeout=5)
        assert meta.platform == "onnx_onnxv1" and list(meta.versions) == ["1", "2"]

        request = v2.ModelInferRequest(model_name="digits", id="abc")
        tensor = request.inputs.add(name="images", datatype="FP32", shape=[2, 64])
        tensor.contents.fp32_contents.extend(x.flatten().tolist())
        response = stub.ModelInfer(request, timeout=10)
        assert response.model_version == "2" and response.id == "abc"
        typed = np.array(response.outputs[0].contents.fp32_contents).reshape(2, 10)

        raw = v2.ModelInferRequest(model_name="digits", model_version="1")
        raw.inputs.add(name="images", datatype="FP32", shape=[2, 64])
        raw.raw_input_contents.append(x.astype("<f4").tobytes())
        raw_response = stub.ModelInfer(raw, timeout=10)
        assert raw_response.model_version == "1"
        older = np.frombuffer(raw_response.raw_output_contents[0], dtype="<f4").reshape(2, 10)
        assert not np.allclose(typed, older)


def test_reload_config_over_grpc(tmp_path, server, digits_repo):
    """HandleReloadConfigRequest replaces the model set; an invalid config changes nothing."""
    management = proto_stubs.module("tensorflow_serving.apis.model_management_pb2")
    model_services = proto_stubs.module("tensorflow_serving.apis.model_service_pb2_grpc")
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = model_services.ModelServiceStub(channel)
        bad = management.ReloadConfigRequest()
        entry = bad.config.model_config_list.config.add(name="digits", base_path=str(digits_repo))
        entry.model_platform = "pytorch"
        with pytest.raises(grpc.RpcError) as refused:
            stub.HandleReloadConfigRequest(bad, timeout=10)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "model_platform" in refused.value.details()

        good = management.ReloadConfigRequest()
        good.config.model_config_list.config.add(name="renamed", base_path=str(digits_repo))
        response = stub.HandleReloadConfigRequest(good, timeout=30)
        assert response.status.error_code == 0

        # As in TF Serving, the answer comes once the new model serves: no wait needed.
        r = requests.post(f"{server.url}/v1/models/renamed:predict", json={"instances": [[0.0] * 64]},
                          timeout=10)
        assert r.status_code == 200 and r.headers["X-Model-Version"] == "2", r.text
        gone = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": [[0.0] * 64]},
                             timeout=10)
        assert gone.status_code == 404

        # A model that cannot load is the answer's error (the config stays applied).
        broken = tmp_path / "broken"
        (broken / "1").mkdir(parents=True)
        (broken / "1" / "model.onnx").write_bytes(b"not an onnx model")
        failing = management.ReloadConfigRequest()
        failing.config.model_config_list.config.add(name="renamed", base_path=str(digits_repo))
        failing.config.model_config_list.config.add(name="broken", base_path=str(broken))
        with pytest.raises(grpc.RpcError) as load_failed:
            stub.HandleReloadConfigRequest(failing, timeout=30)
        assert "broken" in load_failed.value.details(), load_failed.value.details()
        assert load_failed.value.code() != grpc.StatusCode.DEADLINE_EXCEEDED


def test_health_watch_streams_and_unknown_methods_answer_unimplemented_at_once(server):
    """Health/Watch streams the current status at once (and stays open); a service the server
    does not have gets UNIMPLEMENTED at once, not after the deadline."""
    health = proto_stubs.health_messages()
    with grpc.insecure_channel(server.grpc_target) as channel:
        watch = channel.unary_stream("/grpc.health.v1.Health/Watch",
                                     request_serializer=health.HealthCheckRequest.SerializeToString,
                                     response_deserializer=health.HealthCheckResponse.FromString)
        stream = watch(health.HealthCheckRequest(service=""), timeout=10)
        first = next(stream)
        assert health.HealthCheckResponse.ServingStatus.Name(first.status) == "SERVING"
        stream.cancel()

        unknown = channel.unary_unary("/no.such.Service/Method")
        with pytest.raises(grpc.RpcError) as missing:
            unknown(b"\x0a\x03abc", timeout=10)
        assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "/no.such.Service/Method" in missing.value.details()


def test_many_concurrent_calls_on_few_threads(tmp_path, digits_repo, start_server):
    """One gRPC io thread still answers 64 concurrent Predict calls, each with the
    numbers a lone call gets (calls are queued, none is lost or mixed up)."""
    import concurrent.futures
    predict_pb2 = proto_stubs.module("tensorflow_serving.apis.predict_pb2")
    services = proto_stubs.module("tensorflow_serving.apis.prediction_service_pb2_grpc")
    one = start_server([f"--model_base_path={digits_repo}", "--model_name=digits", "--grpc_threads=1"])
    rows = load_digits().data[:64].astype(np.float32)
    with grpc.insecure_channel(one.grpc_target) as channel:
        stub = services.PredictionServiceStub(channel)

        def predict(i):
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "digits"
            request.inputs["images"].CopyFrom(tensor_proto(rows[i:i + 1]))
            return to_numpy(stub.Predict(request, timeout=30).outputs["scores"])
        with concurrent.futures.ThreadPoolExecutor(max_workers=64) as pool:
            answers = list(pool.map(predict, range(64)))
        together = predict_pb2.PredictRequest()
        together.model_spec.name = "digits"
        together.inputs["images"].CopyFrom(tensor_proto(rows))
        expected = to_numpy(stub.Predict(together, timeout=30).outputs["scores"])
    np.testing.assert_allclose(np.concatenate(answers), expected, rtol=1e-5, atol=1e-5)


def test_batched_grpc_calls_do_not_hold_the_completion_queue_thread(tmp_path, digits_repo, start_server):
    """With one gRPC io thread and batching on, 32 concurrent Predict calls still meet
    in batches larger than one: a call waiting for its batch is answered later from the batch
    thread instead of blocking the only gRPC thread (which would make every batch a single row)."""
    import concurrent.futures
    from server_fixtures import metric_value
    predict_pb2 = proto_stubs.module("tensorflow_serving.apis.predict_pb2")
    services = proto_stubs.module("tensorflow_serving.apis.prediction_service_pb2_grpc")
    params = tmp_path / "batching.config"
    params.write_text("max_batch_size { value: 32 }\nbatch_timeout_micros { value: 50000 }\n"
                      "max_enqueued_batches { value: 100 }\nnum_batch_threads { value: 1 }\n")
    server = start_server([f"--model_base_path={digits_repo}", "--model_name=digits", "--grpc_threads=1",
                           "--enable_batching", f"--batching_parameters_file={params}"])
    rows = load_digits().data[:32].astype(np.float32)
    barrier = __import__("threading").Barrier(32)
    with grpc.insecure_channel(server.grpc_target) as channel:
        stub = services.PredictionServiceStub(channel)

        def predict(i):
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "digits"
            request.inputs["images"].CopyFrom(tensor_proto(rows[i:i + 1]))
            barrier.wait(timeout=30)
            response = stub.Predict(request, timeout=30)
            assert response.model_spec.version.value == 2
            return to_numpy(response.outputs["scores"])
        with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
            answers = list(pool.map(predict, range(32)))
    expected = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": rows.tolist()},
                             timeout=30).json()["predictions"]
    np.testing.assert_allclose(np.concatenate(answers), np.array(expected), rtol=1e-5, atol=1e-5)
    metrics = server.metrics()
    batches = metric_value(metrics, "modelfleet_batch_size_count", model="digits")
    assert 0 < batches <= 16, f"{batches} batches for 32 concurrent gRPC calls and 1 REST call"
