#!/usr/bin/python3
"""Requests/s and p50/p99 latency of one-row predict requests on the digits model, over REST and
gRPC, against nginx (1 worker) answering the same POST with the same canned JSON body: the
transport ceiling. One run, one table, ratios against nginx measured in the same run.

    /usr/bin/python3 bench/server/server_vs_nginx.py [--seconds 5] [--clients 1,16,64]
        [--rounds 1] [--server PATH] [--baseline PATH] [--python-client]

REST and nginx are loaded by `wrk` (one thread, a Lua script posting the body). gRPC is loaded
by bench/server/grpc_predict_load (C++, one event-loop thread keeping N calls in flight on N
connections, as wrk does) with its lean client (HTTP/2 on src/http2's frames and HPACK and one
poll() loop, as cheap per call as wrk; it checks HTTP 200, grpc-status 0 and the parsed answer
of every call),
and with h2load (nghttp2's C load generator, the gRPC counterpart of wrk; every call is checked
through the server's own OK/failure counters), the peers REST is compared with, and with
grpc++'s generated stub (a real gRPC client, whose own per-call cost is more than the server's
on 2 cores); plus the health Check, the transport's own ceiling. The "one channel" rows send the
same N calls multiplexed on one HTTP/2 connection, as N threads sharing one gRPC channel do (and
as ghz does by default): gRPC's own way to carry concurrent calls, which REST/1.1 has no
counterpart of. --python-client adds a Python grpc.aio client and its health-Check ceiling.
--rounds R measures every peer R times in turn and reports medians, so a busy moment on the
shared cores moves one round, not the table. Every server row also shows the server's own CPU
time per request (utime + stime from /proc),
which the shared cores do not blur as much as requests/s. --server runs another
modelfleet-server binary; --baseline measures a second binary (e.g. an older build) in the same
run, after the first, and prints both tables and the before/after ratios. Needs a built
modelfleet-server and grpc_predict_load (MODELFLEET_BUILD_DIR or build/).
"""
import argparse
import asyncio
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np
import requests

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "server"))
from bench_common import cpu_seconds, free_port, stop  # noqa: E402
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import proto_stubs  # noqa: E402  (the stubs generated from our .proto files)

ROW = [float((3 * i) % 17) for i in range(64)]
BODY = json.dumps({"instances": [ROW]})
PREDICT_PATH = "/v1/models/digits:predict"



def wait_http(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[0]} exited with {proc.returncode}")
        try:
            requests.get(url, timeout=1)
            return
        except requests.RequestException:
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout}s")


def with_server_cpu(pid: int, seconds: int, measure) -> dict:
    """Runs `measure()` and adds the server's CPU microseconds per answered request."""
    before = cpu_seconds(pid)
    result = measure()
    result["cpu_us"] = (cpu_seconds(pid) - before) * 1e6 / max(1.0, result["rps"] * seconds)
    return result


def wrk_url(url: str, clients: int, seconds: int, script: pathlib.Path) -> dict:
    """Closed loop: `clients` connections, each sends the next request when the last answered."""
    out = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", "--latency",
                          "-s", str(script), url],
                         capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors or "Socket errors" in out:
        raise RuntimeError(f"wrk saw failed requests:\n{out}")

    def ms(label):
        m = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}[m.group(2)]
        return float(m.group(1)) * scale
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return {"rps": rps, "p50": ms("50"), "p99": ms("99")}


async def grpc_load(target: str, clients: int, seconds: float, make_call) -> dict:
    """`clients` concurrent closed-loop callers on one channel for `seconds`."""
    latencies = []
    async with grpc.aio.insecure_channel(target) as channel:
        call = make_call(channel)
        await call()  # connect and warm before the clock starts
        deadline = time.perf_counter() + seconds

        async def caller():
            while True:
                start = time.perf_counter()
                if start >= deadline:
                    return
                await call()
                latencies.append(time.perf_counter() - start)
        began = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(clients)))
        elapsed = time.perf_counter() - began
    lat = np.array(latencies) * 1e3
    return {"rps": len(latencies) / elapsed, "p50": float(np.percentile(lat, 50)),
            "p99": float(np.percentile(lat, 99))}


def grpc_native(binary: pathlib.Path, target: str, clients: int, seconds: int,
                model: str = "digits", client: str = "lean", connections: int = 0) -> dict:
    """bench/server/grpc_predict_load: `clients` calls in flight, closed loop, on a connection
    each (connections=0) or multiplexed over `connections` (model "@health": grpc.health.v1
    Check, the client's and transport's own ceiling)."""
    flags = [f"--client={client}"] + ([f"--connections={connections}"] if connections else [])
    out = subprocess.run([str(binary), *flags, target, str(clients), str(seconds), model],
                         capture_output=True,
                         text=True, timeout=seconds + 60, check=True).stdout
    fields = dict(item.split("=") for item in out.split())
    return {"rps": float(fields["rps"]), "p50": float(fields["p50_ms"]),
            "p99": float(fields["p99_ms"])}


def predict_request():
    """The one-row digits PredictRequest every gRPC peer sends (tensor_content)."""
    predict_pb2 = proto_stubs.module("tensorflow_serving.apis.predict_pb2")
    tensor_pb2 = proto_stubs.module("tensorflow.core.framework.tensor_pb2")
    types_pb2 = proto_stubs.module("tensorflow.core.framework.types_pb2")
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "digits"
    tensor = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
    tensor.tensor_shape.dim.add(size=1)
    tensor.tensor_shape.dim.add(size=64)
    tensor.tensor_content = np.array([ROW], dtype="<f4").tobytes()
    request.inputs["images"].CopyFrom(tensor)
    return request


def served_counts(rest: str) -> tuple:
    """(requests answered OK, requests failed) for the digits model, from the server's Triton
    counters (nv_inference_request_success / _failure summed over versions)."""
    text = requests.get(rest + "/metrics", timeout=10).text

    def total(name):
        return sum(float(v) for v in re.findall(rf'^{name}{{[^}}]*model="digits"[^}}]*}} ([0-9.e+]+)$', text, re.M))
    return total("nv_inference_request_success"), total("nv_inference_request_failure")


def h2load_grpc(target: str, clients: int, seconds: int, body: pathlib.Path, rest: str,
                one_channel: bool = False) -> dict:
    """h2load (nghttp2's C load generator, as cheap per call as wrk) POSTing the gRPC-framed
    Predict: `clients` connections, one stream in flight on each (or, one_channel, `clients`
    streams in flight on one connection). h2load only sees HTTP statuses,
    so every call is checked through the server's own counters instead: the OK count must grow by
    the calls h2load finished (plus at most those it dropped in flight at the end), and the failure
    count not at all. h2load reports no
    percentiles: p50 is its mean."""
    ok_before, failed_before = served_counts(rest)
    spread = ["-c1", f"-m{clients}"] if one_channel else [f"-c{clients}", "-m1"]
    out = subprocess.run(["h2load", *spread, "-t1", f"-D{seconds}", "-d", str(body),
                          "-H", "content-type: application/grpc", "-H", "te: trailers",
                          f"http://{target}/tensorflow.serving.PredictionService/Predict"],
                         capture_output=True, text=True, timeout=seconds + 60, check=True).stdout
    started, done = map(int, re.search(r"requests: \d+ total, (\d+) started, (\d+) done", out).groups())
    elapsed = float(re.search(r"finished in ([0-9.]+)s", out).group(1))
    mean = re.search(r"time for request:\s+\S+\s+\S+\s+([0-9.]+)(us|ms|s)", out)
    ok_after, failed_after = served_counts(rest)
    # Calls still in flight when the duration ends are dropped by h2load, maybe answered anyway.
    if not done <= ok_after - ok_before <= started or failed_after != failed_before:
        raise RuntimeError(f"h2load finished {done} calls but the server answered {ok_after - ok_before:.0f} OK "
                           f"and {failed_after - failed_before:.0f} failed:\n{out}")
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}[mean.group(2)]
    return {"rps": done / elapsed, "p50": float(mean.group(1)) * scale, "p99": float("nan")}


def predict_call(channel):
    services = proto_stubs.module("tensorflow_serving.apis.prediction_service_pb2_grpc")
    request = predict_request()
    stub = services.PredictionServiceStub(channel)

    async def call():
        response = await stub.Predict(request, timeout=30)
        if "scores" not in response.outputs:
            raise RuntimeError("Predict answered without scores")
    return call


def health_call(channel):
    health = proto_stubs.health_messages()
    check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                request_serializer=health.HealthCheckRequest.SerializeToString,
                                response_deserializer=health.HealthCheckResponse.FromString)
    request = health.HealthCheckRequest(service="")

    async def call():
        await check(request, timeout=30)
    return call


def nginx_conf(tmp: pathlib.Path, port: int, canned: str) -> pathlib.Path:
    if "'" in canned or "\\" in canned:
        raise ValueError("the canned body cannot be quoted for nginx")
    conf = tmp / "nginx.conf"
    (tmp / "logs").mkdir()
    conf.write_text(f"""worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/logs/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path {tmp}/body;
  proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi;
  uwsgi_temp_path {tmp}/uwsgi;
  scgi_temp_path {tmp}/scgi;
  server {{
    listen 127.0.0.1:{port};
    location = {PREDICT_PATH} {{ default_type application/json; return 200 '{canned}'; }}
    location = /ready {{ return 200 'ok'; }}
  }}
}}
""")
    return conf


def median_of_rounds(rounds: list) -> dict:
    """{peer: measurement} per round -> {peer: the median of each figure over the rounds}."""
    return {peer: {key: statistics.median(r[peer][key] for r in rounds) for key in rounds[0][peer]}
            for peer in rounds[0]}


def measure_server(binary: pathlib.Path, native: pathlib.Path, clients: list, seconds: int,
                   python_client: bool, tmp: pathlib.Path, rounds: int = 1) -> list:
    """Starts `binary` and nginx (answering the server's own Predict body), measures every peer
    at every concurrency, all peers in turn `rounds` times (each figure is the median over the
    rounds); returns [(clients, {peer: measurement})]."""
    procs = []
    try:
        rest_port, grpc_port = free_port(), free_port()
        server = subprocess.Popen(
            [str(binary), "--model_name=digits",
             f"--model_base_path={ROOT / 'examples' / 'models' / 'digits'}",
             f"--rest_api_port={rest_port}", f"--port={grpc_port}",
             "--rest_api_address=127.0.0.1", "--grpc_address=127.0.0.1", "--log_level=warning"],
            stdout=open(tmp / "server.log", "wb"), stderr=subprocess.STDOUT)
        procs.append(server)
        rest = f"http://127.0.0.1:{rest_port}"
        wait_http(rest + "/v2/health/ready", server)
        deadline = time.monotonic() + 60
        while requests.get(rest + "/v2/health/ready", timeout=5).status_code != 200:
            if time.monotonic() > deadline:
                raise TimeoutError("model not ready")
            time.sleep(0.1)
        answer = requests.post(rest + PREDICT_PATH, data=BODY, timeout=10)
        answer.raise_for_status()
        canned = answer.text

        nginx_port = free_port()
        nginx_dir = tmp / f"nginx-{nginx_port}"
        nginx_dir.mkdir()
        conf = nginx_conf(nginx_dir, nginx_port, canned)
        nginx = subprocess.Popen(["nginx", "-p", str(nginx_dir), "-c", str(conf),
                                  "-g", "daemon off;"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        procs.append(nginx)
        nginx_url = f"http://127.0.0.1:{nginx_port}"
        wait_http(nginx_url + "/ready", nginx)
        if requests.post(nginx_url + PREDICT_PATH, data=BODY, timeout=5).text != canned:
            raise RuntimeError("nginx does not return the canned body")

        script = tmp / "post.lua"
        script.write_text('wrk.method = "POST"\n'
                          'wrk.headers["Content-Type"] = "application/json"\n'
                          f"wrk.body = {json.dumps(BODY)}\n")
        print(f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {binary}: "
              f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at start; "
              f"response body {len(canned)} bytes", flush=True)
        rows = []
        target = f"127.0.0.1:{grpc_port}"
        framed = predict_request().SerializeToString()
        body = tmp / "predict.grpc"
        body.write_bytes(b"\x00" + len(framed).to_bytes(4, "big") + framed)

        def measure_once(n: int) -> dict:
            cpu = lambda measure: with_server_cpu(server.pid, seconds, measure)  # noqa: E731
            measured = {
                "nginx": wrk_url(nginx_url + PREDICT_PATH, n, seconds, script),
                "REST": cpu(lambda: wrk_url(rest + PREDICT_PATH, n, seconds, script)),
                "gRPC": cpu(lambda: grpc_native(native, target, n, seconds)),
                "gRPC, h2load": cpu(lambda: h2load_grpc(target, n, seconds, body, rest)),
                "gRPC, grpc++ client": cpu(lambda: grpc_native(native, target, n, seconds,
                                                               client="grpcpp")),
                "gRPC health (ceiling)": cpu(lambda: grpc_native(native, target, n, seconds,
                                                                 "@health")),
            }
            if n > 1:  # one call in flight: one channel is the same as a connection per client
                measured["gRPC, one channel"] = cpu(lambda: grpc_native(native, target, n, seconds,
                                                                        connections=1))
                measured["gRPC, one channel, h2load"] = cpu(lambda: h2load_grpc(
                    target, n, seconds, body, rest, one_channel=True))
                measured["gRPC, one channel, grpc++ client"] = cpu(lambda: grpc_native(
                    native, target, n, seconds, client="grpcpp", connections=1))
            if python_client:
                measured["gRPC, Python client"] = cpu(lambda: asyncio.run(grpc_load(
                    target, n, seconds, predict_call)))
                measured["gRPC health, Python client"] = cpu(lambda: asyncio.run(grpc_load(
                    target, n, seconds, health_call)))
            return measured

        for n in clients:
            measured = median_of_rounds([measure_once(n) for _ in range(rounds)])
            rows.append((n, measured))
            print(f"# {n} clients done, load average {os.getloadavg()[0]:.2f}", flush=True)
        if server.poll() is not None:
            raise RuntimeError("modelfleet-server died during the run")
        return rows
    finally:
        for proc in reversed(procs):
            stop(proc)


def print_table(binary: pathlib.Path, rows: list) -> None:
    print(f"# server: {binary}")
    print("| clients | peer | requests/s | p50 ms | p99 ms | × nginx req/s | server CPU µs/request |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n, measured in rows:
        base = measured["nginx"]["rps"]
        for name, m in measured.items():
            cpu = f"{m['cpu_us']:.1f}" if "cpu_us" in m else "—"
            p99 = "—" if m["p99"] != m["p99"] else f"{m['p99']:.3f}"  # NaN: not reported
            print(f"| {n} | {name} | {m['rps']:.0f} | {m['p50']:.3f} | {p99} "
                  f"| {m['rps'] / base:.2f}x | {cpu} |")
    print()
    for n, measured in rows:
        r, g, h = measured["REST"], measured["gRPC"], measured["gRPC, h2load"]
        print(f"{n} clients: REST/nginx {r['rps'] / measured['nginx']['rps']:.2f}x (target >= 0.4), "
              f"gRPC/REST requests/s {g['rps'] / r['rps']:.2f}x, with h2load {h['rps'] / r['rps']:.2f}x "
              f"(target >= 1), server CPU per request gRPC/REST {g['cpu_us'] / r['cpu_us']:.2f}x, "
              f"with h2load {h['cpu_us'] / r['cpu_us']:.2f}x")
        if "gRPC, one channel" in measured:
            c, ch = measured["gRPC, one channel"], measured["gRPC, one channel, h2load"]
            print(f"    calls on one channel: gRPC/REST requests/s {c['rps'] / r['rps']:.2f}x, "
                  f"with h2load {ch['rps'] / r['rps']:.2f}x, server CPU per request gRPC/REST "
                  f"{c['cpu_us'] / r['cpu_us']:.2f}x")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=5, help="seconds per measurement")
    parser.add_argument("--clients", default="1,16,64", help="comma-separated concurrencies")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure every peer this many times in turn; figures are medians")
    parser.add_argument("--server", type=pathlib.Path, help="modelfleet-server binary to measure")
    parser.add_argument("--baseline", type=pathlib.Path,
                        help="a second modelfleet-server binary measured in the same run")
    parser.add_argument("--python-client", action="store_true",
                        help="also load gRPC with a Python grpc.aio client")
    args = parser.parse_args()
    clients = [int(c) for c in args.clients.split(",")]
    if args.seconds < 1 or args.rounds < 1 or not clients or min(clients) < 1:
        parser.error("--seconds and --rounds must be >= 1 and every client count >= 1")

    build = pathlib.Path(os.environ.get("MODELFLEET_BUILD_DIR", ROOT / "build"))
    binary = args.server or build / "server" / "main" / "modelfleet-server"
    servers = [binary] + ([args.baseline] if args.baseline else [])
    for path in servers:
        if not path.exists():
            sys.exit(f"{path} is not built (build_tree modelfleet-server)")
    native = build / "bench" / "server" / "grpc_predict_load"
    if not native.exists():
        sys.exit(f"{native} is not built (build_tree grpc_predict_load)")
    proto_stubs.stubs_path()

    results = []
    with tempfile.TemporaryDirectory(prefix="mf_server_bench_") as tmp_name:
        for path in servers:
            results.append((path, measure_server(path, native, clients, args.seconds,
                                                 args.python_client, pathlib.Path(tmp_name),
                                                 args.rounds)))
    for path, rows in results:
        print_table(path, rows)
    if len(results) == 2:
        (_, after), (_, before) = results
        print(f"# {servers[0]} vs baseline {servers[1]}, same clients, same run")
        for (n, a), (_, b) in zip(after, before):
            print(f"{n} clients: gRPC requests/s {a['gRPC']['rps'] / b['gRPC']['rps']:.2f}x, "
                  f"gRPC server CPU per request {a['gRPC']['cpu_us'] / b['gRPC']['cpu_us']:.2f}x, "
                  f"grpc++-client requests/s {a['gRPC, grpc++ client']['rps'] / b['gRPC, grpc++ client']['rps']:.2f}x, "
                  f"health CPU per request {a['gRPC health (ceiling)']['cpu_us'] / b['gRPC health (ceiling)']['cpu_us']:.2f}x; "
                  f"gRPC/REST requests/s {a['gRPC']['rps'] / a['REST']['rps']:.2f}x after, "
                  f"{b['gRPC']['rps'] / b['REST']['rps']:.2f}x before")


if __name__ == "__main__":
    main()
