"""Start-up errors and shutdown: bad flags and configs are refused with a clear message; SIGTERM
turns readiness off, drains and exits 0."""
import signal
import subprocess
import time

import requests

from server_fixtures import (EXAMPLES, copy_version, server_binary, start_server,  # noqa: F401
                             wait_for)


def run_server(args, timeout=30):
    return subprocess.run([str(server_binary()), "--port=0", "--rest_api_port=0"] + args,
                          capture_output=True, text=True, timeout=timeout)


def test_bad_startup_input_is_refused_clearly(tmp_path):
    cases = [
        (["--no_such_flag=1"], "no_such_flag"),
        (["--model_base_path=/m", "--file_system_poll_wait_seconds=-1"], "file_system_poll_wait_seconds"),
        (["--model_base_path=/m", "--backend=tpu"], "--backend"),
        (["--model_base_path=/m", "--device=gpu"], "--device must be auto, cpu or cuda"),
        (["--model_base_path=/m", "--device=cpu", "--backend=cpu"], "not both"),
        (["--model_base_path=/m", "--gpu_memory_fraction=1.5"], "--gpu_memory_fraction"),
        (["--model_base_path=/m", "--gpu_memory_fraction=-0.1"], "--gpu_memory_fraction"),
        (["--model_base_path=/m", "--grpc_threads=-1"], "--grpc_threads"),
        (["--model_base_path=/m", "--load_thread_nice=20"], "--load_thread_nice"),
        (["--model_base_path=/m", "--max_num_load_retries=-2"], "--max_num_load_retries"),
        (["--model_base_path=/m", "--retain_load_memory_seconds=-1"], "--retain_load_memory_seconds"),
        (["--model_base_path=/m", "--allow_version_labels_for_unavailable_models=false"],
         "--allow_version_labels_for_unavailable_models=false"),
        (["--model_base_path=/m", "--grpc_channel_arguments=grpc.max_receive_message_length=1k"],
         "grpc.max_receive_message_length"),
        (["--model_base_path=/m", "--malloc_mmap_threshold_bytes=68719476736"],
         "--malloc_mmap_threshold_bytes"),
        (["--model_base_path=/m", "--batching_parameters_file=/nope"], "--enable_batching"),
        (["--model_base_path=/m", "--enable_batching", "--batching_parameters_file=/nope"], "/nope"),
        # TF Serving flags we do not implement and must not ignore: plaintext where TLS was asked for.
        (["--model_base_path=/m", "--ssl_config_file=/etc/ssl.config"], "--ssl_config_file: TLS"),
        (["--model_base_path=/m", "--use_alts_credentials"], "--use_alts_credentials"),
        (["--model_base_path=/m", "--grpc_socket_path=/tmp/grpc.sock"], "--grpc_socket_path"),
        (["--model_base_path=/m", "--num_load_threads=many"], "num_load_threads"),
        (["--model_base_path=/m", "--load_retry_interval_micros=soon"], "load_retry_interval_micros"),
        (["--model_base_path=/m", "--enable_per_model_batching_parameters"],
         "--enable_per_model_batching_parameters needs --enable_batching"),
    ]
    bad_config = tmp_path / "bad.config"
    bad_config.write_text('model_config_list { config { name: "m" base_path: "/m" model_platform: "pytorch" } }')
    cases.append(([f"--model_config_file={bad_config}"], "model_platform 'pytorch'"))
    for args, needle in cases:
        done = run_server(args)
        assert done.returncode != 0, args
        assert needle in done.stdout + done.stderr, (args, done.stdout + done.stderr)


def test_tf_serving_command_line_starts_unchanged(tmp_path, start_server):
    """A tensorflow_model_server command line as Kubernetes manifests carry it: TensorFlow-only
    flags are accepted and each is logged as ignored with the reason; the ones that map here
    (session parallelism, gRPC threads, retry interval, warm-up iterations) take effect."""
    version = run_server(["--version"])
    assert version.returncode == 0 and "ModelFleet model server: " in version.stdout, version
    base = tmp_path / "digits"
    copy_version(EXAMPLES / "digits", 1, base)
    server = start_server(["--model_name=digits", f"--model_base_path={base}",
                           "--tensorflow_session_parallelism=2", "--tensorflow_inter_op_parallelism=2",
                           "--saved_model_tags=serve", "--num_load_threads=4", "--num_unload_threads=4",
                           "--grpc_max_threads=4", "--xla_cpu_compilation_enabled", "--enable_model_warmup=true",
                           "--num_request_iterations_for_warmup=2", "--flush_filesystem_caches=true",
                           "--load_retry_interval_micros=500000", "--use_alts_credentials=false",
                           "--enable_signature_method_name_check=false"])
    r = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": [[0.0] * 64]}, timeout=10)
    assert r.status_code == 200, r.text
    log = server.log()
    for ignored in ("--tensorflow_inter_op_parallelism", "--saved_model_tags", "--num_load_threads", "--flush_filesystem_caches",
                    "--num_unload_threads", "--xla_cpu_compilation_enabled",
                    "--enable_signature_method_name_check"):
        assert f"TF Serving flag ignored flag={ignored}" in log, (ignored, log[-3000:])
    assert "flag=--tensorflow_session_parallelism" not in log, "it maps to --intra_op_threads"


def test_sigterm_not_ready_then_drain_then_exit(tmp_path, start_server):
    base = tmp_path / "digits"
    copy_version(EXAMPLES / "digits", 1, base)
    server = start_server(["--model_name=digits", f"--model_base_path={base}",
                           "--not_ready_grace_seconds=1.5", "--drain_seconds=5"])
    server.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    # During the grace period the server says it is not ready but still answers.
    assert requests.get(f"{server.url}/v2/health/ready", timeout=5).status_code == 400
    r = requests.post(f"{server.url}/v1/models/digits:predict", json={"instances": [[0.0] * 64]},
                      timeout=5)
    assert r.status_code == 200
    assert server.proc.wait(timeout=20) == 0
    assert "modelfleet-server stopped drained=true" in server.log()


def test_model_config_file_is_polled(tmp_path, start_server):
    """A changed config file is applied (labels move); a broken one is refused and changes
    nothing."""
    base = tmp_path / "digits"
    for v in (1, 2):
        copy_version(EXAMPLES / "digits", v, base)
    config = tmp_path / "models.config"

    def write(stable):
        partial = tmp_path / "models.config.partial"
        partial.write_text(f'model_config_list {{ config {{ name: "digits" base_path: "{base}" '
                           f'model_version_policy {{ all {{}} }} '
                           f'version_labels {{ key: "stable" value: {stable} }} }} }}')
        partial.rename(config)

    write(1)
    server = start_server([f"--model_config_file={config}",
                           "--model_config_file_poll_wait_seconds=1"])

    def stable_version():
        r = requests.post(f"{server.url}/v1/models/digits/labels/stable:predict",
                          json={"instances": [[0.0] * 64]}, timeout=10)
        return r.headers.get("X-Model-Version") if r.status_code == 200 else None

    # Ready means a version of digits is AVAILABLE; version 1 (stable) may still be loading.
    wait_for(lambda: stable_version() == "1", timeout=20, what="version 1 behind the stable label")
    write(2)
    wait_for(lambda: stable_version() == "2", timeout=20, what="the label to move to version 2")
    config.write_text("model_config_list { config { name: ")
    wait_for(lambda: "model config reload refused" in server.log(), timeout=20,
             what="the broken config to be refused")
    assert stable_version() == "2"


def test_taken_grpc_port_is_refused(tmp_path, start_server):
    """gRPC's default SO_REUSEPORT would let a second server share the port silently."""
    base = tmp_path / "digits"
    copy_version(EXAMPLES / "digits", 1, base)
    first = start_server(["--model_name=digits", f"--model_base_path={base}"])
    done = subprocess.run([str(server_binary()), "--model_name=digits", f"--model_base_path={base}",
                           "--rest_api_port=0", "--grpc_address=127.0.0.1", f"--port={first.grpc_port}"],
                          capture_output=True, text=True, timeout=30)
    assert done.returncode != 0
    assert "cannot listen on 127.0.0.1:%d" % first.grpc_port in done.stdout + done.stderr
