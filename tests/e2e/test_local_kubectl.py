"""kubectl 1.32 against modelfleet-local: CRDs and custom resources, printer columns, patch,
scale, wait, cascading delete, protobuf create, explain."""
import json
import time

import pytest

from local_fixtures import DATA, local_cluster, widgets  # noqa: F401  (fixtures)


def get_json(cluster, *args):
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def test_version_reports_kubernetes_1_32(local_cluster):
    out = local_cluster.kubectl("version", "-o", "json").stdout
    assert json.loads(out)["serverVersion"]["gitVersion"].startswith("v1.32.")


def test_get_shows_crd_printer_columns_and_defaults(widgets):
    out = widgets.kubectl("get", "widgets").stdout.splitlines()
    assert out[0].split() == ["NAME", "SIZE", "REPLICAS", "READY", "AGE"]
    rows = {line.split()[0]: line.split() for line in out[1:]}
    assert rows["alpha"][1:3] == ["small", "1"]  # replicas defaulted by the schema
    assert rows["beta"][1:3] == ["large", "3"]
    alpha = get_json(widgets, "wd", "alpha")
    assert alpha["spec"]["color"] == "blue"
    assert alpha["metadata"]["generation"] == 1


def test_invalid_custom_resource_is_rejected_with_the_schema_errors(widgets):
    bad = widgets.kubectl("apply", "-f", "-", check=False, input="""
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: gamma}
spec: {size: enormous, replicas: -2}
""")
    assert bad.returncode != 0
    assert 'The Widget "gamma" is invalid' in bad.stderr
    assert "spec.size" in bad.stderr and "spec.replicas" in bad.stderr
    assert widgets.kubectl("get", "widget", "gamma", check=False).returncode != 0


def test_patch_merge_and_json_and_a_bad_patch_changes_nothing(widgets):
    widgets.kubectl("patch", "widget", "alpha", "--type", "merge", "-p", '{"spec":{"size":"medium"}}')
    widgets.kubectl("patch", "widget", "alpha", "--type", "json",
                    "-p", '[{"op":"replace","path":"/spec/color","value":"red"}]')
    alpha = get_json(widgets, "widget", "alpha")
    assert (alpha["spec"]["size"], alpha["spec"]["color"]) == ("medium", "red")
    assert alpha["metadata"]["generation"] == 3
    rv = alpha["metadata"]["resourceVersion"]

    bad = widgets.kubectl("patch", "widget", "alpha", "--type", "json",
                          "-p", '[{"op":"test","path":"/spec/size","value":"small"}]', check=False)
    assert bad.returncode != 0
    invalid = widgets.kubectl("patch", "widget", "alpha", "--type", "merge", "-p", '{"spec":{"size":"huge"}}', check=False)
    assert invalid.returncode != 0 and "Unsupported value" in invalid.stderr
    assert get_json(widgets, "widget", "alpha")["metadata"]["resourceVersion"] == rv


def test_scale_uses_the_scale_subresource(widgets):
    widgets.kubectl("scale", "widget", "beta", "--replicas", "5")
    beta = get_json(widgets, "widget", "beta")
    assert beta["spec"]["replicas"] == 5
    assert beta["metadata"]["generation"] == 2
    assert widgets.kubectl("scale", "widget", "beta", "--replicas", "-1", check=False).returncode != 0


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


@pytest.mark.parametrize("cascade", ["background", "foreground"])
def test_delete_cascades_along_owner_references(widgets, cascade):
    uid = get_json(widgets, "widget", "beta")["metadata"]["uid"]
    owned = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "beta-config", "ownerReferences": [
                 {"apiVersion": "example.modelfleet.io/v1", "kind": "Widget", "name": "beta", "uid": uid,
                  "blockOwnerDeletion": True}]},
             "data": {"k": "v"}}
    widgets.kubectl("apply", "-f", "-", input=json.dumps(owned))
    widgets.kubectl("create", "configmap", "unrelated", "--from-literal=k=v")
    widgets.kubectl("delete", "widget", "beta", f"--cascade={cascade}", "--timeout=30s")
    assert widgets.kubectl("get", "widget", "beta", check=False).returncode != 0
    names = [i["metadata"]["name"] for i in get_json(widgets, "configmaps")["items"]]
    assert "beta-config" not in names
    assert "unrelated" in names


def test_delete_with_orphan_keeps_dependents(widgets):
    uid = get_json(widgets, "widget", "beta")["metadata"]["uid"]
    owned = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "kept", "ownerReferences": [
                 {"apiVersion": "example.modelfleet.io/v1", "kind": "Widget", "name": "beta", "uid": uid}]}}
    widgets.kubectl("apply", "-f", "-", input=json.dumps(owned))
    widgets.kubectl("delete", "widget", "beta", "--cascade=orphan")
    kept = get_json(widgets, "configmap", "kept")
    assert "ownerReferences" not in kept["metadata"]


def test_create_namespace_sends_protobuf_and_works(local_cluster):
    local_cluster.kubectl("create", "namespace", "ml")
    ns = get_json(local_cluster, "namespace", "ml")
    assert ns["status"]["phase"] == "Active"
    again = local_cluster.kubectl("create", "namespace", "ml", check=False)
    assert again.returncode != 0 and "already exists" in again.stderr
    local_cluster.kubectl("create", "configmap", "c", "-n", "ml", "--from-literal=a=b")
    local_cluster.kubectl("delete", "namespace", "ml", "--timeout=30s")
    assert local_cluster.kubectl("get", "namespace", "ml", check=False).returncode != 0


def test_explain_reads_the_crd_schema(widgets):
    out = widgets.kubectl("explain", "widgets.spec").stdout
    assert "KIND:       Widget" in out or "KIND:     Widget" in out
    assert "How big the widget is." in out
    assert "size" in out and "-required-" in out
    assert "labels" in widgets.kubectl("explain", "widgets.metadata").stdout


def test_server_side_apply_conflicts_then_forces(widgets):
    doc = """
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: alpha}
spec: {size: small, replicas: 4}
"""
    widgets.kubectl("apply", "--server-side", "--field-manager=first", "-f", "-", input=doc)
    conflict = widgets.kubectl("apply", "--server-side", "--field-manager=second", "-f", "-", check=False,
                               input=doc.replace("replicas: 4", "replicas: 6"))
    assert conflict.returncode != 0 and "conflict" in conflict.stderr.lower()
    assert get_json(widgets, "widget", "alpha")["spec"]["replicas"] == 4
    widgets.kubectl("apply", "--server-side", "--field-manager=second", "--force-conflicts", "-f", "-",
                    input=doc.replace("replicas: 4", "replicas: 6"))
    assert get_json(widgets, "widget", "alpha")["spec"]["replicas"] == 6


def test_unknown_fields_are_rejected_under_strict_validation(widgets):
    doc = """
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: typo}
spec: {size: small, colour: red}
"""
    strict = widgets.kubectl("apply", "-f", "-", input=doc, check=False)
    assert strict.returncode != 0 and 'unknown field "spec.colour"' in strict.stderr
    assert widgets.kubectl("get", "widget", "typo", check=False).returncode != 0
    warned = widgets.kubectl("apply", "--validate=warn", "-f", "-", input=doc)
    assert 'unknown field' in warned.stderr
    assert "colour" not in get_json(widgets, "widget", "typo")["spec"]


def test_kubectl_create_commands_that_send_protobuf(local_cluster):
    local_cluster.kubectl("create", "deployment", "web", "--image=nginx:1", "--replicas=0", "--port=8080")
    local_cluster.kubectl("create", "service", "clusterip", "web", "--tcp=80:8080")
    local_cluster.kubectl("create", "secret", "generic", "s", "--from-literal=password=hunter2")
    local_cluster.kubectl("create", "role", "reader", "--verb=get,list", "--resource=pods")
    deployment = get_json(local_cluster, "deployment", "web")
    assert deployment["spec"]["replicas"] == 0  # an explicit zero survives, unset scalars do not appear
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container == {"name": "nginx", "image": "nginx:1", "ports": [{"containerPort": 8080}], "resources": {}}
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    service = get_json(local_cluster, "service", "web")
    assert service["spec"]["ports"] == [{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}]
    assert get_json(local_cluster, "secret", "s")["data"] == {"password": "aHVudGVyMg=="}
    assert get_json(local_cluster, "role", "reader")["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]


def test_crd_update_changes_validation_and_crd_delete_removes_its_objects(widgets):
    crd = (DATA / "widgets_crd.yaml").read_text().replace("enum: [small, medium, large]", "enum: [small, medium, large, huge]")
    assert widgets.kubectl("patch", "widget", "alpha", "--type", "merge", "-p", '{"spec":{"size":"huge"}}',
                           check=False).returncode != 0
    widgets.kubectl("apply", "-f", "-", input=crd)
    widgets.kubectl("patch", "widget", "alpha", "--type", "merge", "-p", '{"spec":{"size":"huge"}}')
    assert get_json(widgets, "widget", "alpha")["spec"]["size"] == "huge"
    widgets.kubectl("delete", "crd", "widgets.example.modelfleet.io", "--timeout=30s")
    gone = widgets.kubectl("get", "widgets", check=False)
    # kubectl may still have the resource in its discovery cache; either way the server says no.
    assert gone.returncode != 0
    assert "doesn't have a resource type" in gone.stderr or "could not find the requested resource" in gone.stderr
    # Re-creating the CRD serves an empty collection: deleting it deleted its objects.
    widgets.kubectl("apply", "-f", str(DATA / "widgets_crd.yaml"))
    widgets.kubectl("wait", "--for=condition=Established", "crd/widgets.example.modelfleet.io", "--timeout=20s")
    assert get_json(widgets, "widgets")["items"] == []


def test_server_dry_run_and_diff_store_nothing(widgets):
    rv = get_json(widgets, "widget", "alpha")["metadata"]["resourceVersion"]
    out = widgets.kubectl("patch", "widget", "alpha", "--type", "merge", "-p", '{"spec":{"size":"large"}}',
                          "--dry-run=server", "-o", "json").stdout
    assert json.loads(out)["spec"]["size"] == "large"
    widgets.kubectl("delete", "widget", "alpha", "--dry-run=server")
    widgets.kubectl("apply", "--dry-run=server", "-f", "-", input="""
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: ghost}
spec: {size: small}
""")
    diff = widgets.kubectl("diff", "-f", "-", check=False, input="""
apiVersion: example.modelfleet.io/v1
kind: Widget
metadata: {name: alpha}
spec: {size: medium}
""")
    assert diff.returncode == 1, diff.stderr  # 1: differences found
    assert "+  size: medium" in diff.stdout
    alpha = get_json(widgets, "widget", "alpha")
    assert alpha["metadata"]["resourceVersion"] == rv and alpha["spec"]["size"] == "small"
    assert widgets.kubectl("get", "widget", "ghost", check=False).returncode != 0


def test_get_in_chunks_pages_through_everything(local_cluster):
    names = [f"cm{i:02d}" for i in range(11)]
    for name in names:
        local_cluster.kubectl("create", "configmap", name)
    # -v=6 logs each request: kubectl follows the continue tokens until the list is complete.
    listed = local_cluster.kubectl("get", "configmaps", "--chunk-size=3", "-o", "name", "-v=6")
    assert listed.stdout.split() == [f"configmap/{n}" for n in names]
    assert listed.stderr.count("limit=3") >= 4 and "continue=" in listed.stderr
    table = local_cluster.kubectl("get", "configmaps", "--chunk-size=4")
    rows = [line.split()[0] for line in table.stdout.splitlines()[1:]]
    assert rows == names  # one header, however many pages
