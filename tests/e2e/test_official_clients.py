"""modelfleet-server with the clients TF Serving and Triton users already have installed,
unchanged: tensorflow-serving-api's PredictionServiceStub / ModelServiceStub with
tf.make_tensor_proto / tf.make_ndarray, and tritonclient's HTTP and gRPC InferenceServerClient.
The answers are checked against ONNX Runtime on the same file.

The checks (official_clients_checks.py) run in a child process each: those libraries register
their own copies of TensorFlow's and Triton's .proto files in protobuf's default descriptor pool,
which would clash with the stubs the other e2e tests generate from ours in this process. Only the
TensorFlow check imports TensorFlow (seconds)."""
import importlib.util
import pathlib
import subprocess
import sys

import pytest

from server_fixtures import EXAMPLES, start_server, digits_repo  # noqa: F401

CHECKS = pathlib.Path(__file__).with_name("official_clients_checks.py")


@pytest.fixture
def batched_server(tmp_path, digits_repo, start_server):
    """digits (versions 1 and 2, latest served) behind server-side batching."""
    params = tmp_path / "batching.config"
    params.write_text("max_batch_size { value: 8 }\nbatch_timeout_micros { value: 500 }\n"
                      "allowed_batch_sizes: 4\nallowed_batch_sizes: 8\n")
    return start_server(["--model_name=digits", f"--model_base_path={digits_repo}", "--enable_batching",
                         f"--batching_parameters_file={params}"])


@pytest.mark.parametrize("check, needs", [
    ("tensorflow_serving", ("tensorflow", "tensorflow_serving")),
    ("tritonclient_http", ("tritonclient.http",)),
    ("tritonclient_grpc", ("tritonclient.grpc",)),
])
def test_official_client(check, needs, batched_server):
    for module in needs + ("onnxruntime",):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"{module} is not installed")
    done = subprocess.run([sys.executable, str(CHECKS), check, batched_server.url, batched_server.grpc_target,
                           str(EXAMPLES / "digits" / "2" / "model.onnx")],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
