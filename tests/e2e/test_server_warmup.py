"""TF Serving's warm-up file, <version>/assets.extra/tf_serving_warmup_requests (a TFRecord file of
PredictionLog, as TF users write it with tf.io.TFRecordWriter), replayed before a version takes
traffic; a file whose requests do not run fails that version's load, and
--enable_model_warmup=false skips it, as in tensorflow_model_server."""
import numpy as np
import requests

import proto_stubs
import tfrecord
from server_fixtures import EXAMPLES, copy_version, start_server, wait_for  # noqa: F401


def warmup_file(path, batches, input_name="images", signature="serving_default"):
    logs = proto_stubs.module("tensorflow_serving.apis.prediction_log_pb2")
    tensor_pb2 = proto_stubs.module("tensorflow.core.framework.tensor_pb2")
    types = proto_stubs.module("tensorflow.core.framework.types_pb2")
    records = b""
    for batch in batches:
        log = logs.PredictionLog()
        request = log.predict_log.request
        request.model_spec.name = "digits"
        request.model_spec.signature_name = signature
        x = tensor_pb2.TensorProto(dtype=types.DT_FLOAT)
        for d in (batch, 64):
            x.tensor_shape.dim.add(size=d)
        x.tensor_content = np.full((batch, 64), 3.0, dtype="<f4").tobytes()
        request.inputs[input_name].CopyFrom(x)
        records += tfrecord.frame(log.SerializeToString())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(records)


def version_status(server, version):
    r = requests.get(f"{server.url}/v1/models/digits/versions/{version}", timeout=10)
    return r.json()["model_version_status"][0] if r.status_code == 200 else None


def test_warmup_requests_replayed_and_a_failing_file_fails_the_load(tmp_path, start_server):
    base = tmp_path / "digits"
    copy_version(EXAMPLES / "digits", 1, base)
    warmup_file(base / "1" / "assets.extra" / "tf_serving_warmup_requests", batches=[1, 8, 32])
    server = start_server(["--model_name=digits", f"--model_base_path={base}",
                           "--file_system_poll_wait_seconds=0.2"])
    assert "warm-up requests replayed" in server.log() and "requests=3" in server.log(), server.log()[-2000:]

    # Version 2's warm-up data names an input the model does not have: its load fails, the
    # status says why, and version 1 keeps serving.
    staging = tmp_path / "staging"
    copy_version(EXAMPLES / "digits", 2, staging)
    warmup_file(staging / "2" / "assets.extra" / "tf_serving_warmup_requests", batches=[1], input_name="pixels")
    (staging / "2").rename(base / "2")
    wait_for(lambda: (version_status(server, 2) or {}).get("state") == "END", timeout=30,
             what="version 2's load to fail")
    message = version_status(server, 2)["status"]["error_message"]
    assert "warm-up request 0 of 1" in message and "pixels" in message, message
    r = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": [[0.0] * 64]}, timeout=10)
    assert r.status_code == 200 and r.headers["X-Model-Version"] == "1", r.text


def test_warmup_request_for_another_signature_fails_the_load(tmp_path, start_server):
    base = tmp_path / "digits"
    copy_version(EXAMPLES / "digits", 1, base)
    warmup_file(base / "1" / "assets.extra" / "tf_serving_warmup_requests", batches=[1], signature="classify")
    server = start_server(["--model_name=digits", f"--model_base_path={base}"], ready=False)

    def failed():
        try:
            status = version_status(server, 1)
        except requests.ConnectionError:
            return False
        return status is not None and status["state"] == "END"
    wait_for(failed, timeout=30, what="version 1's load to fail")
    assert "no signature 'classify'" in version_status(server, 1)["status"]["error_message"]


def test_enable_model_warmup_false_skips_the_file(tmp_path, start_server):
    base = tmp_path / "digits"
    copy_version(EXAMPLES / "digits", 1, base)
    warmup_file(base / "1" / "assets.extra" / "tf_serving_warmup_requests", batches=[1], input_name="pixels")
    server = start_server(["--model_name=digits", f"--model_base_path={base}", "--enable_model_warmup=false"])
    r = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": [[0.0] * 64]}, timeout=10)
    assert r.status_code == 200, r.text
    assert "warm-up requests replayed" not in server.log()
