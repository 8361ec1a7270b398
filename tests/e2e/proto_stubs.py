"""Python stubs generated from ModelFleet's own .proto files (src/proto), for the e2e tests.

The tests talk to the server exactly as TF Serving and KServe clients do, with messages
generated from our .proto files by grpc_tools.protoc, so a wire incompatibility in a .proto
shows up as a test failure. Nothing is downloaded: the generator and google/protobuf's
well-known types come from Debian's python3-grpc-tools.

    import proto_stubs
    proto_stubs.stubs_path()   # generates once per process, puts the folder on sys.path
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

grpc.health.v1 cannot be imported under its own package name (it would have to live inside
the installed `grpc` package), so its messages are loaded by file path: see health_check().
"""
import atexit
import importlib.util
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO_ROOT = ROOT / "src" / "proto"
HEALTH_PROTO = "grpc/health/v1/health.proto"

_generated = {}


def proto_files():
    """Every .proto under src/proto, relative to it, sorted."""
    return sorted(p.relative_to(PROTO_ROOT).as_posix() for p in PROTO_ROOT.rglob("*.proto"))


def generate(out_dir, files):
    """Runs grpc_tools.protoc (messages + gRPC stubs) for `files` into `out_dir`.

    Raises RuntimeError with protoc's message when a file does not compile.
    """
    import grpc_tools  # imported here so a missing package fails the test that needs it

    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_ROOT}",
           f"--python_out={out_dir}", f"--grpc_python_out={out_dir}"]
    if well_known.is_dir():
        cmd.append(f"-I{well_known}")
    else:  # Debian keeps google/protobuf/*.proto under /usr/include
        cmd.append("-I/usr/include")
    cmd += list(files)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"protoc failed ({done.returncode}): {done.stderr.strip()}")


def stubs_path():
    """Generates the stubs (once per process) and returns the folder, already on sys.path."""
    if "path" not in _generated:
        out = pathlib.Path(tempfile.mkdtemp(prefix="mf_proto_py_"))
        atexit.register(shutil.rmtree, out, True)
        generate(out, [f for f in proto_files() if f != HEALTH_PROTO])
        # Regular packages, so that ours win over tensorflow-cpu's and tensorflow-serving-api's
        # installed `tensorflow` and `tensorflow_serving` (namespace folders would lose to them).
        for folder in out.rglob("*"):
            if folder.is_dir():
                (folder / "__init__.py").touch()
        for name in [n for n in sys.modules if n.split(".")[0] in {"tensorflow", "tensorflow_serving", "inference"}]:
            del sys.modules[name]
        sys.path.insert(0, str(out))
        _generated["path"] = out
    return _generated["path"]


def health_messages():
    """The grpc.health.v1 message module (HealthCheckRequest, HealthCheckResponse)."""
    if "health" not in _generated:
        out = pathlib.Path(tempfile.mkdtemp(prefix="mf_health_py_"))
        atexit.register(shutil.rmtree, out, True)
        generate(out, [HEALTH_PROTO])
        path = out / "grpc" / "health" / "v1" / "health_pb2.py"
        spec = importlib.util.spec_from_file_location("mf_grpc_health_v1_pb2", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _generated["health"] = module
    return _generated["health"]


def health_check(channel, service="", timeout=5.0):
    """Calls grpc.health.v1.Health/Check on `channel`; returns the status name ("SERVING"...)."""
    health = health_messages()
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=health.HealthCheckRequest.SerializeToString,
        response_deserializer=health.HealthCheckResponse.FromString)
    response = check(health.HealthCheckRequest(service=service), timeout=timeout)
    return health.HealthCheckResponse.ServingStatus.Name(response.status)


def module(name):
    """Imports `name` (e.g. "tensorflow_serving.apis.predict_pb2") from the generated stubs."""
    stubs_path()
    return importlib.import_module(name)


def float_predict_request(model, input_name, values, tensor_content=True):
    """A PredictRequest for `model` with one DT_FLOAT input `input_name` holding `values` (a numpy
    array: its shape is the tensor's), as tensor_content (what tf.make_tensor_proto sends) or as
    float_val."""
    predict_pb2 = module("tensorflow_serving.apis.predict_pb2")
    types_pb2 = module("tensorflow.core.framework.types_pb2")
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    tensor = request.inputs[input_name]
    tensor.dtype = types_pb2.DT_FLOAT
    for size in values.shape:
        tensor.tensor_shape.dim.add().size = size
    if tensor_content:
        tensor.tensor_content = values.astype("<f4").tobytes()
    else:
        tensor.float_val.extend(values.astype("float32").ravel().tolist())
    return request


__all__ = ["stubs_path", "module", "health_messages", "health_check", "proto_files", "generate",
           "float_predict_request"]
