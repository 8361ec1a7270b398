"""The .proto files compile for Python and are wire-compatible with TF Serving / KServe v2."""
import struct

import pytest

import proto_stubs


@pytest.fixture(scope="module")
def stubs():
    return proto_stubs.stubs_path()


def test_every_proto_generates_and_imports(stubs):
    for rel in proto_stubs.proto_files():
        if rel == proto_stubs.HEALTH_PROTO:
            continue
        name = rel[:-len(".proto")].replace("/", ".") + "_pb2"
        assert proto_stubs.module(name).DESCRIPTOR.name == rel


def test_services_have_tf_serving_and_kserve_methods(stubs):
    ps = proto_stubs.module("tensorflow_serving.apis.prediction_service_pb2")
    methods = {m.name for m in ps.DESCRIPTOR.services_by_name["PredictionService"].methods}
    assert methods == {"Classify", "Regress", "Predict", "MultiInference", "GetModelMetadata"}
    ms = proto_stubs.module("tensorflow_serving.apis.model_service_pb2")
    methods = {m.name for m in ms.DESCRIPTOR.services_by_name["ModelService"].methods}
    assert methods == {"GetModelStatus", "HandleReloadConfigRequest"}
    v2 = proto_stubs.module("inference.grpc_predict_v2_pb2")
    svc = v2.DESCRIPTOR.services_by_name["GRPCInferenceService"]
    assert svc.full_name == "inference.GRPCInferenceService"
    assert {m.name for m in svc.methods} >= {"ServerLive", "ServerReady", "ModelReady",
                                             "ServerMetadata", "ModelMetadata", "ModelInfer"}
    grpc_mod = proto_stubs.module("tensorflow_serving.apis.prediction_service_pb2_grpc")
    assert hasattr(grpc_mod, "PredictionServiceStub")


def _field_numbers(message):
    return {f.name: f.number for f in message.DESCRIPTOR.fields}


def test_field_numbers_match_compat_md(stubs):
    tensor = proto_stubs.module("tensorflow.core.framework.tensor_pb2").TensorProto
    assert _field_numbers(tensor) == {
        "dtype": 1, "tensor_shape": 2, "version_number": 3, "tensor_content": 4, "half_val": 13,
        "float_val": 5, "double_val": 6, "int_val": 7, "string_val": 8, "scomplex_val": 9,
        "int64_val": 10, "bool_val": 11, "dcomplex_val": 12, "resource_handle_val": 14,
        "variant_val": 15, "uint32_val": 16, "uint64_val": 17, "float8_val": 18}
    model = proto_stubs.module("tensorflow_serving.apis.model_pb2").ModelSpec
    assert _field_numbers(model) == {"name": 1, "version": 2, "version_label": 4,
                                     "signature_name": 3}
    v2 = proto_stubs.module("inference.grpc_predict_v2_pb2")
    assert _field_numbers(v2.ModelInferRequest) == {
        "model_name": 1, "model_version": 2, "id": 3, "parameters": 4, "inputs": 5,
        "outputs": 6, "raw_input_contents": 7}
    assert _field_numbers(v2.InferTensorContents) == {
        "bool_contents": 1, "int_contents": 2, "int64_contents": 3, "uint_contents": 4,
        "uint64_contents": 5, "fp32_contents": 6, "fp64_contents": 7, "bytes_contents": 8}
    types = proto_stubs.module("tensorflow.core.framework.types_pb2")
    expected = {"DT_FLOAT": 1, "DT_DOUBLE": 2, "DT_INT32": 3, "DT_UINT8": 4, "DT_INT16": 5,
                "DT_INT8": 6, "DT_STRING": 7, "DT_COMPLEX64": 8, "DT_INT64": 9, "DT_BOOL": 10,
                "DT_BFLOAT16": 14, "DT_UINT16": 17, "DT_COMPLEX128": 18, "DT_HALF": 19,
                "DT_UINT32": 22, "DT_UINT64": 23}
    for name, number in expected.items():
        assert types.DataType.Value(name) == number


def test_predict_request_bytes_are_what_a_tf_serving_client_sends(stubs):
    predict = proto_stubs.module("tensorflow_serving.apis.predict_pb2")
    request = predict.PredictRequest()
    request.model_spec.name = "m"
    request.model_spec.version.value = 7
    tensor = request.inputs["x"]
    tensor.dtype = 1  # DT_FLOAT
    tensor.tensor_shape.dim.add().size = 2
    tensor.float_val.extend([1.0, 2.0])
    wire = request.SerializeToString()
    # model_spec (1): name (1) "m", version (2) Int64Value{value (1): 7}
    assert wire.startswith(b"\x0a\x07\x0a\x01m\x12\x02\x08\x07")
    # inputs (2) is a map entry whose value (2) is the TensorProto with packed float_val (5)
    assert b"\x2a\x08" + struct.pack("<2f", 1.0, 2.0) in wire
    assert predict.PredictRequest.FromString(wire) == request


def test_model_server_config_text_format_parses(stubs):
    from google.protobuf import text_format
    config_pb2 = proto_stubs.module("tensorflow_serving.config.model_server_config_pb2")
    text = """
    model_config_list {
      config {
        name: 'mnist' base_path: '/models/mnist' model_platform: 'onnx'
        model_version_policy { specific { versions: 1 versions: 2 } }
        version_labels { key: 'stable' value: 1 }
        version_labels { key: 'canary' value: 2 }
      }
      config { name: 'resnet' base_path: '/models/resnet'
               model_version_policy { latest { num_versions: 2 } } }
    }"""
    config = text_format.Parse(text, config_pb2.ModelServerConfig())
    first = config.model_config_list.config[0]
    assert list(first.model_version_policy.specific.versions) == [1, 2]
    assert dict(first.version_labels) == {"stable": 1, "canary": 2}
    assert config.model_config_list.config[1].model_version_policy.latest.num_versions == 2
    batching = proto_stubs.module("tensorflow_serving.servables.tensorflow.session_bundle_config_pb2")
    params = text_format.Parse(
        "max_batch_size { value: 128 } batch_timeout_micros { value: 0 } "
        "allowed_batch_sizes: 32 allowed_batch_sizes: 128 pad_variable_length_inputs: true",
        batching.BatchingParameters())
    assert params.max_batch_size.value == 128 and params.HasField("batch_timeout_micros")
    assert not params.HasField("num_batch_threads")
    with pytest.raises(text_format.ParseError):
        text_format.Parse("model_config_list { config { nme: 'x' } }",
                          config_pb2.ModelServerConfig())


def test_status_json_uses_tf_serving_names(stubs):
    from google.protobuf import json_format
    status_pb2 = proto_stubs.module("tensorflow_serving.apis.get_model_status_pb2")
    response = status_pb2.GetModelStatusResponse()
    version = response.model_version_status.add(version=3, state=30)
    version.status.error_code = 0
    text = json_format.MessageToJson(response, always_print_fields_with_no_presence=True)
    assert '"model_version_status"' in text and '"version": "3"' in text
    assert '"state": "AVAILABLE"' in text and '"error_code": "OK"' in text


def test_health_messages_load_by_path():
    health = proto_stubs.health_messages()
    response = health.HealthCheckResponse(status=1)
    assert health.HealthCheckResponse.ServingStatus.Name(response.status) == "SERVING"
    assert health.HealthCheckRequest.DESCRIPTOR.full_name == "grpc.health.v1.HealthCheckRequest"
