"""modelfleet-router in cluster mode (--configmap) against the real kube-apiserver of
modelfleet-local: the router.yaml ConfigMap and EndpointSlices labelled
kubernetes.io/service-name, as the operator and the EndpointSlice controller write them, with
real HTTP backends on this host's address. Readiness follows the ConfigMap, only ready endpoints
get traffic, weight edits and endpoint changes apply within seconds without failed requests, a
bad edit keeps the previous snapshot."""
import collections
import json
import socket
import threading
import time

import pytest
import requests

import local_fixtures
from conftest import ROOT, build_dir
from local_fixtures import LocalCluster, wait_until
from server_fixtures import metric_value
from test_router import Backend, Router

pytestmark = pytest.mark.go_components


def host_address():
    """A non-loopback IPv4 address of this host: the API server refuses loopback endpoints."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.254", 9))  # no packet is sent: picks the outgoing interface
            address = s.getsockname()[0]
        except OSError:
            address = ""
    if not address or address.startswith("127."):
        pytest.skip("this host has no non-loopback IPv4 address for EndpointSlices")
    return address


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # The control plane is not a router target: take it from this tree or the default one.
    if not (build_dir() / "tools" / "local" / "modelfleet-local").exists():
        local_fixtures.build_dir = lambda: ROOT / "build"
    c = LocalCluster(tmp_path_factory.mktemp("router-cluster"))
    c.start()
    try:
        yield c
    finally:
        c.stop()


def slice_manifest(name, service, backends, ready=True):
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "default", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": backends[0].port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [b.address.split(":")[0]], "conditions": {"ready": ready}} for b in backends],
    }


def configmap_manifest(weights, extra=""):
    versions = "\n".join(f"- {{name: {v}, service: mnist-{v}, weight: {w}}}" for v, w in weights.items())
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mnist-router", "namespace": "default"},
            "data": {"router.yaml": f"model: mnist\nversions:\n{versions}\n{extra}"}}


def apply(cluster, *objects):
    cluster.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}))


def test_configmap_and_endpointslices_drive_the_router(cluster, tmp_path):
    host = host_address()
    # One port per version, as every pod of a Deployment listens on the same port.
    v1, v2 = Backend("v1-a", host=host), Backend("v2-a", host=host)
    router = Router(None, tmp_path / "router.log", f"--kubeconfig={cluster.kubeconfig}",
                    source="--configmap=default/mnist-router")
    try:
        # Not ready without the ConfigMap; requests get a clear 503.
        time.sleep(1.0)
        assert requests.get(router.admin + "/readyz", timeout=2).status_code == 503
        r = requests.get(router.url + "/v1/models/mnist", timeout=5)
        assert r.status_code == 503 and "no valid configuration" in r.json()["error"]

        apply(cluster, slice_manifest("mnist-v1-abc", "mnist-v1", [v1]),
              slice_manifest("mnist-v2-abc", "mnist-v2", [v2], ready=False),
              configmap_manifest({"v1": 50, "v2": 50}))
        router.wait_ready(timeout=20)
        # v2's only endpoint is not ready: all traffic to v1.
        session = requests.Session()
        counts = collections.Counter(session.get(router.url + "/x", timeout=5).headers["x-modelfleet-version"]
                                     for _ in range(50))
        assert counts == {"v1": 50}
        assert metric_value(router.metrics(), "modelfleet_router_ready_endpoints", version="v2", protocol="rest") == 0

        # Under load: v2 becomes ready, then the weights move; no request fails.
        stop, failures, seen = threading.Event(), [], []

        def load():
            s = requests.Session()
            while not stop.is_set():
                resp = s.get(router.url + "/x", timeout=10)
                if resp.status_code != 200:
                    failures.append(resp.text)
                seen.append((time.monotonic(), resp.headers.get("x-modelfleet-version")))

        threads = [threading.Thread(target=load) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            changed = time.monotonic()
            apply(cluster, slice_manifest("mnist-v2-abc", "mnist-v2", [v2], ready=True))
            wait_until(lambda: any(t > changed and v == "v2" for t, v in list(seen)), timeout=5,
                       what="v2's endpoint to get traffic")
            changed = time.monotonic()
            apply(cluster, configmap_manifest({"v1": 0, "v2": 100}))
            wait_until(lambda: sum(1 for t, v in list(seen) if t > changed + 2 and v == "v2") > 20, timeout=10,
                       what="traffic after the weight change")
            assert not [v for t, v in list(seen) if t > changed + 2 and v == "v1"]
        finally:
            stop.set()
            for t in threads:
                t.join()
        assert not failures, failures[:3]

        # A bad edit keeps the previous snapshot and is counted.
        apply(cluster, configmap_manifest({"v1": 10, "v2": 10}))
        wait_until(lambda: metric_value(router.metrics(), "modelfleet_router_config_errors_total") >= 1, timeout=10,
                   what="the bad config to be refused")
        assert {session.get(router.url + "/x", timeout=5).headers["x-modelfleet-version"] for _ in range(10)} == {"v2"}

        # Every endpoint gone: a 503 naming the versions.
        cluster.kubectl("delete", "endpointslice", "mnist-v1-abc", "mnist-v2-abc")
        def unavailable():
            resp = session.get(router.url + "/x", timeout=5)
            return resp.status_code == 503 and resp.json()
        body = wait_until(unavailable, timeout=10, what="503 once the slices are gone")
        assert body == {"error": "no ready endpoint for model mnist (versions: v1 0/0 ready, v2 0/0 ready)"}
    finally:
        assert router.stop() == 0, router.log()
        v1.stop()
        v2.stop()
