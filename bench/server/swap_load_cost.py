#!/usr/bin/python3
"""What one version swap costs the server: load + warm-up time (modelfleet_model_load_seconds),
page faults, and resident memory during back-to-back swaps and once they stop, with the weight
memory of earlier loads kept for the next one (--retain_load_memory_seconds, the default) and
given back at once (=0), in the same run.

    /usr/bin/python3 bench/server/swap_load_cost.py [--swaps 8] [--channels 512] [--rounds 2]
        [--baseline OTHER_BINARY]   # also an older build (run with its defaults) in the same run

Model B is the CNN of load_interference.py / swap_memory.py (make_cnn.py, untrained); each swap
publishes the next version (a complete directory renamed into place), waits until it alone is
AVAILABLE and retires the old one. Faults are the server process's minor faults (/proc/PID/stat)
per swap. Needs a built modelfleet-server (MODELFLEET_BUILD_DIR or build/) and torch.
"""
import argparse
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "server"))
from bench_common import free_port, install, make_cnn_versions, server_binary, stop, wait_for  # noqa: E402
from load_interference import only_version, publish, retire  # noqa: E402


def minor_faults(pid: int) -> int:
    return int(pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def rss_mib(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise KeyError("VmRSS")


def load_seconds(url: str) -> tuple:
    text = requests.get(url + "/metrics", timeout=5).text
    total = float(re.search(r"^modelfleet_model_load_seconds_sum\{[^}]*\} (\S+)", text, re.M).group(1))
    count = float(re.search(r"^modelfleet_model_load_seconds_count\{[^}]*\} (\S+)", text, re.M).group(1))
    return total, count


def measure(binary, sources, tmp: pathlib.Path, swaps: int, flags: list, linger: float) -> dict:
    """`flags`: extra server flags (none for a baseline build, which may not know ours); `linger`:
    how long kept load memory outlives the last swap (--retain_load_memory_seconds)."""
    base = pathlib.Path(tempfile.mkdtemp(dir=tmp)) / "cnn"  # publish/retire use its parent
    install(sources[0], base, 1)
    port = free_port()
    log = open(tmp / "server.log", "ab")
    server = subprocess.Popen(
        [str(binary), "--model_name=cnn", f"--model_base_path={base}", f"--rest_api_port={port}",
         f"--port={free_port()}", "--rest_api_address=127.0.0.1", "--grpc_address=127.0.0.1",
         "--file_system_poll_wait_seconds=0.2", "--log_level=warning"]
        + flags,
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: only_version(url, "cnn", 1), "version 1")
        time.sleep(linger + 1)
        start_rss = rss_mib(server.pid)
        sum0, count0 = load_seconds(url)
        faults, rss = [], []
        version = 1
        for _ in range(swaps):
            before = minor_faults(server.pid)
            publish(sources[(version + 1) % len(sources)], base, version + 1)
            wait_for(lambda: only_version(url, "cnn", version + 1), f"version {version + 1}")
            retire(base, version)
            version += 1
            faults.append(minor_faults(server.pid) - before)
            rss.append(rss_mib(server.pid))
        sum1, count1 = load_seconds(url)
        time.sleep(linger + 1)
        return {"load_ms": (sum1 - sum0) / (count1 - count0) * 1e3, "faults": statistics.median(faults),
                "start": start_rss, "during": statistics.median(rss), "after": rss_mib(server.pid)}
    finally:
        stop(server)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swaps", type=int, default=8)
    parser.add_argument("--channels", type=int, default=512, help="make_cnn.py --channels")
    parser.add_argument("--rounds", type=int, default=2, help="each setting this many times, in turn")
    parser.add_argument("--baseline", type=pathlib.Path, help="another modelfleet-server build, measured with its defaults")
    args = parser.parse_args()
    if min(args.swaps, args.channels, args.rounds) < 1:
        parser.error("every argument must be >= 1")
    binary = server_binary()
    with tempfile.TemporaryDirectory(prefix="mf_swap_load_cost_") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        sources = make_cnn_versions(tmp / "src", args.channels)
        print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; model {sources[0].stat().st_size / 2**20:.1f} MiB; "
              f"{args.swaps} swaps per row", flush=True)
        print("| server | load + warm-up ms (mean) | minor faults per swap (median) "
              "| RSS MiB: start / during swaps (median) / 1 s after they stop |")
        print("|---:|---:|---:|---|")
        for _ in range(args.rounds):
            runs = [(binary, ["--retain_load_memory_seconds=0"], 0.0),
                    (binary, ["--retain_load_memory_seconds=2"], 2.0)]
            if args.baseline:
                runs.insert(0, (args.baseline, [], 2.0))
            for server, flags, linger in runs:
                label = " ".join(flags) if flags else f"baseline {server}"
                r = measure(server, sources, tmp, args.swaps, flags, linger)
                print(f"| {label} | {r['load_ms']:.0f} | {r['faults']:.0f} | {r['start']:.0f} / {r['during']:.0f} / "
                      f"{r['after']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
