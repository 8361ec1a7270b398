#!/usr/bin/python3
"""Throughput and latency of modelfleet-server with and without dynamic batching, measured in
the same run on the same model (the example CNN), printed as a table with ratios.

    /usr/bin/python3 bench/server/batching_throughput.py [--clients 32] [--seconds 10]

Needs a built modelfleet-server (MODELFLEET_BUILD_DIR or build/). Both servers run on loopback
with free ports, one at a time, with the same closed-loop load from `hey`: N connections posting one
digit image per request (TF Serving REST row form).
"""
import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import requests
from sklearn.datasets import load_digits

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "server"))
from bench_common import free_port  # noqa: E402



def start(binary, args, log):
    port = free_port()
    proc = subprocess.Popen([str(binary), f"--rest_api_port={port}", "--port=0",
                             "--rest_api_address=127.0.0.1"] + args, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if requests.get(url + "/v2/health/ready", timeout=1).status_code == 200:
                return proc, url
        except requests.RequestException:
            pass
        if proc.poll() is not None:
            raise RuntimeError("server exited early")
        time.sleep(0.1)
    proc.kill()
    raise TimeoutError("server not ready")


def drive(url, clients, seconds, body_file):
    """Closed-loop load from `hey` (a Go client, so the client is not the bottleneck)."""
    out = subprocess.run(["hey", "-z", f"{seconds}s", "-c", str(clients), "-m", "POST",
                          "-T", "application/json", "-D", str(body_file),
                          url + "/v1/models/cnn:predict"],
                         capture_output=True, text=True, timeout=seconds + 120, check=True).stdout
    result = {"errors": 0}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Requests/sec:"):
            result["rps"] = float(line.split()[1])
        elif line.startswith("50%% in") or line.startswith("50% in"):
            result["p50_ms"] = 1e3 * float(line.split()[2])
        elif line.startswith("99% in"):
            result["p99_ms"] = 1e3 * float(line.split()[2])
        elif line.startswith("[") and "responses" in line and not line.startswith("[200]"):
            result["errors"] += int(line.split()[1])
    return result


def allowed_sizes(max_batch):
    """Powers of two up to max_batch (and max_batch itself): few distinct batch shapes, so
    per-shape work in the runtime is done once per size."""
    sizes, n = [], 1
    while n < max_batch:
        sizes.append(n)
        n *= 2
    return sizes + [max_batch]


def average_batch(url):
    """rows / batches from modelfleet_batch_size (1.0 when the server does not batch)."""
    sums = {"sum": 0.0, "count": 0.0}
    for line in requests.get(url + "/metrics", timeout=10).text.splitlines():
        for kind in sums:
            if line.startswith(f"modelfleet_batch_size_{kind}{{"):
                sums[kind] += float(line.rsplit(" ", 1)[1])
    return sums["sum"] / sums["count"] if sums["count"] else 1.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--channels", type=int, default=32, help="CNN width (bigger: more compute)")
    args = parser.parse_args()
    build = pathlib.Path(os.environ.get("MODELFLEET_BUILD_DIR", ROOT / "build"))
    binary = build / "server" / "main" / "modelfleet-server"
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        subprocess.run([sys.executable, str(ROOT / "examples/models/make_cnn.py"), "--out",
                        str(tmp / "cnn"), "--channels", str(args.channels), "--epochs", "1"],
                       check=True, capture_output=True, timeout=300)
        (tmp / "batching.config").write_text(
            f"max_batch_size {{ value: {args.clients} }}\nbatch_timeout_micros {{ value: 2000 }}\n"
            "num_batch_threads { value: 2 }\nmax_enqueued_batches { value: 1000 }\n"
            + "".join(f"allowed_batch_sizes: {n}\n" for n in allowed_sizes(args.clients)))
        image = load_digits().images[:1].astype(np.float32).reshape(1, 1, 8, 8)
        body_file = tmp / "body.json"
        body_file.write_text(json.dumps({"instances": image.tolist()}))
        common = ["--model_name=cnn", f"--model_base_path={tmp / 'cnn'}"]
        results = {}
        with open(tmp / "server.log", "wb") as log:
            for name, extra in (("unbatched", []),
                                ("batched", ["--enable_batching",
                                             f"--batching_parameters_file={tmp / 'batching.config'}"])):
                proc, url = start(binary, common + extra, log)
                try:
                    drive(url, args.clients, 1, body_file)  # warm up
                    results[name] = drive(url, args.clients, args.seconds, body_file)
                    results[name]["avg_batch"] = average_batch(url)
                finally:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(timeout=30)
    base = results["unbatched"]
    print(f"CNN (channels={args.channels}), {args.clients} concurrent REST clients, "
          f"{args.seconds:.0f} s each, {os.cpu_count()} cores")
    print(f"{'server':<10} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'avg batch':>10} "
          f"{'req/s vs unbatched':>19}")
    for name, r in results.items():
        print(f"{name:<10} {r['rps']:>9.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} {r['errors']:>7} "
              f"{r['avg_batch']:>10.1f} {r['rps'] / base['rps']:>18.2f}x")


if __name__ == "__main__":
    main()
