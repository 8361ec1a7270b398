"""Our HTTP server (bench/http/http_bench_server) driven by real clients: curl, hey and Python
requests. Covers keep-alive, Expect: 100-continue, gzip request bodies, chunked streams, body
limits, metrics and the SIGTERM drain."""
import gzip
import re
import subprocess
import time

import pytest
import requests

from http_fixtures import start_bench_server


@pytest.fixture
def server():
    s = start_bench_server("--metrics")
    try:
        yield s
    finally:
        s.stop()


def curl(*args, timeout=30):
    return subprocess.run(["curl", "-sS", *args], capture_output=True, timeout=timeout, check=False)


def test_curl_get_reuses_the_connection(server):
    out = curl("-w", "%{http_code} %{num_connects}\\n", "-o", "/dev/null", f"{server.url}/",
               "-o", "/dev/null", f"{server.url}/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().split("\n")[:2] == ["200 1", "200 0"]  # second request: no new connect


def test_curl_sees_request_id_and_body(server):
    out = curl("-i", "-H", "x-request-id: e2e-42", f"{server.url}/")
    text = out.stdout.decode()
    assert text.startswith("HTTP/1.1 200 OK\r\n")
    assert "x-request-id: e2e-42\r\n" in text
    assert text.endswith("\r\n\r\nhello, world\n")


def test_expect_continue_with_a_large_body(server, tmp_path):
    payload = bytes(range(256)) * 8192  # 2 MiB
    f = tmp_path / "body.bin"
    f.write_bytes(payload)
    out = curl("-v", "-H", "Expect: 100-continue", "--data-binary", f"@{f}",
               "-H", "Content-Type: application/octet-stream", f"{server.url}/echo")
    assert out.returncode == 0, out.stderr
    assert b"HTTP/1.1 100 Continue" in out.stderr
    assert out.stdout == payload


def test_gzip_request_body_is_decoded(server, tmp_path):
    plain = b'{"instances": [[1.0, 2.0, 3.0]]}' * 1000
    f = tmp_path / "body.gz"
    f.write_bytes(gzip.compress(plain))
    out = curl("--data-binary", f"@{f}", "-H", "Content-Encoding: gzip", f"{server.url}/echo")
    assert out.returncode == 0, out.stderr
    assert out.stdout == plain


def test_chunked_stream_with_curl(server):
    out = curl("-N", "-i", f"{server.url}/stream?n=5")
    assert out.returncode == 0, out.stderr
    head, _, body = out.stdout.decode().partition("\r\n\r\n")
    assert "Transfer-Encoding: chunked" in head
    assert body.splitlines() == [f"chunk {i}" for i in range(5)]


def test_stream_with_requests_line_by_line(server):
    with requests.get(f"{server.url}/stream?n=3", stream=True, timeout=10) as r:
        assert r.status_code == 200
        assert [line.decode() for line in r.iter_lines()] == ["chunk 0", "chunk 1", "chunk 2"]


def test_body_limit_gives_413_to_curl(tmp_path):
    s = start_bench_server("--max_body_bytes", "1024")
    try:
        f = tmp_path / "big"
        f.write_bytes(b"x" * 100_000)
        out = curl("-w", "\\n%{http_code}", "--data-binary", f"@{f}", f"{s.url}/echo")
        body, _, code = out.stdout.decode().rpartition("\n")
        assert code == "413"
        assert "larger than the server's limit of 1024 bytes" in body
        # The server is still fine afterwards.
        assert requests.get(f"{s.url}/", timeout=5).text == "hello, world\n"
    finally:
        assert s.stop() == 0


def test_hey_load_has_no_errors(server):
    out = subprocess.run(["hey", "-n", "4096", "-c", "64", f"{server.url}/"],
                         capture_output=True, timeout=120, check=False)
    text = out.stdout.decode()
    assert out.returncode == 0, text
    assert re.search(r"\[200\]\s+4096 responses", text), text
    assert "Error distribution" not in text, text


def test_metrics_count_requests(server):
    for _ in range(3):
        requests.get(f"{server.url}/", timeout=5)
    r = requests.get(f"{server.url}/metrics", timeout=5)
    assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    m = re.search(r'http_requests_total\{code="200",method="GET",server="bench"\} (\d+)', r.text)
    assert m and int(m.group(1)) >= 3, r.text


def test_sigterm_drains_and_ends_open_streams(tmp_path):
    s = start_bench_server()
    stream = subprocess.Popen(["curl", "-sS", "-N", f"{s.url}/stream?n=100000"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = stream.stdout.readline()
        assert first == b"chunk 0\n"
        started = time.monotonic()
        assert s.stop(timeout=10) == 0  # drained cleanly
        assert time.monotonic() - started < 6
        out, err = stream.communicate(timeout=10)
        assert stream.returncode == 0, err  # the stream got its terminating chunk
    finally:
        if stream.poll() is None:
            stream.kill()
            stream.wait(timeout=5)
        s.stop()
