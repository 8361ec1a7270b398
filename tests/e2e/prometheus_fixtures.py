"""A real Prometheus (3.x, built from its pinned Go module by scripts/build-go-tools.sh with
kubernetes_sd_configs in) running as a pod of the `fleet` cluster, scraping what docs/helm.md
("Scraping", "Plain Prometheus") tells users to scrape: every router and model server pod annotated
`prometheus.io/scrape: "true"` (the operator sets the annotations) at its `prometheus.io/port` and
`prometheus.io/path`, and the operator pods' `metrics` port with `honor_labels: true`. Both jobs
attach `namespace` and `pod`, and the pod label `modelfleet.io/modeldeployment` as
`modeldeployment`, the labels the dashboard filters on.

Discovery is Prometheus' own `kubernetes_sd_configs` (role pod) watching the cluster's API server
with the pod's ServiceAccount token, which a ClusterRole allows to get, list and watch pods,
services and endpointslices, no more. It has to run inside the cluster: pod IPs (10.244.1.x) exist
only in the cluster's network namespace. The host queries it through a LoadBalancer Service, as it
reaches the routers.

On modelfleet-local a container is a local process with no mount namespace, and images outside the
image map need a `command`: the container runs the built Prometheus through /bin/sh, which writes
the config with the API server's address ($KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT) and
the ServiceAccount directory ($MODELFLEET_SERVICE_ACCOUNT_DIR; a real kubelet mounts it at
/var/run/secrets/kubernetes.io/serviceaccount, the fallback) filled in, and finds the volumes'
directories through $MODELFLEET_VOLUME_<NAME> (each falls back to its mount path)."""
import json
import textwrap

import pytest
import requests
import yaml

from conftest import ROOT, go_binary_path
from local_fixtures import wait_until

NAMESPACE = "monitoring"
NAME = "prometheus"
PORT = 9090
SCRAPE_INTERVAL = "2s"
DOCS = ROOT / "docs" / "helm.md"


def prometheus_binary():
    return go_binary_path("prometheus")


def documented_scrape_configs() -> list:
    """The scrape jobs docs/helm.md gives plain-Prometheus users (the YAML block under
    "Plain Prometheus"), so that this test runs what the documentation says."""
    text = DOCS.read_text()
    section = text[text.index("- **Plain Prometheus:**"):]
    start = section.index("```yaml\n") + len("```yaml\n")
    block = textwrap.dedent(section[start:section.index("```", start)])
    return yaml.safe_load(block)["scrape_configs"]


def prometheus_yml() -> str:
    """The documented jobs, every kubernetes_sd_configs entry pointed at the API server with the
    pod's ServiceAccount (@API_SERVER@ and @SA_DIR@ are filled in by the container's command), and
    a 2 s scrape interval."""
    jobs = documented_scrape_configs()
    for job in jobs:
        for sd in job["kubernetes_sd_configs"]:
            sd.update({"api_server": "https://@API_SERVER@", "tls_config": {"ca_file": "@SA_DIR@/ca.crt"},
                       "authorization": {"credentials_file": "@SA_DIR@/token"}})
    interval = {"scrape_interval": SCRAPE_INTERVAL, "scrape_timeout": SCRAPE_INTERVAL,
                "evaluation_interval": SCRAPE_INTERVAL}
    return yaml.safe_dump({"global": interval, "scrape_configs": jobs}, sort_keys=False)


# Fill in the API server and the ServiceAccount directory, then listen on the pod IP (pods share
# one network namespace on modelfleet-local; 0.0.0.0 would take the port from every pod).
PROMETHEUS_SCRIPT = r"""set -eu
config="${MODELFLEET_VOLUME_CONFIG:-/etc/prometheus/config}"
rendered="${MODELFLEET_VOLUME_RENDERED:-/etc/prometheus/rendered}"
data="${MODELFLEET_VOLUME_DATA:-/prometheus}"
sa="${MODELFLEET_SERVICE_ACCOUNT_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}"
/usr/bin/sed -e "s|@API_SERVER@|${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}|g" -e "s|@SA_DIR@|${sa}|g" \
    "${config}/prometheus.yml" > "${rendered}/prometheus.yml"
exec "@PROMETHEUS@" --config.file="${rendered}/prometheus.yml" --storage.tsdb.path="${data}" \
    --storage.tsdb.retention.time=2h --web.listen-address="${POD_IP}:@PORT@"
"""


def _indent(text: str, spaces: int) -> str:
    return "\n".join((" " * spaces + line) if line else line for line in text.splitlines())


def manifest(namespace: str = NAMESPACE) -> str:
    """Namespace, ServiceAccount, a ClusterRole (+Binding) for discovery, the ConfigMap, the
    Deployment and a LoadBalancer Service on 9090."""
    script = PROMETHEUS_SCRIPT.replace("@PROMETHEUS@", str(prometheus_binary())).replace("@PORT@", str(PORT))
    return f"""apiVersion: v1
kind: Namespace
metadata:
  name: {namespace}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {NAME}
  namespace: {namespace}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {namespace}-{NAME}
rules:
- apiGroups: [""]
  resources: [pods, services]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {namespace}-{NAME}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: {namespace}-{NAME}
subjects:
- kind: ServiceAccount
  name: {NAME}
  namespace: {namespace}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {NAME}
  namespace: {namespace}
data:
  prometheus.yml: |
{_indent(prometheus_yml(), 4)}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {NAME}
  namespace: {namespace}
  labels: {{app.kubernetes.io/name: {NAME}}}
spec:
  replicas: 1
  strategy: {{type: Recreate}}
  selector:
    matchLabels: {{app.kubernetes.io/name: {NAME}}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: {NAME}}}
    spec:
      serviceAccountName: {NAME}
      containers:
      - name: prometheus
        image: prom/prometheus:v3.16.0
        command:
        - /bin/sh
        - -c
        - |
{_indent(script, 10)}
        env:
        - name: POD_IP
          valueFrom:
            fieldRef: {{fieldPath: status.podIP}}
        ports:
        - {{name: web, containerPort: {PORT}}}
        readinessProbe:
          httpGet: {{path: /-/ready, port: web}}
          periodSeconds: 2
        volumeMounts:
        - {{name: config, mountPath: /etc/prometheus/config, readOnly: true}}
        - {{name: rendered, mountPath: /etc/prometheus/rendered}}
        - {{name: data, mountPath: /prometheus}}
      volumes:
      - name: config
        configMap: {{name: {NAME}}}
      - name: rendered
        emptyDir: {{}}
      - name: data
        emptyDir: {{}}
---
apiVersion: v1
kind: Service
metadata:
  name: {NAME}
  namespace: {namespace}
spec:
  type: LoadBalancer
  selector: {{app.kubernetes.io/name: {NAME}}}
  ports:
  - {{name: web, port: {PORT}, targetPort: web}}
"""


class Prometheus:
    """The HTTP API of the in-cluster Prometheus, at its LoadBalancer address."""

    def __init__(self, fleet, address: str):
        self.fleet = fleet
        self.url = f"http://{address}:{PORT}"
        self.session = requests.Session()

    def api(self, path: str, **params):
        r = self.session.get(f"{self.url}/api/v1/{path}", params=params, timeout=10)
        body = r.json()
        if r.status_code != 200 or body.get("status") != "success":
            raise AssertionError(f"GET {path} {params}: {r.status_code} {json.dumps(body)[:2000]}")
        return body["data"]

    def query(self, expr: str):
        """An instant query's result (a list of {metric, value})."""
        data = self.api("query", query=expr)
        assert data["resultType"] == "vector", data
        return data["result"]

    def targets(self, job: str = None):
        active = self.api("targets", state="active")["activeTargets"]
        return [t for t in active if job is None or t["labels"].get("job") == job]

    def wait_for_series(self, expr: str, timeout: float = 60, what: str = None):
        return wait_until(lambda: self.query(expr) or None, timeout=timeout, interval=1,
                          what=what or f"data for {expr}")

    def describe_targets(self) -> str:
        lines = []
        for t in self.targets():
            lines.append(f"{t['labels'].get('job')} {t['scrapeUrl']} {t['health']} {t.get('lastError', '')}")
        return "\n".join(lines)


def install_prometheus(fleet, namespace: str = NAMESPACE, timeout: float = 120) -> Prometheus:
    fleet.apply(manifest(namespace))
    fleet.kubectl("rollout", "status", f"deployment/{NAME}", "-n", namespace, f"--timeout={int(timeout)}s",
                  timeout=timeout + 10)
    prometheus = Prometheus(fleet, fleet.lb_address(NAME, namespace))

    def ready():
        try:
            return prometheus.session.get(f"{prometheus.url}/-/ready", timeout=5).status_code == 200
        except requests.RequestException:
            return False
    wait_until(ready, timeout=60, interval=0.5, what="Prometheus answering at its LoadBalancer address")
    return prometheus


@pytest.fixture(scope="module")
def prometheus(fleet):
    if not prometheus_binary().exists():
        pytest.fail(f"{prometheus_binary()} is missing: scripts/build-go-tools.sh builds it (build_tree runs it)")
    yield install_prometheus(fleet)
    # The fleet is shared with later modules: stop scraping it.
    fleet.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)


def substitute_variables(expr: str, values: dict) -> str:
    """A dashboard query as Grafana sends it: `$var`, `${var}` and `[[var]]` replaced (longest
    names first, so `$__rate_interval` is not read as `$__rate`)."""
    for name in sorted(values, key=len, reverse=True):
        value = values[name]
        expr = expr.replace("${" + name + "}", value).replace("[[" + name + "]]", value).replace("$" + name, value)
    return expr


def dashboard_targets(dashboard: dict):
    """(panel title, refId, expr) of every query of every panel, rows' nested panels included."""
    def panels(items):
        for p in items:
            yield p
            yield from panels(p.get("panels", []))
    for panel in panels(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            if target.get("expr"):
                yield panel["title"], target.get("refId", ""), target["expr"]
