#!/usr/bin/python3
"""modelfleet-server's resident memory across 20 version swaps of a CNN, in the default
availability-preserving mode and with --resource_preserving_swap, measured in the same run.

    /usr/bin/python3 bench/server/swap_memory.py [--swaps 20] [--channels 512]

For each mode: a server starts on an empty model directory (RSS with no model), version 1
arrives (RSS at start), then versions 2..swaps+1 arrive one at a time; each swap is complete when
the new version is AVAILABLE and no other version is loaded. The peak is VmHWM, reset (through
/proc/<pid>/clear_refs) before each swap so it covers the swaps only (the largest of them, and
the median swap's, are reported), cross-checked by a thread sampling VmRSS every 5 ms. The
model's footprint is taken two ways: RSS after loading version 1 minus RSS with no model, and
the server's modelfleet_model_memory_bytes metric. The versions alternate between two
differently seeded exports, so each swap loads new weights.
Needs a built modelfleet-server (MODELFLEET_BUILD_DIR or build/) and torch for make_cnn.py.
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "server"))
from bench_common import free_port, install, make_cnn_versions, server_binary, stop, wait_for  # noqa: E402
MIB = 1024 * 1024
# The server keeps freed weight memory for the next load until loads go quiet for this long
# (--retain_load_memory_seconds, passed explicitly): "final" is read once that has passed.
RETAIN_SECONDS = 2.0



def proc_kib(pid: int, field: str) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)



def settle_rss(pid: int, seconds: float = 1.0) -> int:
    """VmRSS (bytes) once it stopped moving: freed pages and late allocations settle first."""
    time.sleep(seconds)
    return proc_kib(pid, "VmRSS") * 1024


def memory_metric(url: str) -> float:
    total = 0.0
    for line in requests.get(url + "/metrics", timeout=5).text.splitlines():
        if line.startswith("modelfleet_model_memory_bytes{"):
            total += float(line.rpartition(" ")[2])
    return total


class Sampler(threading.Thread):
    """Largest VmRSS seen while running (bytes), sampled every 5 ms."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                self.peak = max(self.peak, proc_kib(self.pid, "VmRSS") * 1024)
            except (OSError, KeyError):
                return
            time.sleep(0.005)



def loaded_versions(url: str) -> dict:
    r = requests.get(url + "/v1/models/cnn", timeout=5)
    if r.status_code != 200:
        return {}
    return {int(v["version"]): v["state"] for v in r.json().get("model_version_status", [])}


def only_version(url: str, version: int) -> bool:
    states = loaded_versions(url)
    return states.get(version) == "AVAILABLE" and all(
        s == "END" for v, s in states.items() if v != version)


def measure(binary: pathlib.Path, models: list, swaps: int, extra: list, tmp: pathlib.Path):
    base = tmp / "cnn"
    base.mkdir()
    rest_port = free_port()
    log = open(tmp / "server.log", "wb")
    server = subprocess.Popen(
        [str(binary), "--model_name=cnn", f"--model_base_path={base}",
         f"--rest_api_port={rest_port}", f"--port={free_port()}", "--rest_api_address=127.0.0.1",
         "--grpc_address=127.0.0.1", "--file_system_poll_wait_seconds=0.2",
         f"--retain_load_memory_seconds={RETAIN_SECONDS}"] + extra,
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{rest_port}"
    try:
        def answering():
            if server.poll() is not None:
                raise RuntimeError(f"server exited: {(tmp / 'server.log').read_text()[-2000:]}")
            try:
                return requests.get(url + "/v1/models/cnn", timeout=1) is not None
            except requests.RequestException:
                return False
        wait_for(answering, "the REST port")
        empty = settle_rss(server.pid)

        install(models[0], base, 1)
        wait_for(lambda: only_version(url, 1), "version 1")
        start = settle_rss(server.pid)
        metric = memory_metric(url)

        sampler = Sampler(server.pid)
        sampler.start()
        began = time.monotonic()
        swap_peaks = []  # VmHWM of each swap (reset before it): shows whether one swap stands out
        for version in range(2, swaps + 2):
            pathlib.Path(f"/proc/{server.pid}/clear_refs").write_text("5")  # resets VmHWM
            install(models[(version - 1) % len(models)], base, version)
            wait_for(lambda: only_version(url, version), f"version {version} alone")
            swap_peaks.append(proc_kib(server.pid, "VmHWM") * 1024)
            shutil.rmtree(base / str(version - 1))  # the sidecar cleans up; the policy keeps 1
        elapsed = time.monotonic() - began
        sampler.done.set()
        sampler.join(timeout=5)
        peak = max(max(swap_peaks), sampler.peak)
        swap_peaks.sort()
        final = settle_rss(server.pid, RETAIN_SECONDS + 1.0)
        return {"empty": empty, "start": start, "metric": metric, "peak": peak,
                "median_swap_peak": swap_peaks[len(swap_peaks) // 2],
                "sampled_peak": sampler.peak, "final": final, "seconds": elapsed}
    finally:
        stop(server)
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--swaps", type=int, default=20, help="version swaps per mode")
    parser.add_argument("--channels", type=int, default=512,
                        help="make_cnn.py --channels (512: a ~19 MB model)")
    args = parser.parse_args()
    if args.swaps < 1 or args.channels < 1:
        parser.error("--swaps and --channels must be >= 1")
    binary = server_binary()

    with tempfile.TemporaryDirectory(prefix="mf_swap_memory_") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        models = make_cnn_versions(tmp / "src", args.channels)
        size = models[0].stat().st_size
        print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} "
              f"cores, load average {os.getloadavg()[0]:.2f}; model.onnx {size / MIB:.1f} MiB, "
              f"{args.swaps} swaps per mode", flush=True)
        results = {}
        for name, extra in (("availability-preserving", []),
                            ("resource-preserving", ["--resource_preserving_swap"])):
            run_dir = tmp / name
            run_dir.mkdir()
            results[name] = measure(binary, models, args.swaps, extra, run_dir)
            print(f"# {name} done, load average {os.getloadavg()[0]:.2f}", flush=True)

    print("| mode | RSS no model | RSS start | footprint (RSS) | footprint (metric) | peak in swaps "
          "| final | peak/footprint (RSS) | median swap's peak/footprint | peak/footprint (metric) "
          "| final/start | s/swap |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        footprint = r["start"] - r["empty"]
        # Peak relative to the no-model baseline: how many models' worth of memory were resident.
        peak_models = (r["peak"] - r["empty"]) / footprint
        median_models = (r["median_swap_peak"] - r["empty"]) / footprint
        peak_metric = (r["peak"] - r["empty"]) / r["metric"] if r["metric"] else float("nan")
        print(f"| {name} | {r['empty'] / MIB:.1f} MiB | {r['start'] / MIB:.1f} MiB "
              f"| {footprint / MIB:.1f} MiB | {r['metric'] / MIB:.1f} MiB "
              f"| {r['peak'] / MIB:.1f} MiB | {r['final'] / MIB:.1f} MiB | {peak_models:.2f}x "
              f"| {median_models:.2f}x | {peak_metric:.2f}x | {r['final'] / r['start']:.3f}x "
              f"| {r['seconds'] / args.swaps:.2f} |")
    print("\npeak/footprint = (peak RSS - RSS with no model) / one model's footprint; targets: "
          "availability-preserving <= ~2.1x, resource-preserving <= ~1.2x, final/start <= 1.05x")


if __name__ == "__main__":
    main()
