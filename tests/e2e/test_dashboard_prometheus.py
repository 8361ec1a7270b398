"""Issue 18's acceptance for the Grafana dashboard: every panel's PromQL query returns data from a
real Prometheus scraping an end-to-end run.

The chart-installed operator on modelfleet-local (the `fleet` fixture) serves the digits example
(with batching on, the only way the batch-size panel can have data); a Prometheus pod in the cluster
(prometheus_fixtures.py: Prometheus 3 built from its Go module) finds the router, the model servers
and the operators through kubernetes_sd_configs against the cluster's API server and scrapes them
with the jobs docs/helm.md gives plain-Prometheus users. About 10 s of REST load goes through the
router's LoadBalancer address, a share of it predictions with a wrong input shape (400s); then every
target of every panel of helm/modelfleet/dashboards/modelfleet.json, with the template variables
substituted as Grafana does (namespace=default, modeldeployment=digits), is sent to Prometheus'
/api/v1/query and must return at least one series."""
import collections
import json
import math
import threading
import time

import numpy as np
import pytest
import requests
import yaml
from sklearn.datasets import load_digits

from conftest import ROOT
from local_fixtures import wait_until
from prometheus_fixtures import NAME, NAMESPACE, dashboard_targets, prometheus, substitute_variables  # noqa: F401

pytestmark = [pytest.mark.timeout(600), pytest.mark.go_components, pytest.mark.prometheus_server]

DASHBOARD = ROOT / "helm" / "modelfleet" / "dashboards" / "modelfleet.json"
DIGITS = load_digits().data[:2].astype(np.float32)
PREDICT = {"signature_name": "serving_default", "instances": DIGITS.tolist()}
WRONG_SHAPE = {"signature_name": "serving_default", "instances": DIGITS[:, :10].tolist()}  # 10 features, not 64
NAME_IN_CLUSTER = f"{NAME}.{NAMESPACE}.svc"  # how pods reach the test's Prometheus
LOAD_SECONDS = 10  # then every query is retried, the load still running, until it has data
# What Grafana substitutes: the variables' selections (one namespace, one ModelDeployment), and its
# built-in interval variables as a 2 s scrape interval makes them.
VARIABLES = {
    "namespace": "default",
    "modeldeployment": "digits",
    "__rate_interval": "1m",
    "__interval": "2s",
    "__interval_ms": "2000",
    "__range": "5m",
    "__range_s": "300",
}


class Load:
    """Keep-alive REST clients through the router until stopped; every `bad_every`-th request of a
    client is a prediction with the wrong input shape. Counts answers by status code."""

    def __init__(self, url, clients=4, bad_every=5):
        self.url = url
        self.bad_every = bad_every
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.codes = collections.Counter()
        self.errors = collections.Counter()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(clients)]

    def run(self):
        n = 0
        with requests.Session() as session:
            while not self.stop_event.is_set():
                n += 1
                body = WRONG_SHAPE if n % self.bad_every == 0 else PREDICT
                try:
                    code = session.post(self.url, json=body, timeout=10).status_code
                    with self.lock:
                        self.codes[code] += 1
                except requests.RequestException as e:
                    with self.lock:
                        self.errors[type(e).__name__] += 1
                    time.sleep(0.1)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for t in self.threads:
            t.join(timeout=15)


@pytest.fixture(scope="module")
def digits(fleet, prometheus):  # noqa: F811
    """The digits example (v1 90 %, v2 10 %) with batching on, Ready. Applied once Prometheus
    scrapes the operator, so the reconciles it causes fall in the operator panels' windows."""
    wait_until(lambda: [t for t in prometheus.targets("modelfleet-operator") if t["health"] == "up"],
               timeout=60, interval=1, what="the operator scraped")
    md = yaml.safe_load(fleet.local_example())
    md["spec"].setdefault("server", {})["batching"] = {"maxBatchSize": 8, "batchTimeoutMicros": 2000}
    fleet.apply(yaml.safe_dump(md))
    fleet.wait_ready(timeout=240)
    return fleet


def wait_for_targets(prom, timeout=90):
    """Until the router and both versions' servers are scraped and up."""
    def healthy():
        up = [t["labels"].get("pod", "") for t in prom.targets("modelfleet-pods") if t["health"] == "up"]
        return (any(p.startswith("digits-router-") for p in up) and any(p.startswith("digits-v1-") for p in up)
                and any(p.startswith("digits-v2-") for p in up))
    try:
        wait_until(healthy, timeout=timeout, interval=1, what="router and server targets up")
    except AssertionError as e:
        raise AssertionError(f"{e}\ntargets:\n{prom.describe_targets()}") from None


def test_every_dashboard_panel_returns_data(prometheus, digits):  # noqa: F811
    dashboard = json.loads(DASHBOARD.read_text())
    targets = [(title, ref, substitute_variables(expr, VARIABLES)) for title, ref, expr in dashboard_targets(dashboard)]
    assert len(targets) >= 17, targets
    for title, ref, expr in targets:
        assert "$" not in expr and "[[" not in expr, f"{title}/{ref}: a variable left in {expr}"

    wait_for_targets(prometheus)
    url = f"http://{digits.lb_address()}:8501/v1/models/digits:predict"
    results, missing = {}, {}
    with Load(url) as load:
        time.sleep(LOAD_SECONDS)
        # Instant queries while the load still runs, so every rate() window holds it.
        deadline = time.monotonic() + 60
        pending = list(targets)
        while pending and time.monotonic() < deadline:
            still = []
            for title, ref, expr in pending:
                result = prometheus.query(expr)
                results[(title, ref)] = result
                if not any(math.isfinite(float(series["value"][1])) for series in result):  # NaN draws nothing
                    still.append((title, ref, expr))
            pending = still
            if pending:
                time.sleep(2)
        missing = {(title, ref): expr for title, ref, expr in pending}
    codes, errors = dict(load.codes), dict(load.errors)

    summary = "\n".join(f"  {title} [{ref}]: {describe(results.get((title, ref), []))}" for title, ref, _ in targets)
    print(f"\nclient answers {codes} {errors}\npanels:\n{summary}")
    assert codes.get(200, 0) > 100 and codes.get(400, 0) > 10, (codes, errors)
    assert not missing, ("panels without data (no series, or only NaN):\n"
                         + "\n".join(f"  {t} [{r}]: {e}" for (t, r), e in missing.items())
                         + f"\nall panels:\n{summary}\ntargets:\n{prometheus.describe_targets()}")

    # The data is the run's: both versions serve in the 90/10 split, and no 5xx happened.
    by_title = collections.defaultdict(list)
    for (title, _), result in results.items():
        by_title[title] += result
    rates = {s["metric"].get("version"): float(s["value"][1]) for s in by_title["Requests per second by version"]}
    assert rates.get("v1", 0) > 0 and rates.get("v2", 0) > 0, rates
    share = {s["metric"]["version"]: float(s["value"][1]) for s in by_title["Traffic share by version"]}
    assert abs(sum(share.values()) - 1) < 1e-6 and 0.75 < share["v1"] < 0.98, share
    if not any(500 <= code < 600 for code in codes):
        errors_5xx = {s["metric"].get("version"): float(s["value"][1]) for s in by_title["Error rate by version (5xx)"]}
        assert errors_5xx.get("v1") == 0 and errors_5xx.get("v2") == 0, errors_5xx
    statuses = {s["metric"].get("status") for s in by_title["Model server requests by version and status"]}
    assert {"OK", "INVALID_ARGUMENT"} <= statuses, statuses  # the wrong-shape predictions reached the servers


def describe(result) -> str:
    """A query's series as `{label=value,...}=value, ...`, or NO DATA."""
    def name(series):
        labels = {k: v for k, v in series["metric"].items() if k != "__name__"}
        return "{" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())) + "}"
    return ", ".join(f"{name(s)}={s['value'][1]}" for s in result) or "NO DATA"


def test_autoscaling_reads_its_qps_from_prometheus(fleet, prometheus):  # noqa: F811
    """spec.autoscaling.prometheus: the operator asks the in-cluster Prometheus for each version's
    QPS (its query, $version filled in) instead of the routers' reports. The query says 45 qps
    whatever the traffic: at 20 per replica both versions go to 3 replicas with no request sent.
    A query Prometheus refuses is a Warning event with Prometheus' message, and the version scales
    on the routers' reports again (no traffic: back to 1)."""
    url = f"http://{NAME_IN_CLUSTER}:9090"
    query = 'label_replace(vector(45), "version", "$version", "", "")'
    manifest = {
        "apiVersion": "modelfleet.io/v1alpha1", "kind": "ModelDeployment",
        "metadata": {"name": "promscaled", "namespace": "default"},
        "spec": {"modelName": "digits", "router": {"replicas": 1, "serviceType": "ClusterIP"},
                 "versions": [{"name": "v1", "storageUri": f"file://{ROOT}/examples/models/digits/1"},
                              {"name": "v2", "storageUri": f"file://{ROOT}/examples/models/digits/2"}],
                 "traffic": {"v1": 50, "v2": 50},
                 "autoscaling": {"metric": "qps", "targetPerReplica": 20, "minReplicas": 1, "maxReplicas": 3,
                                 "scaleDownStabilizationSeconds": 5,
                                 "prometheus": {"url": url, "query": query}}}}
    fleet.apply(json.dumps(manifest))
    try:
        replicas = lambda v: fleet.json("deployment", f"promscaled-{v}", "-n", "default")["spec"]["replicas"]  # noqa: E731
        wait_until(lambda: replicas("v1") == 3 and replicas("v2") == 3, timeout=90, interval=1,
                   what="both versions scaled to 3 on Prometheus' 45 qps")
        # The operator writes the status after the Deployments (here ~1.5 s later, when the first
        # reconcile already had Prometheus' answer and created them at 3 replicas).
        version_qps = lambda: {v["name"]: v.get("qps")  # noqa: E731
                               for v in fleet.md("promscaled").get("status", {}).get("versions", [])}
        wait_until(lambda: version_qps() == {"v1": 45, "v2": 45}, timeout=30, interval=1,
                   what="the status reporting Prometheus' 45 qps for each version")
        assert "PrometheusQueryFailed" not in fleet.kubectl("describe", "md", "promscaled").stdout

        fleet.kubectl("patch", "md", "promscaled", "--type", "merge", "-p", json.dumps(
            {"spec": {"autoscaling": {"prometheus": {"url": url, "query": "sum(rate(nope[1m]"}}}}))
        wait_until(lambda: "PrometheusQueryFailed" in fleet.kubectl("describe", "md", "promscaled").stdout,
                   timeout=30, interval=1, what="the refused query reported")
        events = fleet.kubectl("get", "events", "-n", "default", "--field-selector",
                               "involvedObject.name=promscaled,reason=PrometheusQueryFailed", "-o", "json").stdout
        messages = [e["message"] for e in json.loads(events)["items"]]
        assert any("Prometheus answered bad_data" in m and "scaling on the routers' reports" in m
                   for m in messages), messages
        wait_until(lambda: replicas("v1") == 1 and replicas("v2") == 1, timeout=90, interval=1,
                   what="back to 1 replica on the routers' reports (no traffic)")
    finally:
        fleet.kubectl("delete", "md", "promscaled", "--wait=false", check=False)
