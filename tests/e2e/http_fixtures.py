"""Starts bench/http/http_bench_server (our HTTP library with a fixed response, an echo and a
stream endpoint) for the HTTP end-to-end tests, and stops it in teardown."""
import pathlib
import select
import signal
import subprocess
import time

from conftest import build_dir


class BenchServer:
    def __init__(self, proc: subprocess.Popen, port: int):
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM (graceful drain); returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return self.proc.returncode


def start_bench_server(*flags: str, timeout: float = 10.0) -> BenchServer:
    binary = pathlib.Path(build_dir()) / "bench" / "http" / "http_bench_server"
    if not binary.exists():
        raise FileNotFoundError(f"{binary} is not built: build the http_bench_server target")
    proc = subprocess.Popen([str(binary), "--port", "0", "--threads", "2", *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + timeout
    line = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            line = proc.stdout.readline()
            break
        if proc.poll() is not None:
            break
    if not line.startswith("listening on "):
        proc.kill()
        proc.wait(timeout=5)
        raise RuntimeError(f"http_bench_server did not start (first line: {line!r})")
    return BenchServer(proc, int(line.split()[-1]))
