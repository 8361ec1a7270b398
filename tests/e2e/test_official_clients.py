"""modelfleet-server with the clients TF Serving and Triton users already have installed,
unchanged: tensorflow-serving-api's PredictionServiceStub / ModelServiceStub with
tf.make_tensor_proto / tf.make_ndarray, and tritonclient's HTTP and gRPC InferenceServerClient.
The answers are checked against ONNX Runtime on the same file.

TensorFlow takes seconds to import: it is imported once, by the module fixture of the test that
needs it (not at collection)."""
import importlib.util

import numpy as np
import pytest
from sklearn.datasets import load_digits

from server_fixtures import EXAMPLES, start_server, digits_repo  # noqa: F401

if importlib.util.find_spec("tensorflow_serving") is None or importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow-serving-api (with tensorflow-cpu) is not installed", allow_module_level=True)
tritonclient_http = pytest.importorskip("tritonclient.http")
tritonclient_grpc = pytest.importorskip("tritonclient.grpc")
onnxruntime = pytest.importorskip("onnxruntime")
model_config_pb2 = pytest.importorskip("tritonclient.grpc.model_config_pb2")


@pytest.fixture(scope="module")
def tf_apis():
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2, model_service_pb2_grpc,
                                         predict_pb2, prediction_service_pb2_grpc)
    return tf, grpc, predict_pb2, get_model_metadata_pb2, get_model_status_pb2, \
        prediction_service_pb2_grpc, model_service_pb2_grpc


@pytest.fixture
def batched_server(tmp_path, digits_repo, start_server):
    """digits (versions 1 and 2, latest served) behind server-side batching."""
    params = tmp_path / "batching.config"
    params.write_text("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 500 }\n"
                      "allowed_batch_sizes: 4\nallowed_batch_sizes: 8\n")
    return start_server(["--model_name=digits", f"--model_base_path={digits_repo}", "--enable_batching",
                         f"--batching_parameters_file={params}"])


def reference(x: np.ndarray) -> np.ndarray:
    session = onnxruntime.InferenceSession(str(EXAMPLES / "digits" / "2" / "model.onnx"),
                                           providers=["CPUExecutionProvider"])
    return session.run(["scores"], {"images": x})[0]


def test_tensorflow_serving_api(tf_apis, batched_server):
    tf, grpc, predict_pb2, get_model_metadata_pb2, get_model_status_pb2, prediction_grpc, model_grpc = tf_apis
    x = load_digits().data[:5].astype(np.float32)
    with grpc.insecure_channel(batched_server.grpc_target) as channel:
        prediction = prediction_grpc.PredictionServiceStub(channel)
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "digits"
        request.model_spec.signature_name = "serving_default"
        request.inputs["images"].CopyFrom(tf.make_tensor_proto(x))
        response = prediction.Predict(request, timeout=30)
        assert response.model_spec.name == "digits"
        assert response.model_spec.version.value == 2
        np.testing.assert_allclose(tf.make_ndarray(response.outputs["scores"]), reference(x), rtol=1e-4, atol=1e-4)

        metadata_request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        metadata_request.model_spec.name = "digits"
        metadata = prediction.GetModelMetadata(metadata_request, timeout=10)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        assert metadata.metadata["signature_def"].Unpack(signatures)
        signature = signatures.signature_def["serving_default"]
        assert signature.method_name == "tensorflow/serving/predict"
        assert tf.TensorShape(signature.inputs["images"].tensor_shape).as_list() == [None, 64]
        assert tf.dtypes.as_dtype(signature.outputs["scores"].dtype) == tf.float32

        status_request = get_model_status_pb2.GetModelStatusRequest()
        status_request.model_spec.name = "digits"
        status = model_grpc.ModelServiceStub(channel).GetModelStatus(status_request, timeout=10)
        assert [(s.version, get_model_status_pb2.ModelVersionStatus.State.Name(s.state))
                for s in status.model_version_status] == [(2, "AVAILABLE")]

        request.model_spec.name = "nope"
        with pytest.raises(grpc.RpcError) as error:
            prediction.Predict(request, timeout=10)
        assert error.value.code() == grpc.StatusCode.NOT_FOUND
        assert error.value.details() == "Servable not found for request: Latest(nope)"


def expected_config(config: dict) -> None:
    """What Triton reports for the batched digits model, as both tritonclient flavours return it."""
    assert config["name"] == "digits"
    assert config["platform"] == "onnxruntime_onnx"
    assert int(config["max_batch_size"]) == 8
    assert [(i["name"], i["data_type"], [int(d) for d in i["dims"]]) for i in config["input"]] == \
        [("images", "TYPE_FP32", [64])]
    assert [(o["name"], o["data_type"], [int(d) for d in o["dims"]]) for o in config["output"]] == \
        [("scores", "TYPE_FP32", [10])]
    assert int(config["version_policy"]["latest"]["num_versions"]) == 1
    assert [int(s) for s in config["dynamic_batching"]["preferred_batch_size"]] == [4, 8]
    assert int(config["dynamic_batching"]["max_queue_delay_microseconds"]) == 500
    assert config["instance_group"][0]["kind"] == "KIND_CPU"


def test_tritonclient_http(batched_server):
    x = load_digits().data[:3].astype(np.float32)
    client = tritonclient_http.InferenceServerClient(batched_server.url.removeprefix("http://"))
    try:
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("digits")
        metadata = client.get_model_metadata("digits")
        assert metadata["inputs"] == [{"name": "images", "datatype": "FP32", "shape": [-1, 64]}]
        expected_config(client.get_model_config("digits"))

        images = tritonclient_http.InferInput("images", list(x.shape), "FP32")
        images.set_data_from_numpy(x, binary_data=True)
        result = client.infer("digits", [images],
                              outputs=[tritonclient_http.InferRequestedOutput("scores", binary_data=True)])
        np.testing.assert_allclose(result.as_numpy("scores"), reference(x), rtol=1e-4, atol=1e-4)
        assert result.get_response()["model_version"] == "2"

        with pytest.raises(tritonclient_http.InferenceServerException):
            client.get_model_config("nope")
    finally:
        client.close()


def test_tritonclient_grpc(batched_server):
    x = load_digits().data[:3].astype(np.float32)
    client = tritonclient_grpc.InferenceServerClient(batched_server.grpc_target)
    try:
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("digits")
        metadata = client.get_model_metadata("digits", as_json=True)
        assert metadata["inputs"] == [{"name": "images", "datatype": "FP32", "shape": ["-1", "64"]}]
        expected_config(client.get_model_config("digits", as_json=True)["config"])
        config = client.get_model_config("digits").config
        assert config.input[0].data_type == model_config_pb2.TYPE_FP32

        images = tritonclient_grpc.InferInput("images", list(x.shape), "FP32")
        images.set_data_from_numpy(x)
        result = client.infer("digits", [images], outputs=[tritonclient_grpc.InferRequestedOutput("scores")])
        np.testing.assert_allclose(result.as_numpy("scores"), reference(x), rtol=1e-4, atol=1e-4)

        with pytest.raises(tritonclient_grpc.InferenceServerException):
            client.get_model_config("nope")
    finally:
        client.close()
