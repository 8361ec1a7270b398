"""kubectl against modelfleet-local's real kube-apiserver (v1.37): discovery and version, CRDs and
custom resources (printer columns, schema defaults and validation, patch, the scale and status
subresources, wait --for=condition with observedGeneration, cascading deletes by the garbage
collector, explain, server-side apply conflicts, strict field validation, CRD updates and
deletion, --dry-run=server, diff) and built-in kinds (create namespace / deployment / service /
secret / role, explain from the server's OpenAPI, strict field validation, get --chunk-size).

One cluster serves the module; each test works in a namespace of its own."""
import json
import time
import urllib.error

import pytest

from local_fixtures import DATA, module_cluster, namespace_for, namespaced, wait_until  # noqa: F401  (fixtures)

pytestmark = pytest.mark.go_components

WIDGETS_CRD = "widgets.example.modelfleet.io"


def get_json(cluster, *args):
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture(scope="module")
def widget_crd(module_cluster):  # noqa: F811
    """The test CRD (tests/e2e/local_data/widgets_crd.yaml), applied once and established."""
    module_cluster.kubectl("apply", "-f", str(DATA / "widgets_crd.yaml"))
    module_cluster.kubectl("wait", "--for=condition=Established", f"crd/{WIDGETS_CRD}", "--timeout=30s")
    return module_cluster


@pytest.fixture
def widgets(widget_crd, namespaced):  # noqa: F811
    """This test's namespace holding the two sample widgets, alpha and beta."""
    namespaced.kubectl("apply", "-f", str(DATA / "widgets.yaml"))
    return namespaced


def test_version_and_discovery_are_the_real_kubernetes_1_37(module_cluster):  # noqa: F811
    version = json.loads(module_cluster.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"].startswith("v1.37."), version
    assert (version["major"], version["minor"]) == ("1", "37")
    server = json.loads(module_cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert server["gitVersion"] == version["gitVersion"]
    groups = {g["name"]: g for g in json.loads(module_cluster.kubectl("get", "--raw", "/apis").stdout)["groups"]}
    for group in ("apps", "batch", "rbac.authorization.k8s.io", "apiextensions.k8s.io", "coordination.k8s.io",
                  "discovery.k8s.io", "admissionregistration.k8s.io", "authentication.k8s.io",
                  "authorization.k8s.io", "flowcontrol.apiserver.k8s.io", "policy", "networking.k8s.io"):
        assert group in groups, (group, sorted(groups))
    assert groups["apps"]["preferredVersion"]["groupVersion"] == "apps/v1"
    assert json.loads(module_cluster.kubectl("get", "--raw", "/api").stdout)["versions"] == ["v1"]
    # The node agent registered the node with the kubelet version of the control plane.
    node = get_json(module_cluster, "node", "local")
    assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.37.")


def test_get_shows_crd_printer_columns_and_defaults(widgets):
    out = widgets.kubectl("get", "widgets").stdout.splitlines()
    assert out[0].split() == ["NAME", "SIZE", "REPLICAS", "READY", "AGE"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert set(rows) == {"alpha", "beta"}
    assert rows["alpha"][1:3] == ["small", "1"]  # replicas defaulted by the schema
    assert rows["beta"][1:3] == ["large", "3"]
    alpha = get_json(widgets, "wd", "alpha")  # the short name
    assert alpha["spec"] == {"size": "small", "replicas": 1, "color": "blue"}
    assert alpha["metadata"]["generation"] == 1


def test_invalid_custom_resource_is_rejected_with_the_schema_errors(widgets):
    bad = widgets.kubectl("apply", "-f", "-", check=False, input="""
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: gamma}
spec: {size: enormous, replicas: -2}
""")
    assert bad.returncode != 0
    assert 'The Widget "gamma" is invalid' in bad.stderr, bad.stderr
    assert ('spec.size: Unsupported value: "enormous": supported values: "small", "medium", "large"'
            in bad.stderr), bad.stderr
    assert "spec.replicas: Invalid value: -2: spec.replicas in body should be greater than or equal to 0" in bad.stderr
    missing = widgets.kubectl("create", "-f", "-", check=False, input="""
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: gamma}
spec: {replicas: 2}
""")
    assert missing.returncode != 0 and "spec.size: Required value" in missing.stderr, missing.stderr
    assert widgets.kubectl("get", "widget", "gamma", check=False).returncode != 0


def test_patch_merge_and_json_and_a_bad_patch_changes_nothing(widgets):
    widgets.kubectl("patch", "widget", "alpha", "--type", "merge", "-p", '{"spec":{"size":"medium"}}')
    widgets.kubectl("patch", "widget", "alpha", "--type", "json",
                    "-p", '[{"op":"replace","path":"/spec/color","value":"red"}]')
    alpha = get_json(widgets, "widget", "alpha")
    assert (alpha["spec"]["size"], alpha["spec"]["color"]) == ("medium", "red")
    assert alpha["metadata"]["generation"] == 3
    rv = alpha["metadata"]["resourceVersion"]

    failed_test = widgets.kubectl("patch", "widget", "alpha", "--type", "json",
                                  "-p", '[{"op":"test","path":"/spec/size","value":"small"}]', check=False)
    assert failed_test.returncode != 0 and "The request is invalid" in failed_test.stderr, failed_test.stderr
    invalid = widgets.kubectl("patch", "widget", "alpha", "--type", "merge", "-p", '{"spec":{"size":"huge"}}',
                              check=False)
    assert invalid.returncode != 0 and 'spec.size: Unsupported value: "huge"' in invalid.stderr, invalid.stderr
    assert get_json(widgets, "widget", "alpha")["metadata"]["resourceVersion"] == rv


def test_scale_uses_the_scale_subresource(widgets):
    widgets.kubectl("scale", "widget", "beta", "--replicas", "5")
    beta = get_json(widgets, "widget", "beta")
    assert beta["spec"]["replicas"] == 5
    assert beta["metadata"]["generation"] == 2
    scale = json.loads(widgets.kubectl(
        "get", "--raw", f"/apis/example.modelfleet.io/v1/namespaces/{widgets.namespace}/widgets/beta/scale").stdout)
    assert (scale["kind"], scale["spec"]["replicas"]) == ("Scale", 5)
    # The server validates a scale write against the CRD's schema (minimum: 0).
    negative = widgets.kubectl("patch", "widget", "beta", "--subresource", "scale", "--type", "merge",
                               "-p", '{"spec":{"replicas":-1}}', check=False)
    assert negative.returncode != 0
    assert "spec.replicas in body should be greater than or equal to 0" in negative.stderr, negative.stderr
    assert get_json(widgets, "widget", "beta")["spec"]["replicas"] == 5


def set_ready(cluster, name, observed_generation):
    """Sets the Ready condition through the status subresource, as a controller would."""
    patch = {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Test", "message": "ready",
                                        "observedGeneration": observed_generation,
                                        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    cluster.kubectl("patch", "widget", name, "--subresource", "status", "--type", "merge", "-p", json.dumps(patch))


def test_wait_for_condition_honours_observed_generation(widgets):
    widgets.kubectl("patch", "widget", "alpha", "--type", "merge", "-p", '{"spec":{"size":"large"}}')  # generation 2
    waiter = widgets.kubectl_background("wait", "widget/alpha", "--for=condition=Ready", "--timeout=30s")
    try:
        set_ready(widgets, "alpha", 1)  # stale: kubectl wait must keep waiting
        time.sleep(2)
        assert waiter.poll() is None, waiter.communicate()
        spec_before = get_json(widgets, "widget", "alpha")["spec"]
        set_ready(widgets, "alpha", 2)
        out, err = waiter.communicate(timeout=30)
        assert waiter.returncode == 0, err
        assert "condition met" in out
        assert get_json(widgets, "widget", "alpha")["spec"] == spec_before  # status writes leave spec alone
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait(timeout=5)
    table = widgets.kubectl("get", "widget", "alpha").stdout.splitlines()
    assert table[1].split()[3] == "True"
    # A spec write through the status subresource is ignored.
    widgets.kubectl("patch", "widget", "alpha", "--subresource", "status", "--type", "merge",
                    "-p", '{"spec":{"size":"small"}}')
    assert get_json(widgets, "widget", "alpha")["spec"]["size"] == "large"


def owned_configmap(name, owner_uid, block=True):
    owner = {"apiVersion": "example.modelfleet.io/v1", "kind": "Widget", "name": "beta", "uid": owner_uid}
    if block:
        owner["blockOwnerDeletion"] = True
    return json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": name, "ownerReferences": [owner]}, "data": {"k": "v"}})


def configmap_names(cluster):
    return {i["metadata"]["name"] for i in get_json(cluster, "configmaps")["items"]}


@pytest.mark.parametrize("cascade", ["background", "foreground"])
def test_delete_cascades_along_owner_references(widgets, cascade):
    uid = get_json(widgets, "widget", "beta")["metadata"]["uid"]
    widgets.kubectl("apply", "-f", "-", input=owned_configmap("beta-config", uid))
    widgets.kubectl("create", "configmap", "unrelated", "--from-literal=k=v")
    widgets.kubectl("delete", "widget", "beta", f"--cascade={cascade}", "--timeout=60s")
    assert widgets.kubectl("get", "widget", "beta", check=False).returncode != 0
    if cascade == "foreground":
        # The owner is gone only once the garbage collector has deleted its blocking dependents.
        assert "beta-config" not in configmap_names(widgets)
    else:
        wait_until(lambda: "beta-config" not in configmap_names(widgets), 90, "the garbage collection of beta-config")
    assert "unrelated" in configmap_names(widgets)


def test_delete_with_orphan_keeps_dependents(widgets):
    uid = get_json(widgets, "widget", "beta")["metadata"]["uid"]
    widgets.kubectl("apply", "-f", "-", input=owned_configmap("kept", uid, block=False))
    widgets.kubectl("delete", "widget", "beta", "--cascade=orphan", "--timeout=60s")
    assert widgets.kubectl("get", "widget", "beta", check=False).returncode != 0
    kept = get_json(widgets, "configmap", "kept")
    assert "ownerReferences" not in kept["metadata"]


def test_create_namespace_and_delete_it_with_its_contents(module_cluster):  # noqa: F811
    name = namespace_for("ml")
    module_cluster.kubectl("create", "namespace", name)
    ns = get_json(module_cluster, "namespace", name)
    assert ns["status"]["phase"] == "Active"
    assert ns["metadata"]["labels"]["kubernetes.io/metadata.name"] == name  # set by the API server
    again = module_cluster.kubectl("create", "namespace", name, check=False)
    assert again.returncode != 0 and "already exists" in again.stderr
    module_cluster.kubectl("create", "configmap", "c", "-n", name, "--from-literal=a=b")
    # kubectl waits until the namespace controller has emptied the namespace and it is gone.
    module_cluster.kubectl("delete", "namespace", name, "--timeout=60s")
    assert module_cluster.kubectl("get", "namespace", name, check=False).returncode != 0
    refused = module_cluster.kubectl("create", "configmap", "d", "-n", name, check=False)
    assert refused.returncode != 0 and "not found" in refused.stderr


def test_explain_reads_the_crd_schema(widget_crd):
    # kube-apiserver publishes a new CRD's schema in its OpenAPI a little after it is established.
    def published():
        try:
            with widget_crd.urlopen("/openapi/v3/apis/example.modelfleet.io/v1") as r:
                return "io.modelfleet.example.v1.Widget" in json.load(r)["components"]["schemas"]
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
            return False
    wait_until(published, 30, "the Widget schema in /openapi/v3")
    out = widget_crd.kubectl("explain", "widgets.spec").stdout
    assert "KIND:       Widget" in out and "GROUP:      example.modelfleet.io" in out, out
    assert "How big the widget is." in out
    assert "size\t<string> -required-" in out and "enum: small, medium, large" in out, out
    assert "labels" in widget_crd.kubectl("explain", "widgets.metadata").stdout



def test_explain_reads_built_in_kinds_from_the_servers_openapi(module_cluster):  # noqa: F811
    out = module_cluster.kubectl("explain", "deployment.spec").stdout
    assert "GROUP:      apps" in out and "KIND:       Deployment" in out, out
    for field in ("replicas", "selector", "template", "strategy", "revisionHistoryLimit"):
        assert f"  {field}\t" in out, (field, out)
    assert "Number of desired pods." in out
    assert "selector\t<LabelSelector> -required-" in out, out
    containers = module_cluster.kubectl("explain", "pod.spec.containers").stdout
    assert "FIELD: containers <[]Container>" in containers and "name\t<string> -required-" in containers, containers
    probe = module_cluster.kubectl("explain", "pod.spec.containers.readinessProbe.httpGet").stdout
    assert "port\t<IntOrString> -required-" in probe and "Name or number of the port" in probe, probe


def test_server_side_apply_conflicts_then_forces(widgets):
    doc = """
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: delta}
spec: {size: small, replicas: 4}
"""
    widgets.kubectl("apply", "--server-side", "--field-manager=first", "-f", "-", input=doc)
    conflict = widgets.kubectl("apply", "--server-side", "--field-manager=second", "-f", "-", check=False,
                               input=doc.replace("replicas: 4", "replicas: 6"))
    assert conflict.returncode != 0 and "conflict" in conflict.stderr.lower(), conflict.stderr
    assert '.spec.replicas' in conflict.stderr and '"first"' in conflict.stderr, conflict.stderr
    assert get_json(widgets, "widget", "delta")["spec"]["replicas"] == 4
    widgets.kubectl("apply", "--server-side", "--field-manager=second", "--force-conflicts", "-f", "-",
                    input=doc.replace("replicas: 4", "replicas: 6"))
    delta = get_json(widgets, "widget", "delta", "--show-managed-fields")
    assert delta["spec"]["replicas"] == 6
    owners = {m["manager"]: m["fieldsV1"]["f:spec"] for m in delta["metadata"]["managedFields"]}
    assert "f:replicas" in owners["second"] and "f:replicas" not in owners["first"], owners
    assert "f:size" in owners["first"], owners


def test_unknown_fields_are_rejected_under_strict_validation(widgets):
    doc = """
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: typo}
spec: {size: small, colour: red}
"""
    strict = widgets.kubectl("apply", "-f", "-", input=doc, check=False)
    assert strict.returncode != 0 and 'unknown field "spec.colour"' in strict.stderr, strict.stderr
    assert "strict decoding error" in strict.stderr
    assert widgets.kubectl("get", "widget", "typo", check=False).returncode != 0
    warned = widgets.kubectl("apply", "--validate=warn", "-f", "-", input=doc)
    assert 'unknown field "spec.colour"' in warned.stderr, warned.stderr
    assert "colour" not in get_json(widgets, "widget", "typo")["spec"]


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 0
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: python:3
        command: [python3, -m, http.server]
%s
"""


def test_strict_field_validation_of_built_in_kinds(namespaced):  # noqa: F811
    cluster = namespaced
    doc = DEPLOYMENT % "        imagePullPolicyy: Always"
    strict = cluster.kubectl("apply", "--validate=strict", "-f", "-", input=doc, check=False)
    assert strict.returncode != 0
    assert ('Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
            'unknown field "spec.template.spec.containers[0].imagePullPolicyy"') in strict.stderr, strict.stderr
    assert cluster.kubectl("get", "deployment", "web", check=False).returncode != 0  # nothing stored

    warned = cluster.kubectl("apply", "--validate=warn", "-f", "-", input=doc)
    assert 'unknown field "spec.template.spec.containers[0].imagePullPolicyy"' in warned.stderr, warned.stderr
    container = get_json(cluster, "deployment", "web")["spec"]["template"]["spec"]["containers"][0]
    assert "imagePullPolicyy" not in container and container["image"] == "python:3"

    # An update through kubectl apply's patch is checked the same way, and changes nothing.
    generation = get_json(cluster, "deployment", "web")["metadata"]["generation"]
    patched = cluster.kubectl("apply", "-f", "-", input=DEPLOYMENT % "        tty: true\n      bogus: 1", check=False)
    assert patched.returncode != 0 and 'unknown field "spec.template.spec.bogus"' in patched.stderr, patched.stderr
    after = get_json(cluster, "deployment", "web")
    assert after["metadata"]["generation"] == generation and "tty" not in after["spec"]["template"]["spec"]["containers"][0]


def test_kubectl_create_commands_for_built_in_kinds(namespaced):  # noqa: F811
    cluster = namespaced
    cluster.kubectl("create", "deployment", "web", "--image=nginx:1", "--replicas=0", "--port=8080")
    cluster.kubectl("create", "service", "clusterip", "web", "--tcp=80:8080")
    cluster.kubectl("create", "secret", "generic", "s", "--from-literal=password=hunter2")
    cluster.kubectl("create", "role", "reader", "--verb=get,list", "--resource=pods")
    deployment = get_json(cluster, "deployment", "web")
    assert deployment["spec"]["replicas"] == 0  # an explicit zero is kept, not defaulted to 1
    assert deployment["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert (container["name"], container["image"], container["ports"]) == (
        "nginx", "nginx:1", [{"containerPort": 8080, "protocol": "TCP"}])
    assert container["imagePullPolicy"] == "IfNotPresent"  # defaulted by the API server
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    service = get_json(cluster, "service", "web")
    assert service["spec"]["ports"] == [{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}]
    assert service["spec"]["clusterIP"].startswith("10.96.")
    assert get_json(cluster, "secret", "s")["data"] == {"password": "aHVudGVyMg=="}
    assert get_json(cluster, "role", "reader")["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]
    # The deployment controller acts on it: a ReplicaSet with zero replicas appears.
    wait_until(lambda: get_json(cluster, "replicasets", "-l", "app=web")["items"], 60, "the web ReplicaSet")
    assert get_json(cluster, "replicasets", "-l", "app=web")["items"][0]["spec"]["replicas"] == 0


GIZMOS_CRD = "gizmos.example.modelfleet.io"


def gizmo_crd(enum="enum: [small, medium, large]"):
    """The widgets CRD renamed Gizmo: a CRD this test may change and delete without touching the
    module's widgets."""
    text = (DATA / "widgets_crd.yaml").read_text()
    for old, new in (("widgets", "gizmos"), ("widget", "gizmo"), ("WidgetList", "GizmoList"), ("Widget", "Gizmo"),
                     ("[wd]", "[gz]"), ("enum: [small, medium, large]", enum)):
        text = text.replace(old, new)
    return text


def test_crd_update_changes_validation_and_crd_delete_removes_its_objects(namespaced):  # noqa: F811
    cluster = namespaced
    cluster.kubectl("apply", "-f", "-", input=gizmo_crd())
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{GIZMOS_CRD}", "--timeout=30s")
    cluster.kubectl("apply", "-f", "-", input=(DATA / "widgets.yaml").read_text().replace("Widget", "Gizmo"))
    assert cluster.kubectl("patch", "gizmo", "alpha", "--type", "merge", "-p", '{"spec":{"size":"huge"}}',
                           check=False).returncode != 0
    cluster.kubectl("apply", "-f", "-", input=gizmo_crd("enum: [small, medium, large, huge]"))

    def huge_accepted():
        return cluster.kubectl("patch", "gizmo", "alpha", "--type", "merge", "-p", '{"spec":{"size":"huge"}}',
                               check=False).returncode == 0
    wait_until(huge_accepted, 30, "the updated schema taking effect")
    assert get_json(cluster, "gizmo", "alpha")["spec"]["size"] == "huge"

    cluster.kubectl("delete", "crd", GIZMOS_CRD, "--timeout=60s")
    gone = cluster.kubectl("get", "gizmos", check=False)
    # kubectl may still have the resource in its discovery cache; either way the server says no.
    assert gone.returncode != 0
    assert ("doesn't have a resource type" in gone.stderr or "could not find the requested resource" in gone.stderr
            or "NotFound" in gone.stderr), gone.stderr
    # Re-creating the CRD serves an empty collection: deleting it deleted its objects.
    cluster.kubectl("apply", "-f", "-", input=gizmo_crd())
    cluster.kubectl("wait", "--for=condition=Established", f"crd/{GIZMOS_CRD}", "--timeout=30s")
    assert get_json(cluster, "gizmos")["items"] == []
    cluster.kubectl("delete", "crd", GIZMOS_CRD, "--wait=false")


def test_server_dry_run_and_diff_store_nothing(widgets):
    rv = get_json(widgets, "widget", "alpha")["metadata"]["resourceVersion"]
    out = widgets.kubectl("patch", "widget", "alpha", "--type", "merge", "-p", '{"spec":{"size":"large"}}',
                          "--dry-run=server", "-o", "json").stdout
    assert json.loads(out)["spec"]["size"] == "large"
    widgets.kubectl("delete", "widget", "alpha", "--dry-run=server")
    created = widgets.kubectl("apply", "--dry-run=server", "-f", "-", input="""
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: ghost}
spec: {size: small}
""")
    assert "created (server dry run)" in created.stdout, created.stdout
    # A dry run is validated like the real thing.
    invalid = widgets.kubectl("apply", "--dry-run=server", "-f", "-", check=False, input="""
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: ghost}
spec: {size: tiny}
""")
    assert invalid.returncode != 0 and 'Unsupported value: "tiny"' in invalid.stderr, invalid.stderr
    diff = widgets.kubectl("diff", "-f", "-", check=False, input="""
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: alpha}
spec: {size: medium}
""")
    assert diff.returncode == 1, diff.stderr  # 1: differences found
    assert "+  size: medium" in diff.stdout and "-  size: small" in diff.stdout, diff.stdout
    same = widgets.kubectl("diff", "-f", "-", check=False, input="""
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: alpha}
spec: {size: small}
""")
    assert same.returncode == 0 and same.stdout == "", (same.stdout, same.stderr)
    alpha = get_json(widgets, "widget", "alpha")
    assert alpha["metadata"]["resourceVersion"] == rv and alpha["spec"]["size"] == "small"
    assert widgets.kubectl("get", "widget", "ghost", check=False).returncode != 0


def test_get_in_chunks_pages_through_everything(namespaced):  # noqa: F811
    cluster = namespaced
    names = [f"cm{i:02d}" for i in range(11)]
    for name in names:
        cluster.kubectl("create", "configmap", name)
    # Every namespace holds the root CA's configmap (the root-ca-cert-publisher controller's).
    wait_until(lambda: "kube-root-ca.crt" in configmap_names(cluster), 30, "kube-root-ca.crt")
    expected = sorted(names + ["kube-root-ca.crt"])
    # -v=6 logs each request: kubectl follows the continue tokens until the list is complete.
    listed = cluster.kubectl("get", "configmaps", "--chunk-size=3", "-o", "name", "-v=6")
    assert listed.stdout.split() == [f"configmap/{n}" for n in expected]
    requests = [line for line in listed.stderr.splitlines() if "/configmaps?" in line and "limit=3" in line]
    assert len(requests) == 4, listed.stderr  # 12 objects, 3 a page
    assert sum("continue=" in line for line in requests) == 3, requests
    table = cluster.kubectl("get", "configmaps", "--chunk-size=4")
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["NAME", "DATA", "AGE"]
    assert [line.split()[0] for line in lines[1:]] == expected  # one header, however many pages
