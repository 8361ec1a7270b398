#!/usr/bin/python3
"""Goodput under overload with gRPC deadlines: how many calls per second are answered OK, in time,
when clients keep more calls in flight than the batched model can serve before their deadlines.

    /usr/bin/python3 bench/server/deadline_overload.py [--seconds 8] [--calls 512]
        [--deadline-ms 20] [--channels 64] [--server PATH] [--baseline PATH]

The example CNN (examples/models/make_cnn.py, --channels wide) is served with batching on (32
rows, 1 ms timeout, one batch thread). h2load keeps `--calls` gRPC Predict calls in flight (4
connections), each with `grpc-timeout`, for `--seconds`; a call that is answered (OK or not) is
replaced at once. First the same load without a deadline measures what the server can do.
Outcomes come from the server's own counters (modelfleet_requests_total by status), rows computed
from modelfleet_batch_size_sum: "rows run per OK" above 1 is model work spent on answers nobody
got in time. --baseline measures a second binary in the same run (the two alternate).
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "server"))
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import proto_stubs  # noqa: E402
from bench_common import free_port, server_binary, stop, wait_for  # noqa: E402


def counters(rest: str) -> dict:
    text = requests.get(rest + "/metrics", timeout=10).text
    out = {"rows": 0.0}
    for status, value in re.findall(r'^modelfleet_requests_total{[^}]*model="cnn"[^}]*status="(\w+)"[^}]*} (\S+)$',
                                    text, re.M):
        out[status] = out.get(status, 0.0) + float(value)
    out["rows"] = sum(float(v) for v in re.findall(r'^modelfleet_batch_size_sum{model="cnn"} (\S+)$', text, re.M))
    return out


def h2load(target: str, calls: int, seconds: int, body: pathlib.Path, deadline_ms: int) -> None:
    headers = ["-H", "content-type: application/grpc", "-H", "te: trailers"]
    if deadline_ms:
        headers += ["-H", f"grpc-timeout: {deadline_ms}m"]
    subprocess.run(["h2load", "-c4", f"-m{calls // 4}", "-t1", f"-D{seconds}", "-d", str(body), *headers,
                    f"http://{target}/tensorflow.serving.PredictionService/Predict"],
                   capture_output=True, text=True, timeout=seconds + 60, check=True)


def measure(binary: pathlib.Path, base: pathlib.Path, params: pathlib.Path, body: pathlib.Path, args,
            tmp: pathlib.Path) -> dict:
    rest_port, grpc_port = free_port(), free_port()
    log = open(tmp / f"server-{rest_port}.log", "wb")
    server = subprocess.Popen([str(binary), "--model_name=cnn", f"--model_base_path={base}",
                               f"--rest_api_port={rest_port}", f"--port={grpc_port}", "--rest_api_address=127.0.0.1",
                               "--grpc_address=127.0.0.1", "--enable_batching",
                               f"--batching_parameters_file={params}", "--log_level=warning"],
                              stdout=log, stderr=subprocess.STDOUT)
    rest, target = f"http://127.0.0.1:{rest_port}", f"127.0.0.1:{grpc_port}"
    try:
        def ready():
            try:
                return requests.get(rest + "/v2/health/ready", timeout=1).status_code == 200
            except requests.RequestException:
                return server.poll() is not None
        wait_for(ready, "the server to be ready")
        if server.poll() is not None:
            raise RuntimeError("modelfleet-server exited: see " + log.name)
        result = {}
        for name, deadline in (("no deadline", 0), (f"{args.deadline_ms} ms deadline", args.deadline_ms)):
            before = counters(rest)
            began = time.monotonic()
            h2load(target, args.calls, args.seconds, body, deadline)
            elapsed = time.monotonic() - began
            time.sleep(0.5)  # late answers and skipped batches are counted when their batch closes
            after = counters(rest)
            delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in set(after) | set(before)}
            ok = delta.get("OK", 0.0)
            result[name] = {"ok/s": ok / elapsed, "late/s": delta.get("DEADLINE_EXCEEDED", 0.0) / elapsed,
                            "refused/s": delta.get("UNAVAILABLE", 0.0) / elapsed,
                            "rows per OK": delta["rows"] / ok if ok else float("inf")}
        return result
    finally:
        stop(server)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--calls", type=int, default=512, help="calls in flight (a multiple of 4)")
    parser.add_argument("--deadline-ms", type=int, default=20)
    parser.add_argument("--channels", type=int, default=64, help="CNN width (more: more work per row)")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per server (alternating)")
    parser.add_argument("--server", type=pathlib.Path)
    parser.add_argument("--baseline", type=pathlib.Path)
    args = parser.parse_args()
    if args.calls < 4 or args.calls % 4 or args.deadline_ms < 1 or args.seconds < 1:
        parser.error("--calls must be a positive multiple of 4; --deadline-ms and --seconds >= 1")
    servers = [args.server or server_binary()] + ([args.baseline] if args.baseline else [])

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        base = tmp / "cnn"
        print(f"# training the example CNN ({args.channels} channels, 1 epoch)", flush=True)
        subprocess.run([sys.executable, str(ROOT / "examples" / "models" / "make_cnn.py"), "--out", str(base),
                        "--version", "1", "--epochs", "1", "--channels", str(args.channels)],
                       check=True, capture_output=True, timeout=600)
        params = tmp / "batching.config"
        params.write_text("max_batch_size { value: 32 }\nbatch_timeout_micros { value: 1000 }\n"
                          "max_enqueued_batches { value: 100 }\nnum_batch_threads { value: 1 }\n")
        image = (np.arange(64, dtype="float32") % 17).reshape(1, 1, 8, 8)
        message = proto_stubs.float_predict_request("cnn", "images", image).SerializeToString()
        body = tmp / "call.bin"
        body.write_bytes(b"\x00" + len(message).to_bytes(4, "big") + message)

        print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}: {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.2f}; {args.calls} calls in flight, {args.seconds} s each", flush=True)
        runs = {str(s): [] for s in servers}
        for _ in range(args.rounds):
            for binary in servers:
                runs[str(binary)].append(measure(binary, base, params, body, args, tmp))
        print("| server | load | OK calls/s | DEADLINE_EXCEEDED/s | UNAVAILABLE/s | rows run per OK |")
        print("|---|---|---:|---:|---:|---:|")
        for binary, results in runs.items():
            for name in results[0]:
                cell = {k: float(np.median([r[name][k] for r in results])) for k in results[0][name]}
                print(f"| {binary} | {name} | {cell['ok/s']:.0f} | {cell['late/s']:.0f} | {cell['refused/s']:.0f} "
                      f"| {cell['rows per OK']:.2f} |")
        print(f"(medians of {args.rounds} rounds)")


if __name__ == "__main__":
    main()
