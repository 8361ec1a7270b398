#!/usr/bin/python3
"""modelfleet-server's resident memory as one CNN version serves requests of many batch sizes
(what dynamic batching with allowed_batch_sizes 1..32 produces), for our server and, with
--baseline, another build of it, in the same run.

    /usr/bin/python3 bench/server/batch_shapes_memory.py [--channels 512] [--baseline OLD_BINARY]

Per server: start on a directory holding one version of the example CNN (make_cnn.py, untrained),
RSS once loaded (after its warm-up run), then one REST predict per batch size 1, 2, 4, 8, 16,
32 (batch 1 twice), RSS after each, and the server's modelfleet_model_memory_bytes. A CPU
convolution runs on weights reordered into oneDNN's layout; the table shows whether every batch
size gets a copy of its own and whether the plain copy stays next to the packed one.
Needs a built modelfleet-server (MODELFLEET_BUILD_DIR or build/) and torch for make_cnn.py.
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile
import time

import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "server"))
from bench_common import free_port, make_cnn_versions, server_binary, stop, wait_for  # noqa: E402

MIB = 1024 * 1024
BATCHES = (1, 2, 4, 8, 16, 32)


def rss_bytes(pid: int) -> int:
    time.sleep(0.5)  # let freed pages and late allocations settle
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise KeyError("VmRSS")


def memory_metric(url: str) -> float:
    return sum(float(line.rpartition(" ")[2]) for line in requests.get(url + "/metrics", timeout=5).text.splitlines()
               if line.startswith("modelfleet_model_memory_bytes{"))


def measure(binary: pathlib.Path, base: pathlib.Path) -> dict:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([str(binary), "--model_name=cnn", f"--model_base_path={base}", "--port=0",
                             f"--rest_api_port={port}", "--rest_api_address=127.0.0.1", "--log_level=warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def ready():
            try:
                return requests.get(url + "/v2/health/ready", timeout=2).status_code == 200
            except requests.RequestException:
                return False
        wait_for(ready, "the server to load the CNN")
        row = {"loaded": rss_bytes(proc.pid)}
        for batch in (1,) + BATCHES:
            body = {"instances": [[[[float((i + j) % 17) for j in range(8)] for i in range(8)]]] * batch}
            r = requests.post(url + "/v1/models/cnn:predict", json=body, timeout=60)
            r.raise_for_status()
            assert len(r.json()["predictions"]) == batch
            row[batch] = rss_bytes(proc.pid)
        row["metric"] = memory_metric(url)
        return row
    finally:
        stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--channels", type=int, default=512, help="make_cnn.py --channels (512: 18.6 MiB of weights)")
    parser.add_argument("--baseline", type=pathlib.Path, help="another modelfleet-server binary to compare with")
    args = parser.parse_args()
    servers = [("ours", server_binary())] + ([("baseline", args.baseline)] if args.baseline else [])
    with tempfile.TemporaryDirectory() as tmp:
        print(f"== making the example CNN (--channels {args.channels})", flush=True)
        (model,) = make_cnn_versions(pathlib.Path(tmp) / "made", args.channels, seeds=(1,))
        base = pathlib.Path(tmp) / "cnn"
        (base / "1").mkdir(parents=True)
        (base / "1" / "model.onnx").write_bytes(model.read_bytes())
        weights = model.stat().st_size
        rows = []
        for name, binary in servers:
            print(f"== {name}: {binary}", flush=True)
            rows.append((name, measure(binary, base)))
    print(f"\nmodel.onnx {weights / MIB:.1f} MiB; RSS in MiB after loading, then after a request of each batch size\n")
    print("| server | loaded | " + " | ".join(f"batch {b}" for b in BATCHES) + " | growth over batches | memory metric |")
    print("|---|---:|" + "---:|" * len(BATCHES) + "---:|---:|")
    for name, row in rows:
        cells = " | ".join(f"{row[b] / MIB:.1f}" for b in BATCHES)
        print(f"| {name} | {row['loaded'] / MIB:.1f} | {cells} | {(row[32] - row['loaded']) / MIB:+.1f} | "
              f"{row['metric'] / MIB:.1f} |")


if __name__ == "__main__":
    main()
