"""modelfleet-router's gRPC port end to end: grpcio clients through the router to grpcio
backends (generic handlers answering with their own name), static mode. Weighted split, a
metadata route, sticky keys, x-modelfleet-version in the initial metadata, server streaming,
a retry after a dead endpoint, deadlines, and UNAVAILABLE with a clear message."""
import collections
import json
import threading
import time
from concurrent import futures

import grpc
import pytest

from conftest import free_port
from server_fixtures import metric_value
from test_router import start_router, write_config  # noqa: F401  (fixture)

PREDICT = "/tensorflow.serving.PredictionService/Predict"
STREAM = "/test.Streaming/Count"


class GrpcBackend:
    def __init__(self, name):
        self.name = name
        self.calls = []
        self.delay = 0.0
        backend = self

        def predict(request, context):
            backend.calls.append((dict(context.invocation_metadata()), request))
            if backend.delay:
                time.sleep(backend.delay)
            if request == b"fail":
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad input for " + backend.name)
            return json.dumps({"backend": backend.name, "echo": request.decode()}).encode()

        def count(request, context):
            for i in range(int(request.decode())):
                yield f"{backend.name}:{i}".encode()

        handler = grpc.method_handlers_generic_handler("tensorflow.serving.PredictionService", {
            "Predict": grpc.unary_unary_rpc_method_handler(predict)})
        streaming = grpc.method_handlers_generic_handler("test.Streaming", {
            "Count": grpc.unary_stream_rpc_method_handler(count)})
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.server.add_generic_rpc_handlers((handler, streaming))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.address = f"127.0.0.1:{self.port}"
        self.server.start()

    def stop(self):
        self.server.stop(grace=None)


@pytest.fixture
def grpc_backends():
    started = []

    def make(name):
        started.append(GrpcBackend(name))
        return started[-1]

    yield make
    for backend in started:
        backend.stop()


def grpc_router(start_router, *flags):
    grpc_port = free_port()
    router = start_router(f"--grpc-port={grpc_port}", *flags)
    router.grpc_target = f"127.0.0.1:{grpc_port}"
    return router


def call(channel, body=b"x", metadata=(), timeout=10):
    fn = channel.unary_unary(PREDICT)
    response, c = fn.with_call(body, metadata=metadata, timeout=timeout)
    initial = dict(c.initial_metadata())
    return json.loads(response), initial


def test_grpc_weighted_split_route_sticky_and_version_metadata(tmp_path, grpc_backends, start_router):
    v1, v2 = grpc_backends("v1"), grpc_backends("v2")
    write_config(tmp_path / "router.yaml", [
        {"name": "v1", "service": "s1", "weight": 70, "grpcEndpoints": [v1.address]},
        {"name": "v2", "service": "s2", "weight": 30, "grpcEndpoints": [v2.address]},
    ], routes=[{"header": "x-experiment", "value": "b", "version": "v2"}], sticky={"header": "x-user-id"})
    router = grpc_router(start_router)
    with grpc.insecure_channel(router.grpc_target) as channel:
        counts = collections.Counter()
        for i in range(1000):
            answer, initial = call(channel, f"req{i}".encode())
            assert initial["x-modelfleet-version"] == answer["backend"]
            assert answer["echo"] == f"req{i}"
            counts[answer["backend"]] += 1
        assert abs(counts["v1"] / 1000 - 0.7) <= 0.05, counts
        for _ in range(20):
            assert call(channel, metadata=(("x-experiment", "b"),))[0]["backend"] == "v2"
        for user in range(20):
            seen = {call(channel, metadata=(("x-user-id", f"u{user}"),))[0]["backend"] for _ in range(5)}
            assert len(seen) == 1
        # Metadata reaches the backend; a backend's error status comes back unchanged.
        call(channel, metadata=(("x-trace", "abc"),))
        assert any(md.get("x-trace") == "abc" for md, _ in v1.calls + v2.calls)
        with pytest.raises(grpc.RpcError) as error:
            call(channel, b"fail")
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert error.value.details().startswith("bad input for v")
        # Server streaming is relayed message by message.
        stream = channel.unary_stream(STREAM)(b"5", timeout=10)
        messages = [m.decode() for m in stream]
        assert len(messages) == 5 and messages[0].endswith(":0")
    metrics = router.metrics()
    assert metric_value(metrics, "modelfleet_router_requests_total", version="v1", protocol="grpc", code="OK") >= 600
    assert metric_value(metrics, "modelfleet_router_requests_total", protocol="grpc", code="INVALID_ARGUMENT") == 1


def test_grpc_concurrent_calls_multiplex(tmp_path, grpc_backends, start_router):
    v1 = grpc_backends("v1")
    v1.delay = 0.2
    write_config(tmp_path / "router.yaml", [{"name": "v1", "service": "s1", "weight": 100,
                                             "grpcEndpoints": [v1.address]}])
    router = grpc_router(start_router)
    with grpc.insecure_channel(router.grpc_target) as channel:
        fn = channel.unary_unary(PREDICT)
        started = time.monotonic()
        pending = [fn.future(f"{i}".encode(), timeout=10) for i in range(8)]
        answers = [json.loads(p.result()) for p in pending]
        assert sorted(int(a["echo"]) for a in answers) == list(range(8))
        assert time.monotonic() - started < 1.0  # in parallel, not one after another


def test_grpc_retry_deadline_and_unavailable(tmp_path, grpc_backends, start_router):
    live = grpc_backends("v1")
    dead = f"127.0.0.1:{free_port()}"
    write_config(tmp_path / "router.yaml", [{"name": "v1", "service": "s1", "weight": 100,
                                             "grpcEndpoints": [live.address, dead]}])
    router = grpc_router(start_router, "--eject-after-failures=0")
    with grpc.insecure_channel(router.grpc_target) as channel:
        for _ in range(20):
            assert call(channel)[0]["backend"] == "v1"
        assert metric_value(router.metrics(), "modelfleet_router_retries_total", version="v1") >= 3
        live.delay = 1.0
        with pytest.raises(grpc.RpcError) as error:
            call(channel, timeout=0.3)
        assert error.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        live.delay = 0

    write_config(tmp_path / "router.yaml", [{"name": "v1", "service": "s1", "weight": 100, "grpcEndpoints": []}])
    time.sleep(1.5)
    with grpc.insecure_channel(router.grpc_target) as channel:
        with pytest.raises(grpc.RpcError) as error:
            call(channel)
        assert error.value.code() == grpc.StatusCode.UNAVAILABLE
        assert error.value.details() == "no ready endpoint for model my_mnist_model (versions: v1 0/0 ready)"
