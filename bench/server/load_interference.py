#!/usr/bin/python3
"""How much loading one model raises another model's tail latency: model A (the digits MLP) is
loaded by wrk over REST while model B (a CNN, ~19 MB) is swapped to a new version back to back,
against the same wrk load with B left alone, in the same run and on the same server.

    /usr/bin/python3 bench/server/load_interference.py [--seconds 4] [--rounds 7]
        [--clients 2] [--channels 512] [--client wrk|exact] [--client-fifo] [--client-cpu N]
        [--rate R]   # with --client exact: open loop, R requests/s due over --clients connections
        [--server-arg=--load_thread_nice=0 ...]

Phases alternate quiet / loading for --rounds rounds so that drift in the machine's background
load hits both alike. In a loading phase a thread installs B's next version the moment the
previous swap finished (new version AVAILABLE, old one END), so B is loading or unloading for
the whole phase. wrk is closed loop with --clients connections (few: the aim is the latency
each request sees, not a saturated queue). Target: p99 while loading <= 1.10x p99 when quiet,
compared as medians over the rounds.
Needs a built modelfleet-server (MODELFLEET_BUILD_DIR or build/) and torch for make_cnn.py.
"""
import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "server"))
from bench_common import free_port, install, make_cnn_versions, server_binary, stop, wait_for  # noqa: E402
ROW = [float((3 * i) % 17) for i in range(64)]
PREDICT_PATH = "/v1/models/digits:predict"




def states(url: str, model: str) -> dict:
    try:
        r = requests.get(f"{url}/v1/models/{model}", timeout=5)
    except requests.RequestException:
        return {}
    if r.status_code != 200:
        return {}
    return {int(v["version"]): v["state"] for v in r.json().get("model_version_status", [])}


def only_version(url: str, model: str, version: int) -> bool:
    s = states(url, model)
    return s.get(version) == "AVAILABLE" and all(v == "END" for k, v in s.items() if k != version)



def publish(src: pathlib.Path, base: pathlib.Path, version: int) -> None:
    """Publishes a version the way a deployment tool should: a complete directory renamed into
    place. The file is hard-linked, not copied, so the tool's own disk work (copying 19 MB,
    writeback) stays out of the measurement; the server still reads, parses and warms up the
    whole model."""
    staging = base.parent / "staging" / str(version)
    staging.mkdir(parents=True)
    os.link(src, staging / "model.onnx")
    os.rename(staging, base / str(version))


def retire(base: pathlib.Path, version: int) -> None:
    """Moves a version out of the base path (deleted with the temporary directory at the end)."""
    trash = base.parent / "retired"
    trash.mkdir(exist_ok=True)
    os.rename(base / str(version), trash / str(version))


class Swapper(threading.Thread):
    """Swaps model B to its next version back to back until stopped."""

    def __init__(self, url: str, base: pathlib.Path, sources: list, version: int, cpus=None):
        super().__init__(daemon=True)
        self.url, self.base, self.sources, self.version, self.cpus = url, base, sources, version, cpus
        self.stop_event, self.swaps, self.error = threading.Event(), 0, None

    def run(self):
        # The deployment tool's side of a swap (copying the file, polling the status) runs in a
        # sidecar with its own CPU in production; here it shares the cores with wrk and the
        # server, so it runs at SCHED_IDLE (this thread only) to leave the server's own load
        # work as the only thing measured.
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except (AttributeError, OSError):
            pass
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)  # this thread: off the client's CPU
        try:
            while not self.stop_event.is_set():
                new = self.version + 1
                publish(self.sources[new % len(self.sources)], self.base, new)
                wait_for(lambda: only_version(self.url, "cnn", new), f"cnn version {new}")
                retire(self.base, self.version)
                self.version, self.swaps = new, self.swaps + 1
        except Exception as e:  # reported by the main thread
            self.error = e


def wrk(url: str, clients: int, seconds: int, script: pathlib.Path, prefix: list) -> dict:
    out = subprocess.run(prefix + ["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", "--latency", "-s", str(script), url],
                         capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    if re.search(r"Non-2xx or 3xx responses: (\d+)", out) or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failed requests:\n{out}")

    def ms(label):
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
            "p50": ms("50"), "p99": ms("99")}


def exact(binary: pathlib.Path, port: int, clients: int, seconds: int, body: pathlib.Path, prefix: list,
          rate: float = 0) -> dict:
    """bench/server/rest_predict_load: the same closed loop as wrk, every request timed; with a
    rate, open loop (requests due at a fixed rate, latency from when each was due)."""
    out = subprocess.run(prefix + [str(binary), str(port), str(clients), str(seconds), PREDICT_PATH, str(body)]
                         + ([f"{rate:g}"] if rate else []),
                         capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    fields = dict(item.split("=") for item in out.split())
    if int(fields["errors"]):
        raise RuntimeError(f"rest_predict_load saw failed requests: {out}")
    return {"rps": float(fields["rps"]), "p50": float(fields["p50_ms"]), "p99": float(fields["p99_ms"]),
            "p999": float(fields["p999_ms"]), "max": float(fields["max_ms"]), "wrk_p99": float(fields["wrk_p99_ms"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=4, help="seconds per phase")
    parser.add_argument("--rounds", type=int, default=7, help="quiet + loading pairs")
    parser.add_argument("--clients", type=int, default=2, help="wrk connections to model A")
    parser.add_argument("--channels", type=int, default=512, help="make_cnn.py --channels for model B")
    parser.add_argument("--rate", type=float, default=0,
                        help="with --client exact: open loop at this many requests/s over --clients connections "
                             "(as real traffic arrives), instead of a closed loop")
    parser.add_argument("--client", choices=["wrk", "exact"], default="wrk",
                        help="load generator for model A: wrk, or bench/server/rest_predict_load (same closed "
                             "loop, every request timed)")
    parser.add_argument("--client-fifo", action="store_true",
                        help="run the client under chrt -f 1 (SCHED_FIFO, needs root): separates delays the "
                             "client itself suffers on the shared cores from the server's")
    parser.add_argument("--client-cpu", type=int, default=None,
                        help="run the client on this CPU alone and the server (and the swapper) on the others, "
                             "as if the client had its own machine")
    parser.add_argument("--server-arg", action="append", default=[],
                        help="extra modelfleet-server flag (repeatable), e.g. --server-arg=--load_thread_nice=0")
    args = parser.parse_args()
    if min(args.seconds, args.rounds, args.clients, args.channels) < 1:
        parser.error("every argument must be >= 1")
    binary = server_binary()
    probe = binary.parents[2] / "bench" / "server" / "rest_predict_load"
    if args.client == "exact" and not probe.exists():
        sys.exit(f"{probe} is not built (build_tree rest_predict_load)")

    with tempfile.TemporaryDirectory(prefix="mf_load_interference_") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        sources = make_cnn_versions(tmp / "src", args.channels)
        cnn_base = tmp / "cnn"
        install(sources[1], cnn_base, 1)
        config = tmp / "models.config"
        config.write_text(
            'model_config_list {\n'
            f'  config {{ name: "digits" base_path: "{ROOT / "examples" / "models" / "digits"}" }}\n'
            f'  config {{ name: "cnn" base_path: "{cnn_base}" }}\n'
            '}\n')
        body = tmp / "body.json"
        body.write_text(json.dumps({"instances": [ROW]}))
        script = tmp / "post.lua"
        script.write_text('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                          f"wrk.body = {json.dumps(json.dumps({'instances': [ROW]}))}\n")
        rest_port = free_port()
        log = open(tmp / "server.log", "wb")
        server_prefix, server_cpus = [], None
        if args.client_cpu is not None:
            server_cpus = sorted(os.sched_getaffinity(0) - {args.client_cpu})
            if args.client_cpu not in os.sched_getaffinity(0) or not server_cpus:
                parser.error(f"--client-cpu {args.client_cpu}: needs that CPU and at least one other")
            server_prefix = ["taskset", "-c", ",".join(map(str, server_cpus))]
        server = subprocess.Popen(
            server_prefix + [str(binary), f"--model_config_file={config}", f"--rest_api_port={rest_port}",
             f"--port={free_port()}", "--rest_api_address=127.0.0.1", "--grpc_address=127.0.0.1",
             "--file_system_poll_wait_seconds=0.2", "--log_level=warning"] + args.server_arg,
            stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{rest_port}"

        prefix = ["chrt", "-f", "1"] if args.client_fifo else []
        if args.client_cpu is not None:
            prefix = ["taskset", "-c", str(args.client_cpu)] + prefix

        def load() -> dict:
            if args.client == "exact":
                return exact(probe, rest_port, args.clients, args.seconds, body, prefix, args.rate)
            return wrk(url + PREDICT_PATH, args.clients, args.seconds, script, prefix)
        rows = []
        try:
            wait_for(lambda: only_version(url, "cnn", 1) and states(url, "digits"), "both models")
            print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {os.cpu_count()} cores, "
                  f"load average {os.getloadavg()[0]:.2f}; model B {sources[0].stat().st_size / 2**20:.1f} MiB; "
                  f"client {args.client}{' (SCHED_FIFO)' if args.client_fifo else ''}"
                  f"{f', open loop at {args.rate:g} req/s' if args.rate else ''}"
                  f"{f' on CPU {args.client_cpu}, server on {server_cpus}' if server_cpus else ''}; server flags {' '.join(args.server_arg) or '(defaults)'}",
                  flush=True)
            version = 1
            for round_ in range(1, args.rounds + 1):
                quiet = load()
                rows.append((round_, "quiet", quiet, 0))
                swapper = Swapper(url, cnn_base, sources, version, server_cpus)
                swapper.start()
                loading = load()
                swapper.stop_event.set()
                swapper.join(timeout=180)
                if swapper.error:
                    raise RuntimeError(f"swapping model B failed: {swapper.error}")
                version = swapper.version
                rows.append((round_, "B loading", loading, swapper.swaps))
                print(f"# round {round_} done, load average {os.getloadavg()[0]:.2f}", flush=True)
            if server.poll() is not None:
                raise RuntimeError("modelfleet-server died during the run")
        finally:
            stop(server)
            log.close()

    # The exact client also gives the tail beyond p99, and the p99 wrk would report for the same
    # latencies (wrk corrects for coordinated omission; see rest_predict_load.cc).
    tail = args.client == "exact"
    print("| round | model B | A requests/s | A p50 ms | A p99 ms |"
          + (" A p99.9 ms | A max ms | A p99 as wrk reports it, ms |" if tail else "") + " B swaps in phase |")
    print("|---:|---|---:|---:|---:|" + ("---:|---:|---:|" if tail else "") + "---:|")
    for round_, phase, m, swaps in rows:
        extra = f" {m['p999']:.3f} | {m['max']:.3f} | {m['wrk_p99']:.3f} |" if tail else ""
        print(f"| {round_} | {phase} | {m['rps']:.0f} | {m['p50']:.3f} | {m['p99']:.3f} |{extra} {swaps} |")
    quiet_p99 = [m["p99"] for _, phase, m, _ in rows if phase == "quiet"]
    loading_p99 = [m["p99"] for _, phase, m, _ in rows if phase != "quiet"]
    # Medians over rounds: on a shared 2-core VM one noisy phase (another process, the host)
    # moves a phase's p99 several-fold, and a mean would carry that into the ratio.
    ratio = statistics.median(loading_p99) / statistics.median(quiet_p99)
    print(f"\nmodel A p99, median over rounds: {statistics.median(quiet_p99):.3f} ms quiet, "
          f"{statistics.median(loading_p99):.3f} ms while B loads: {ratio:.2f}x (target <= 1.10x)")
    if tail:
        for key, label in (("p999", "p99.9"), ("wrk_p99", "p99 as wrk reports it")):
            quiet = statistics.median(m[key] for _, phase, m, _ in rows if phase == "quiet")
            loading = statistics.median(m[key] for _, phase, m, _ in rows if phase != "quiet")
            print(f"model A {label}, median over rounds: {quiet:.3f} ms quiet, {loading:.3f} ms while B loads: "
                  f"{loading / quiet:.2f}x")


if __name__ == "__main__":
    main()
