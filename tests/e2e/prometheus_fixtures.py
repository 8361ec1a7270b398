"""A real Prometheus (Debian's /usr/bin/prometheus) running as a pod of the `fleet` cluster,
scraping what docs/helm.md ("Scraping", "Plain Prometheus") tells users to scrape: every pod
annotated `prometheus.io/scrape: "true"` (routers and model servers; the operator sets the
annotations) at its `prometheus.io/port` and `prometheus.io/path`, and the operator pods'
`metrics` port with `honor_labels: true`. Both jobs attach `namespace` and `pod`, and the pod
label `modelfleet.io/modeldeployment` as `modeldeployment`, the labels the dashboard filters on.

It has to run inside the cluster: pod IPs (10.244.1.x) exist only in the cluster's network
namespace. The host queries it through a LoadBalancer Service, as it reaches the routers.

Debian builds Prometheus without Kubernetes service discovery (`kubernetes_sd_configs` is not a
field of its config; see /usr/share/doc/prometheus/NEWS.Debian.gz), so a sidecar does what
`kubernetes_sd_configs: [{role: pod}]` does: it lists the pods from the API server with the pod's
ServiceAccount every SCRAPE_INTERVAL and writes them, one target per container port with the same
`__meta_kubernetes_pod_*` labels, to a `file_sd_configs` file. The relabelling is therefore the
one a stock Prometheus with `role: pod` uses; swap the discovery block and it runs unchanged.

On modelfleet-local a container is a local process with no mount namespace and images outside
the image map need a `command`: the containers run this machine's /usr/bin/prometheus and
/usr/bin/python3 through /bin/sh, and find the ServiceAccount token and CA through
$MODELFLEET_SERVICE_ACCOUNT_DIR and the volumes' directories through $MODELFLEET_VOLUME_<NAME>
(each falls back to its mount path, where a real kubelet mounts it)."""
import json
import pathlib

import pytest
import requests

from local_fixtures import wait_until

NAMESPACE = "monitoring"
NAME = "prometheus"
PORT = 9090
SCRAPE_INTERVAL = "2s"
PROMETHEUS_BINARY = "/usr/bin/prometheus"
PYTHON = "/usr/bin/python3"

# @SD_FILE@ is substituted by the container's command (the sd volume's directory).
_FILE_SD = """
    file_sd_configs:
    - files: ["@SD_FILE@"]
      refresh_interval: {interval}""".format(interval=SCRAPE_INTERVAL)

_COMMON_LABELS = """
    - source_labels: [__meta_kubernetes_namespace]
      target_label: namespace
    - source_labels: [__meta_kubernetes_pod_name]
      target_label: pod
    - source_labels: [__meta_kubernetes_pod_label_modelfleet_io_modeldeployment]
      target_label: modeldeployment"""

PROMETHEUS_YML = f"""global:
  scrape_interval: {SCRAPE_INTERVAL}
  scrape_timeout: {SCRAPE_INTERVAL}
  evaluation_interval: {SCRAPE_INTERVAL}
scrape_configs:
  # Routers and model servers: the operator annotates their pods.
  - job_name: modelfleet-pods{_FILE_SD}
    relabel_configs:
    - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_scrape]
      regex: "true"
      action: keep
    # The operator has a job of its own (honor_labels), should its pods be annotated too.
    - source_labels: [__meta_kubernetes_pod_label_app_kubernetes_io_name]
      regex: modelfleet-operator
      action: drop
    - source_labels: [__meta_kubernetes_pod_phase]
      regex: Pending|Succeeded|Failed
      action: drop
    - source_labels: [__meta_kubernetes_pod_annotation_prometheus_io_path]
      regex: (.+)
      target_label: __metrics_path__
    - source_labels: [__address__, __meta_kubernetes_pod_annotation_prometheus_io_port]
      regex: ([^:]+)(?::\\d+)?;(\\d+)
      replacement: $1:$2
      target_label: __address__{_COMMON_LABELS}
  # The operator: its per-ModelDeployment series carry their own `namespace` (docs/helm.md).
  - job_name: modelfleet-operator
    honor_labels: true{_FILE_SD}
    relabel_configs:
    - source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_pod_label_app_kubernetes_io_name,
                      __meta_kubernetes_pod_container_port_name]
      regex: modelfleet-system;modelfleet-operator;metrics
      action: keep
    - source_labels: [__meta_kubernetes_pod_phase]
      regex: Pending|Succeeded|Failed
      action: drop
    - target_label: __metrics_path__
      replacement: /metrics{_COMMON_LABELS}
"""

# The discovery sidecar: `role: pod` of Prometheus' Kubernetes SD, for file_sd (stdlib only).
KUBERNETES_SD_PY = r'''"""Lists pods like Prometheus' kubernetes_sd_configs role pod and writes them as file_sd
target groups, one per container port (a container without ports: the pod IP alone)."""
import json, os, re, ssl, sys, time, urllib.request

sa = os.environ.get("MODELFLEET_SERVICE_ACCOUNT_DIR", "/var/run/secrets/kubernetes.io/serviceaccount")
server = "https://%s:%s" % (os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"])
out, interval = sys.argv[1], float(sys.argv[2])
context = ssl.create_default_context(cafile=os.path.join(sa, "ca.crt"))


def sanitize(name):
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def groups(pods):
    for pod in pods:
        meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
        ip = status.get("podIP")
        if not ip or meta.get("deletionTimestamp"):
            continue
        ready = any(c.get("type") == "Ready" for c in status.get("conditions", []) if c.get("status") == "True")
        labels = {
            "__meta_kubernetes_namespace": meta["namespace"],
            "__meta_kubernetes_pod_name": meta["name"],
            "__meta_kubernetes_pod_ip": ip,
            "__meta_kubernetes_pod_uid": meta.get("uid", ""),
            "__meta_kubernetes_pod_node_name": spec.get("nodeName", ""),
            "__meta_kubernetes_pod_host_ip": status.get("hostIP", ""),
            "__meta_kubernetes_pod_phase": status.get("phase", ""),
            "__meta_kubernetes_pod_ready": "true" if ready else "false",
        }
        for owner in meta.get("ownerReferences", []):
            if owner.get("controller"):
                labels["__meta_kubernetes_pod_controller_kind"] = owner["kind"]
                labels["__meta_kubernetes_pod_controller_name"] = owner["name"]
        for kind in ("label", "annotation"):
            for k, v in (meta.get(kind + "s") or {}).items():
                labels["__meta_kubernetes_pod_%s_%s" % (kind, sanitize(k))] = v
                labels["__meta_kubernetes_pod_%spresent_%s" % (kind, sanitize(k))] = "true"
        for c in spec.get("containers", []):
            base = dict(labels, __meta_kubernetes_pod_container_name=c["name"],
                        __meta_kubernetes_pod_container_image=c.get("image", ""),
                        __meta_kubernetes_pod_container_init="false")
            ports = c.get("ports") or []
            if not ports:
                yield {"targets": [ip], "labels": base}
            for p in ports:
                yield {"targets": ["%s:%d" % (ip, p["containerPort"])],
                       "labels": dict(base, __meta_kubernetes_pod_container_port_name=p.get("name", ""),
                                      __meta_kubernetes_pod_container_port_number=str(p["containerPort"]),
                                      __meta_kubernetes_pod_container_port_protocol=p.get("protocol", "TCP"))}


last = None
while True:
    try:
        with open(os.path.join(sa, "token")) as f:  # re-read: the kubelet rotates it
            token = f.read().strip()
        request = urllib.request.Request(server + "/api/v1/pods", headers={"Authorization": "Bearer " + token})
        with urllib.request.urlopen(request, context=context, timeout=10) as r:
            text = json.dumps(sorted(groups(json.load(r)["items"]), key=lambda g: g["targets"]), indent=1)
        if text != last:
            with open(out + ".tmp", "w") as f:
                f.write(text)
            os.replace(out + ".tmp", out)  # file_sd must never read half a file
            last = text
    except Exception as e:  # noqa: BLE001 (keep the last targets, try again)
        print("kubernetes-sd: %s: %s" % (type(e).__name__, e), file=sys.stderr, flush=True)
    time.sleep(interval)
'''

_PATHS = r"""set -eu
config="${MODELFLEET_VOLUME_CONFIG:-/etc/prometheus/config}"
sd="${MODELFLEET_VOLUME_SD:-/etc/prometheus/sd}"
"""

# Prometheus: render the config (the file_sd path), then listen on the pod IP (pods share one
# network namespace on modelfleet-local; 0.0.0.0 would take the port from every pod).
PROMETHEUS_SCRIPT = (_PATHS + r"""data="${MODELFLEET_VOLUME_DATA:-/prometheus}"
/usr/bin/sed -e "s|@SD_FILE@|${sd}/pods.json|g" "${config}/prometheus.yml" > "${sd}/prometheus.yml"
exec @PROMETHEUS@ --config.file="${sd}/prometheus.yml" --storage.tsdb.path="${data}" \
    --storage.tsdb.retention.time=2h --web.listen-address="${POD_IP}:@PORT@"
""").replace("@PROMETHEUS@", PROMETHEUS_BINARY).replace("@PORT@", str(PORT))

DISCOVERY_SCRIPT = (_PATHS + r"""exec @PYTHON@ "${config}/kubernetes_sd.py" "${sd}/pods.json" @INTERVAL@
""").replace("@PYTHON@", PYTHON).replace("@INTERVAL@", SCRAPE_INTERVAL.rstrip("s"))


def _indent(text: str, spaces: int) -> str:
    return "\n".join((" " * spaces + line) if line else line for line in text.splitlines())


def manifest(namespace: str = NAMESPACE) -> str:
    """Namespace, ServiceAccount, a ClusterRole (+Binding) for discovery, the ConfigMap (config
    and discovery script), the Deployment and a LoadBalancer Service on 9090."""
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
  resources: [pods, endpoints, services, nodes]
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
{_indent(PROMETHEUS_YML, 4)}
  kubernetes_sd.py: |
{_indent(KUBERNETES_SD_PY, 4)}
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
        image: prom/prometheus:v2.42.0
        command:
        - /bin/sh
        - -c
        - |
{_indent(PROMETHEUS_SCRIPT, 10)}
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
        - {{name: sd, mountPath: /etc/prometheus/sd}}
        - {{name: data, mountPath: /prometheus}}
      - name: kubernetes-sd
        image: python:3.11-slim
        command:
        - /bin/sh
        - -c
        - |
{_indent(DISCOVERY_SCRIPT, 10)}
        volumeMounts:
        - {{name: config, mountPath: /etc/prometheus/config, readOnly: true}}
        - {{name: sd, mountPath: /etc/prometheus/sd}}
      volumes:
      - name: config
        configMap: {{name: {NAME}}}
      - name: sd
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
    if not pathlib.Path(PROMETHEUS_BINARY).exists():
        pytest.skip(f"{PROMETHEUS_BINARY} is not installed (apt-get install prometheus)")
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
