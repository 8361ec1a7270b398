"""The modelfleet Helm chart, checked with the real helm (built from helm.sh/helm/v3 by
scripts/build-go-tools.sh), offline: lint --strict, rendering, the values schema refusing bad
values, least-privilege RBAC, the operator's security context and arguments, and the Grafana
dashboard whose queries use only the metric names docs/helm.md lists as the contract."""
import json
import os
import re
import subprocess

import pytest
import yaml

from conftest import ROOT, go_binary

pytestmark = pytest.mark.go_components

CHART = ROOT / "helm" / "modelfleet"
DOCS = ROOT / "docs" / "helm.md"
ALL_ON = ["--set", "metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true,"
          "metrics.prometheusScrapeAnnotations=true"]


def helm(*args, check=True):
    binary = go_binary("helm")
    # helm's own state stays out of the developer's home.
    env = dict(os.environ, HELM_CACHE_HOME="/tmp/modelfleet-helm/cache",
               HELM_CONFIG_HOME="/tmp/modelfleet-helm/config", HELM_DATA_HOME="/tmp/modelfleet-helm/data")
    result = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=120, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def render(*args, release="mf", namespace="modelfleet-system"):
    out = helm("template", release, str(CHART), "--namespace", namespace, *args).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def one(objects, kind, name=None):
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def test_lint_strict_is_clean():
    for extra in ([], ALL_ON, ["--set", "operator.replicas=1,operator.leaderElection.enabled=false,"
                                        "operator.watchNamespace=ml,rbac.create=false,serviceAccount.create=false,"
                                        "serviceAccount.name=existing,dashboard.enabled=false"]):
        result = helm("lint", "--strict", str(CHART), *extra)
        assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout, result.stdout
        assert "[WARNING]" not in result.stdout and "[ERROR]" not in result.stdout, result.stdout


def test_chart_metadata():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["apiVersion"], chart["name"], chart["version"], chart["appVersion"]) == \
        ("v2", "modelfleet", "0.1.0", "0.1.0")


def test_crds_are_the_repository_ones():
    # One copy of the CRDs: the chart's crds/ is a link to the repository's, and helm follows it.
    assert (CHART / "crds").is_symlink() and (CHART / "crds").resolve() == (ROOT / "crds").resolve()
    objects = render("--include-crds")
    crds = {o["metadata"]["name"]: o for o in objects if o["kind"] == "CustomResourceDefinition"}
    expected = {}
    for path in sorted((ROOT / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            expected[doc["metadata"]["name"]] = doc
    assert crds == expected and {"modeldeployments.modelfleet.io", "trainingjobs.modelfleet.io"} <= set(crds)


def test_renders_the_expected_objects():
    kinds = sorted((o["kind"], o["metadata"]["name"]) for o in render())
    assert kinds == sorted([
        ("ServiceAccount", "mf-modelfleet-operator"), ("ClusterRole", "mf-modelfleet-operator"),
        ("ClusterRoleBinding", "mf-modelfleet-operator"), ("Role", "mf-modelfleet-operator-leader-election"),
        ("RoleBinding", "mf-modelfleet-operator-leader-election"), ("ClusterRole", "mf-router"),
        ("Deployment", "mf-modelfleet-operator"), ("PodDisruptionBudget", "mf-modelfleet-operator"),
        ("Service", "mf-modelfleet-operator-metrics"), ("Service", "mf-modelfleet-operator-leader"),
        ("ConfigMap", "mf-modelfleet-dashboard")])
    monitors = {o["kind"]: o for o in render(*ALL_ON) if o["apiVersion"] == "monitoring.coreos.com/v1"}
    assert set(monitors) == {"ServiceMonitor", "PodMonitor"}
    assert monitors["ServiceMonitor"]["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitors["ServiceMonitor"]["spec"]["endpoints"][0]["honorLabels"] is True
    assert monitors["PodMonitor"]["spec"]["namespaceSelector"] == {"any": True}
    # A release named like the chart is not repeated in names.
    assert one(render(release="modelfleet"), "Deployment")["metadata"]["name"] == "modelfleet-operator"


def test_operator_deployment():
    objects = render()
    deployment = one(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    [container] = pod["containers"]
    assert container["image"] == "modelfleet/operator:0.1.0"
    args = container["args"]
    assert "--leader-elect" in args and "--leader-election-id=modelfleet-operator" in args
    assert not any(a.startswith("--namespace=") for a in args)  # all namespaces by default
    for arg in ("--metrics-port=8080", "--workers=4", "--resync-seconds=300", "--log-level=info",
                "--server-image=modelfleet/server:0.1.0", "--sync-image=modelfleet/sync:0.1.0",
                "--router-image=modelfleet/router:0.1.0", "--router-cluster-role=mf-router"):
        assert arg in args, f"{arg} not in {args}"
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in container["env"]}
    assert env == {"POD_IP": "status.podIP", "POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]
    service = one(objects, "Service", "mf-modelfleet-operator-metrics")
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()

    # Values reach the arguments and images.
    custom = one(render("--set", "image.registry=registry.example.com:5000/ml,image.tag=1.2.3,"
                                 "operator.watchNamespace=ml,operator.logLevel=debug,operator.workers=8,"
                                 "operator.replicas=1,operator.leaderElection.enabled=false,"
                                 "image.repositories.router=acme/router,router.clusterRoleName=ml-router"),
                 "Deployment")
    [container] = custom["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com:5000/ml/modelfleet/operator:1.2.3"
    for arg in ("--namespace=ml", "--log-level=debug", "--workers=8", "--router-cluster-role=ml-router",
                "--router-image=registry.example.com:5000/ml/acme/router:1.2.3",
                "--server-image=registry.example.com:5000/ml/modelfleet/server:1.2.3"):
        assert arg in container["args"], f"{arg} not in {container['args']}"
    assert "--leader-elect" not in container["args"]


def test_security_context():
    deployment = one(render(), "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = pod["containers"][0]["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["runAsNonRoot"] is True and context["runAsUser"] == 10001


def rules_of(objects):
    return {(o["kind"], o["metadata"]["name"]): o["rules"] for o in objects if o["kind"] in ("ClusterRole", "Role")}


def test_rbac_is_least_privilege():
    objects = render(*ALL_ON)
    roles = rules_of(objects)
    for (kind, name), rules in roles.items():
        for rule in rules:
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert not any("*" in value for value in rule.get(field, [])), f"{kind} {name} has a wildcard: {rule}"
            assert "nonResourceURLs" not in rule
            assert not {"escalate", "impersonate"} & set(rule["verbs"]), f"{kind} {name}: {rule}"
            assert "secrets" not in rule["resources"], f"{kind} {name} reads Secrets: {rule}"
            if "bind" in rule["verbs"]:
                assert rule["resources"] == ["clusterroles"] and rule["resourceNames"] == ["mf-router"], rule
    operator = roles[("ClusterRole", "mf-modelfleet-operator")]
    granted = {(group, resource, verb) for r in operator for group in r["apiGroups"] for resource in r["resources"]
               for verb in r["verbs"]}
    assert ("modelfleet.io", "modeldeployments/status", "patch") in granted
    assert ("apps", "deployments", "create") in granted
    assert not any(resource == "leases" for _, resource, _ in granted)  # a Role in the release namespace
    lease = roles[("Role", "mf-modelfleet-operator-leader-election")]
    assert lease == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
                     {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]}]  # its own pod's leader label
    # The routers report to the leader through a Service that selects that label.
    leader = one(objects, "Service", "mf-modelfleet-operator-leader")
    assert leader["spec"]["selector"]["modelfleet.io/leader"] == "true"
    args = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--report-url=http://mf-modelfleet-operator-leader.modelfleet-system.svc:8080/v1/reports" in args
    assert one(objects, "Role")["metadata"]["namespace"] == "modelfleet-system"
    assert roles[("ClusterRole", "mf-router")] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]
    # The bindings name the chart's ServiceAccount and roles.
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        binding = one(objects, kind)
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mf-modelfleet-operator",
                                        "namespace": "modelfleet-system"}]
        assert (binding["roleRef"]["kind"], binding["roleRef"]["name"]) in roles
    # Every rule is explained in docs/helm.md.
    docs = DOCS.read_text()
    for rules in roles.values():
        for rule in rules:
            for resource in rule["resources"]:
                assert f"`{resource}`" in docs, f"docs/helm.md does not explain the rule on {resource}"
    # Without leader election there is no Lease rule at all.
    assert ("Role", "mf-modelfleet-operator-leader-election") not in rules_of(
        render("--set", "operator.leaderElection.enabled=false"))


@pytest.mark.parametrize("args,message", [
    (["--set-string", "operator.replicas=two"], "at '/operator/replicas': got string, want integer"),
    (["--set", "operator.replicas=0"], "at '/operator/replicas': minimum: got 0, want 1"),
    (["--set", "operator.logLevel=loud"], "at '/operator/logLevel': value must be one of"),
    (["--set", "image.pullPolicy=Sometimes"], "at '/image/pullPolicy'"),
    (["--set", "operatr.replicas=3"], "additional properties 'operatr' not allowed"),
    (["--set", "metrics.serviceMonitor.interval=often"], "at '/metrics/serviceMonitor/interval'"),
    (["--set", "operator.watchNamespace=Not_A_Namespace"], "at '/operator/watchNamespace'"),
])
def test_schema_rejects_bad_values(args, message):
    result = helm("template", "mf", str(CHART), *args, check=False)
    assert result.returncode != 0, f"{args} was accepted"
    assert "values don't meet the specifications of the schema" in result.stderr, result.stderr
    assert message in result.stderr, result.stderr


def test_schema_requires_service_for_service_monitor():
    result = helm("template", "mf", str(CHART), "--set", "metrics.serviceMonitor.enabled=true,"
                  "metrics.service.enabled=false", check=False)
    assert result.returncode != 0 and "metrics.serviceMonitor.enabled needs metrics.service.enabled" in result.stderr


# --- the dashboard -------------------------------------------------------------------------------

PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
                "offset", "inf", "nan"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr: str) -> set:
    """The metric names a PromQL expression selects: identifiers left once strings, label matchers,
    ranges, grouping clauses, functions and keywords are taken out."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        if text[match.end():].lstrip().startswith("(") or match.group().lower() in PROMQL_WORDS:
            continue
        names.add(match.group())
    return names


def contract_metrics() -> dict:
    """metric name -> type from the table under "### Metrics contract" in docs/helm.md."""
    section = DOCS.read_text().split("### Metrics contract", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z_:][a-z0-9_:]*)` \| (\w+) \|", section, re.M)}


def test_metric_name_extraction():
    assert metric_names('sum by (version) (rate(a_total{code=~"5..", x="by(y)"}[1m])) / '
                        'ignoring (version) group_left () sum(rate(a_total[1m]))') == {"a_total"}
    assert metric_names("histogram_quantile(0.99, sum by (le) (rate(h_bucket[5m])))") == {"h_bucket"}
    assert metric_names("max by (pod) (q_depth)") == {"q_depth"}


def dashboard_from_configmap():
    configmap = one(render(), "ConfigMap", "mf-modelfleet-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    [(key, text)] = configmap["data"].items()
    assert key.endswith(".json")
    return json.loads(text)


def all_panels(dashboard):
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def test_dashboard_configmap_parses_and_has_its_variables():
    dashboard = dashboard_from_configmap()
    assert dashboard == json.loads((CHART / "dashboards" / "modelfleet.json").read_text())
    assert 39 <= dashboard["schemaVersion"] < 50 and dashboard["uid"] and dashboard["title"]
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "modeldeployment"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"]["uid"] == "${datasource}"
    # Panels fit Grafana's 24-column grid and do not overlap.
    cells = set()
    for panel in all_panels(dashboard):
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps another panel"
                cells.add((x, y))
    # A data source override in the ConfigMap is not needed: every query uses the variable.
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_dashboard_queries_use_only_contract_metrics():
    contract = contract_metrics()
    assert len(contract) >= 10, contract
    dashboard = dashboard_from_configmap()
    used = set()
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []):
            for name in metric_names(target["expr"]):
                base = next((name[:-len(s)] for s in HISTOGRAM_SUFFIXES
                             if name.endswith(s) and contract.get(name[:-len(s)]) == "histogram"), name)
                assert base in contract, f"panel {panel['title']!r} uses {name}, not in docs/helm.md's contract"
                used.add(base)
        for target in panel.get("targets", []):  # router and server series are filtered to the selection
            if re.search(r"modelfleet_(router_|requests|request_|compute_|batch_)", target["expr"]):
                assert 'namespace=~"$namespace"' in target["expr"], target["expr"]
                assert 'modeldeployment=~"$modeldeployment"' in target["expr"], target["expr"]
    # What the brief of the dashboard asks for is there.
    for name in ("modelfleet_router_requests_total", "modelfleet_router_request_duration_seconds",
                 "modelfleet_router_ready_endpoints", "modelfleet_operator_version_replicas",
                 "modelfleet_operator_version_ready_replicas", "modelfleet_operator_reconcile_total",
                 "modelfleet_operator_reconcile_errors_total", "modelfleet_operator_queue_depth",
                 "modelfleet_operator_reconcile_duration_seconds", "modelfleet_requests_total"):
        assert name in used, f"no panel shows {name}"
    exprs = " ".join(t["expr"] for p in all_panels(dashboard) for t in p.get("targets", []))
    for quantile in ("0.5", "0.95", "0.99"):
        assert f"histogram_quantile({quantile}, sum by (version, le) (rate(modelfleet_router_request_duration" in exprs
    assert 'code=~"5.."' in exprs


def test_contract_server_metrics_are_the_servers_own():
    # The server's names in the contract are ones modelfleet-server registers (not router/operator).
    sources = "".join(p.read_text() for p in (ROOT / "server").rglob("*.cc"))
    for name in contract_metrics():
        if not name.startswith(("modelfleet_router_", "modelfleet_operator_")):
            assert f'"{name}"' in sources, f"modelfleet-server does not export {name}"


# --- on the real API server (modelfleet-local) ----------------------------------------------------

OPERATOR_SA = "system:serviceaccount:modelfleet-system:modelfleet-operator"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """modelfleet-local with the chart installed as release `modelfleet` (its operator pods cannot
    run here without an image map; what is checked is what the API server accepts and authorizes)."""
    from local_fixtures import LocalCluster
    cluster = LocalCluster(tmp_path_factory.mktemp("helm-chart"))
    cluster.start()
    try:
        cluster.kubectl("create", "namespace", "modelfleet-system")
        env = cluster.env()
        binary = go_binary("helm")
        env.update(HELM_CACHE_HOME="/tmp/modelfleet-helm/cache", HELM_CONFIG_HOME="/tmp/modelfleet-helm/config",
                   HELM_DATA_HOME="/tmp/modelfleet-helm/data")
        result = subprocess.run([str(binary), "install", "modelfleet", str(CHART), "-n", "modelfleet-system"],
                                capture_output=True, text=True, timeout=120, env=env)
        assert result.returncode == 0, result.stderr
        cluster.kubectl("wait", "--for", "condition=Established", "crd/modeldeployments.modelfleet.io",
                        "crd/trainingjobs.modelfleet.io", "--timeout=30s")
        yield cluster
    finally:
        cluster.stop()


def test_examples_are_valid_modeldeployments(installed):
    installed.kubectl("apply", "--dry-run=server", "-f", str(ROOT / "examples" / "modeldeployment-digits.yaml"))
    local = (ROOT / "examples" / "modeldeployment-digits-local.yaml").read_text()
    assert "file:///MODELFLEET_ROOT/examples/models/digits/1" in local
    local = local.replace("/MODELFLEET_ROOT", str(ROOT))
    for version in (1, 2):
        assert (ROOT / "examples" / "models" / "digits" / str(version) / "model.onnx").exists()
    installed.kubectl("apply", "--dry-run=server", "-f", "-", input=local)
    # The placeholder itself is valid too, so a forgotten substitution fails at the model, not here.
    installed.kubectl("apply", "--dry-run=server", "-f", str(ROOT / "examples" / "modeldeployment-digits-local.yaml"))
    result = installed.kubectl("apply", "--dry-run=server", "-o", "json", "-f",
                               str(ROOT / "examples" / "modeldeployment-digits.yaml"))
    spec = json.loads(result.stdout)["spec"]
    assert spec["traffic"] == {"v1": 90, "v2": 10}
    assert [v["storageUri"] for v in spec["versions"]] == ["pvc://model-store/digits/1", "pvc://model-store/digits/2"]


@pytest.mark.parametrize("check,allowed", [
    (["watch", "modeldeployments.modelfleet.io", "-A"], True),
    (["patch", "modeldeployments.modelfleet.io", "--subresource=status", "-n", "default"], True),
    (["update", "modeldeployments.modelfleet.io", "-n", "default"], False),  # the spec is the user's
    (["create", "deployments.apps", "-n", "default"], True),
    (["delete", "configmaps", "-n", "default"], True),
    (["create", "rolebindings.rbac.authorization.k8s.io", "-n", "default"], True),
    (["bind", "clusterroles.rbac.authorization.k8s.io/modelfleet-router"], True),
    (["bind", "clusterroles.rbac.authorization.k8s.io/cluster-admin"], False),
    (["escalate", "clusterroles.rbac.authorization.k8s.io"], False),
    (["create", "events", "-n", "default"], True),
    (["create", "events.events.k8s.io", "-n", "default"], False),  # it records core/v1 Events
    (["delete", "serviceaccounts", "-n", "default"], False),  # the garbage collector removes them
    (["update", "leases.coordination.k8s.io", "-n", "modelfleet-system"], True),
    (["update", "leases.coordination.k8s.io", "-n", "kube-system"], False),
    (["get", "secrets", "-n", "default"], False),
    (["create", "pods", "-n", "default"], True),  # a TrainingJob's pods
    (["create", "pods", "--subresource=exec", "-n", "default"], False),
    (["create", "trainingjobs.modelfleet.io", "-n", "default"], True),  # a study's trials
    (["get", "pods", "--subresource=log", "-n", "default"], True),  # a trial's metric line
    (["list", "nodes"], True),  # gang admission
    (["patch", "nodes"], False),
    (["delete", "namespaces"], False),
])
def test_operator_rbac_on_the_api_server(installed, check, allowed):
    result = installed.kubectl("auth", "can-i", *check, "--as", OPERATOR_SA, check=False)
    assert result.stdout.strip() == ("yes" if allowed else "no"), f"can-i {check}: {result.stdout}{result.stderr}"


def test_operator_can_bind_routers_to_the_router_role_only(installed):
    # What the operator does per namespace: a RoleBinding from the router's ServiceAccount to the
    # router ClusterRole; bind on that role lets it, without the router's permissions of its own.
    installed.kubectl("create", "rolebinding", "digits-router", "-n", "default", "--clusterrole=modelfleet-router",
                      "--serviceaccount=default:digits-router", "--as", OPERATOR_SA, "--dry-run=server")
    # cluster-admin, not admin: admin's rules are aggregated by the controller manager after start.
    refused = installed.kubectl("create", "rolebinding", "grab", "-n", "default", "--clusterrole=cluster-admin",
                                "--serviceaccount=default:digits-router", "--as", OPERATOR_SA, "--dry-run=server",
                                check=False)
    assert refused.returncode != 0 and "forbidden" in refused.stderr
