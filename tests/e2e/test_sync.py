"""modelfleet-sync as the operator runs it: a real process against file:// and http:// sources
(Python's http.server on 127.0.0.1, port 0), checking what lands in the model directory, the
one-line status on stdout/stderr and in the termination message file, the exit codes, and that
SIGTERM ends it promptly (after a sync, or in the middle of a retry backoff)."""
import functools
import hashlib
import http.server
import signal
import subprocess
import threading
import time

import pytest

from conftest import build_dir

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def sync_binary():
    path = build_dir() / "server" / "sync" / "modelfleet-sync"
    if not path.exists():
        pytest.skip(f"{path} is not built (build the modelfleet-sync target)")
    return path


@pytest.fixture
def http_root(tmp_path):
    """Serves tmp_path/www over HTTP on a free loopback port; yields (directory, base URL)."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def run_sync(binary, tmp_path, *args, timeout=30):
    term = tmp_path / "termination-log"
    proc = subprocess.run([str(binary), f"--termination-message-path={term}", *args],
                          capture_output=True, text=True, timeout=timeout)
    return proc, term.read_text() if term.exists() else None


def synced_line(uri, dest, data: bytes):
    return f"synced {uri} -> {dest} ({len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()})"


def assert_failed(proc, term, *parts):
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("modelfleet-sync: "), proc.stderr
    assert term == last + "\n"
    for part in parts:
        assert part in last, last
    return last


def test_file_source_lands_in_the_version_directory(sync_binary, tmp_path):
    model = tmp_path / "src" / "model.onnx"
    model.parent.mkdir()
    data = b"\x08\x07" + bytes(range(256)) * 100
    model.write_bytes(data)
    dest = tmp_path / "models" / "resnet" / "1"
    proc, term = run_sync(sync_binary, tmp_path, f"--source=file://{model}", f"--dest={dest}", "--once",
                          f"--sha256={hashlib.sha256(data).hexdigest().upper()}")
    assert proc.returncode == 0, proc.stderr
    line = synced_line(f"file://{model}", dest, data)
    assert proc.stdout.strip().splitlines()[-1] == line
    assert term == line + "\n"
    assert (dest / "model.onnx").read_bytes() == data
    assert sorted(p.name for p in dest.parent.iterdir()) == ["1"]  # no staging directory left

    # A restarted sidecar finds the same content and reports it again without copying.
    (dest / "sentinel").write_text("")
    proc, term = run_sync(sync_binary, tmp_path, f"--source=file://{model}", f"--dest={dest}", "--once")
    assert proc.returncode == 0, proc.stderr
    assert term == line + "\n"
    assert (dest / "sentinel").exists()


def test_directory_source_replaces_an_older_copy(sync_binary, tmp_path):
    src = tmp_path / "export"
    (src / "variables").mkdir(parents=True)
    (src / "model.onnx").write_bytes(b"graph v2")
    (src / "variables" / "weights.bin").write_bytes(b"w" * 1000)
    dest = tmp_path / "models" / "resnet" / "2"
    (dest).mkdir(parents=True)
    (dest / "model.onnx").write_bytes(b"graph v1")
    proc, term = run_sync(sync_binary, tmp_path, f"--source=file://{src}", f"--dest={dest}", "--once")
    assert proc.returncode == 0, proc.stderr
    assert f"synced file://{src} -> {dest} (1008 bytes, sha256 " in term
    assert (dest / "model.onnx").read_bytes() == b"graph v2"
    assert (dest / "variables" / "weights.bin").read_bytes() == b"w" * 1000
    assert sorted(p.name for p in dest.parent.iterdir()) == ["2"]


def test_http_source(sync_binary, tmp_path, http_root):
    root, base = http_root
    data = bytes(range(256)) * 4096  # 1 MiB
    (root / "v3").mkdir()
    (root / "v3" / "model.onnx").write_bytes(data)
    dest = tmp_path / "models" / "mlp" / "3"
    uri = f"{base}/v3/model.onnx"
    proc, term = run_sync(sync_binary, tmp_path, f"--source={uri}", f"--dest={dest}", "--once",
                          f"--sha256={hashlib.sha256(data).hexdigest()}")
    assert proc.returncode == 0, proc.stderr
    assert term == synced_line(uri, dest, data) + "\n"
    assert (dest / "model.onnx").read_bytes() == data


def test_http_404_fails_after_its_attempts(sync_binary, tmp_path, http_root):
    _, base = http_root
    dest = tmp_path / "models" / "mlp" / "3"
    start = time.monotonic()
    proc, term = run_sync(sync_binary, tmp_path, f"--source={base}/missing/model.onnx", f"--dest={dest}",
                          "--attempts=3", "--backoff-initial-ms=50", "--backoff-max-ms=100")
    assert time.monotonic() - start < 20
    assert_failed(proc, term, f"GET {base}/missing/model.onnx answered 404", "(after 3 attempts)")
    assert proc.stderr.count("retrying") == 2
    assert not (tmp_path / "models" / "mlp").exists() or not any((tmp_path / "models" / "mlp").iterdir())


def test_sha256_mismatch_names_both_digests(sync_binary, tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"not what was promised")
    wrong = "0" * 64
    proc, term = run_sync(sync_binary, tmp_path, f"--source=file://{model}", f"--dest={tmp_path / 'm' / '1'}",
                          f"--sha256={wrong}", "--attempts=1")
    assert_failed(proc, term, "sha256 mismatch", f"expected {wrong}",
                  f"got {hashlib.sha256(b'not what was promised').hexdigest()}")
    assert not (tmp_path / "m" / "1").exists()


@pytest.mark.parametrize("args, parts", [
    (["--source=s3://bucket/model.onnx"], ["'s3://bucket/model.onnx'", "unsupported scheme 's3'", "file:///abs/path",
                                           "pvc://CLAIM/sub/path", "https://"]),
    (["--source=models/model.onnx"], ["has no scheme"]),
    (["--source=pvc://claim/../other/model.onnx"], ["'..' segment"]),
    (["--source=file:///m.onnx", "--sha256=xyz"], ["--sha256 must be 64 hex digits"]),
    (["--source=file:///m.onnx", "--no-such-flag=1"], ["unknown flag --no-such-flag", "--help"]),
])
def test_bad_arguments_fail_at_once(sync_binary, tmp_path, args, parts):
    start = time.monotonic()
    proc, term = run_sync(sync_binary, tmp_path, f"--dest={tmp_path / 'm' / '1'}", "--attempts=5",
                          "--backoff-initial-ms=10000", *args)
    assert time.monotonic() - start < 5  # not retried
    assert_failed(proc, term, *parts)


def test_stays_up_after_syncing_until_sigterm(sync_binary, tmp_path):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"graph")
    term = tmp_path / "termination-log"
    proc = subprocess.Popen([str(sync_binary), f"--source=file://{model}", f"--dest={tmp_path / 'm' / '1'}",
                             f"--termination-message-path={term}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while not (term.exists() and term.read_text().startswith("synced")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no sync reported"
            time.sleep(0.05)
        time.sleep(0.3)
        assert proc.poll() is None, "exited without --once"
        proc.send_signal(signal.SIGTERM)
        stdout, _ = proc.communicate(timeout=5)
        assert proc.returncode == 0
        assert stdout.startswith("synced file://")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_during_a_backoff_exits_promptly(sync_binary, tmp_path):
    term = tmp_path / "termination-log"
    proc = subprocess.Popen([str(sync_binary), f"--source=file://{tmp_path / 'not-yet.onnx'}",
                             f"--dest={tmp_path / 'm' / '1'}", "--attempts=5", "--backoff-initial-ms=60000",
                             "--backoff-max-ms=60000", f"--termination-message-path={term}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.5)  # the first attempt fails at once; the process is now in its backoff
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=5)
        assert time.monotonic() - start < 3
        assert proc.returncode == 1
        assert stderr.strip().splitlines()[-1].startswith("modelfleet-sync: stopped by SIGTERM before file://")
        assert term.read_text().startswith("modelfleet-sync: stopped by SIGTERM")
        assert not (tmp_path / "m").exists() or not any((tmp_path / "m").iterdir())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
