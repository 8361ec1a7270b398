"""Demo client: one TF Serving gRPC Predict call, with stubs generated from src/proto.

Usage: demo_grpc.py HOST:PORT MODEL
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "e2e"))
import proto_stubs  # noqa: E402

proto_stubs.stubs_path()
import grpc  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2  # noqa: E402
from tensorflow_serving.apis import get_model_metadata_pb2, predict_pb2, prediction_service_pb2_grpc  # noqa: E402


def main():
    target, model = sys.argv[1], sys.argv[2]
    images = load_digits().data[:2].astype(np.float32)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = "serving_default"
    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_FLOAT,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in images.shape]),
        tensor_content=images.tobytes())
    with grpc.insecure_channel(target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        # The input's name comes from the model's signature, as a TF Serving client would read it.
        meta = stub.GetModelMetadata(get_model_metadata_pb2.GetModelMetadataRequest(
            model_spec=request.model_spec, metadata_field=["signature_def"]), timeout=10)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        meta.metadata["signature_def"].Unpack(signatures)
        input_name = next(iter(signatures.signature_def["serving_default"].inputs))
        request.inputs[input_name].CopyFrom(tensor)
        response = stub.Predict(request, timeout=10)
    print(f"  PredictResponse.model_spec: name={response.model_spec.name} version={response.model_spec.version.value}")
    for name, out in response.outputs.items():
        shape = [d.size for d in out.tensor_shape.dim]
        values = np.frombuffer(out.tensor_content, dtype=np.float32).reshape(shape) if out.tensor_content \
            else np.array(out.float_val, dtype=np.float32).reshape(shape)
        print(f"  output {name!r} shape {shape}: predicted digits {values.argmax(axis=1).tolist()}")


if __name__ == "__main__":
    main()
