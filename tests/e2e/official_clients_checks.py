"""The checks of test_official_clients.py, run in a process of their own: tensorflow-serving-api
and tritonclient register their own copies of TensorFlow's and Triton's .proto files in
protobuf's default descriptor pool, where the stubs the other e2e tests generate from ours
(proto_stubs.py) would clash with them.

    python official_clients_checks.py tensorflow_serving|tritonclient_http|tritonclient_grpc \
        REST_URL GRPC_TARGET MODEL_ONNX
"""
import sys

import numpy as np
from sklearn.datasets import load_digits

MODEL = ""


def reference(x: np.ndarray) -> np.ndarray:
    import onnxruntime
    session = onnxruntime.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    return session.run(["scores"], {"images": x})[0]


def raises(exception, call):
    try:
        call()
    except exception as error:
        return error
    raise AssertionError(f"{call} did not raise {exception}")


def tensorflow_serving(rest_url: str, grpc_target: str) -> None:
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2, model_service_pb2_grpc,
                                         predict_pb2, prediction_service_pb2_grpc)
    x = load_digits().data[:5].astype(np.float32)
    with grpc.insecure_channel(grpc_target) as channel:
        prediction = prediction_service_pb2_grpc.PredictionServiceStub(channel)
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
        status = model_service_pb2_grpc.ModelServiceStub(channel).GetModelStatus(status_request, timeout=10)
        assert [(s.version, get_model_status_pb2.ModelVersionStatus.State.Name(s.state))
                for s in status.model_version_status] == [(2, "AVAILABLE")]

        request.model_spec.name = "nope"
        error = raises(grpc.RpcError, lambda: prediction.Predict(request, timeout=10))
        assert error.code() == grpc.StatusCode.NOT_FOUND
        assert error.details() == "Servable not found for request: Latest(nope)"


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


def tritonclient_http(rest_url: str, grpc_target: str) -> None:
    import tritonclient.http as triton
    x = load_digits().data[:3].astype(np.float32)
    client = triton.InferenceServerClient(rest_url.removeprefix("http://"))
    try:
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("digits")
        metadata = client.get_model_metadata("digits")
        assert metadata["inputs"] == [{"name": "images", "datatype": "FP32", "shape": [-1, 64]}]
        expected_config(client.get_model_config("digits"))

        images = triton.InferInput("images", list(x.shape), "FP32")
        images.set_data_from_numpy(x, binary_data=True)
        result = client.infer("digits", [images], outputs=[triton.InferRequestedOutput("scores", binary_data=True)])
        np.testing.assert_allclose(result.as_numpy("scores"), reference(x), rtol=1e-4, atol=1e-4)
        assert result.get_response()["model_version"] == "2"
        raises(triton.InferenceServerException, lambda: client.get_model_config("nope"))
    finally:
        client.close()


def tritonclient_grpc(rest_url: str, grpc_target: str) -> None:
    import tritonclient.grpc as triton
    import tritonclient.grpc.model_config_pb2 as model_config_pb2
    x = load_digits().data[:3].astype(np.float32)
    client = triton.InferenceServerClient(grpc_target)
    try:
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("digits")
        metadata = client.get_model_metadata("digits", as_json=True)
        assert metadata["inputs"] == [{"name": "images", "datatype": "FP32", "shape": ["-1", "64"]}]
        expected_config(client.get_model_config("digits", as_json=True)["config"])
        config = client.get_model_config("digits").config
        assert config.input[0].data_type == model_config_pb2.TYPE_FP32

        images = triton.InferInput("images", list(x.shape), "FP32")
        images.set_data_from_numpy(x)
        result = client.infer("digits", [images], outputs=[triton.InferRequestedOutput("scores")])
        np.testing.assert_allclose(result.as_numpy("scores"), reference(x), rtol=1e-4, atol=1e-4)
        raises(triton.InferenceServerException, lambda: client.get_model_config("nope"))
    finally:
        client.close()


if __name__ == "__main__":
    check, rest, grpc_target, MODEL = sys.argv[1:5]
    {"tensorflow_serving": tensorflow_serving, "tritonclient_http": tritonclient_http,
     "tritonclient_grpc": tritonclient_grpc}[check](rest, grpc_target)
    print(f"{check}: ok")
