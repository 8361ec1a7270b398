"""The OpenAPI documents of modelfleet-local: itemized built-in schemas (kubectl explain of
Deployment and Pod fields, strict and warn field validation of built-in kinds with
kube-apiserver's messages) and the Swagger 2.0 document at /openapi/v2."""
import json
import pathlib
import urllib.error
import urllib.request

import pytest

from local_fixtures import DATA, local_cluster  # noqa: F401  (fixtures)

CRDS = pathlib.Path(__file__).resolve().parents[2] / "crds"

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 1
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


def test_explain_shows_deployment_spec_fields(local_cluster):
    out = local_cluster.kubectl("explain", "deployment.spec").stdout
    assert "GROUP:      apps" in out and "KIND:       Deployment" in out, out
    for field in ("replicas", "selector", "template", "strategy", "revisionHistoryLimit"):
        assert f"  {field}\t" in out, (field, out)
    assert "Number of desired pods." in out
    assert "-required-" in out  # selector and template are required


def test_explain_follows_references_into_pod_containers(local_cluster):
    out = local_cluster.kubectl("explain", "pod.spec.containers").stdout
    assert "KIND:       Pod" in out and "FIELD: containers <[]Container>" in out, out
    assert "name\t<string> -required-" in out, out
    for field in ("image", "readinessProbe", "resources", "volumeMounts"):
        assert f"  {field}\t" in out, (field, out)
    probe = local_cluster.kubectl("explain", "pod.spec.containers.readinessProbe.httpGet").stdout
    # The IntOrString reference resolves (kubectl shows the referenced schema's type).
    assert "port\t<string> -required-" in probe and "Name or number of the port" in probe, probe
    # A field newer than the generator's Python client comes from its supplement.
    assert "grpc\t<GRPCAction>" in local_cluster.kubectl("explain", "pod.spec.containers.livenessProbe").stdout


def test_strict_validation_rejects_an_unknown_deployment_field(local_cluster):
    doc = DEPLOYMENT % "        imagePullPolicyy: Always"
    strict = local_cluster.kubectl("apply", "--validate=strict", "-f", "-", input=doc, check=False)
    assert strict.returncode != 0
    assert ('Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: '
            'unknown field "spec.template.spec.containers[0].imagePullPolicyy"') in strict.stderr, strict.stderr
    assert local_cluster.kubectl("get", "deployment", "web", check=False).returncode != 0  # nothing stored

    warned = local_cluster.kubectl("apply", "--validate=warn", "-f", "-", input=doc)
    assert 'unknown field "spec.template.spec.containers[0].imagePullPolicyy"' in warned.stderr, warned.stderr
    stored = json.loads(local_cluster.kubectl("get", "deployment", "web", "-o", "json").stdout)
    container = stored["spec"]["template"]["spec"]["containers"][0]
    assert "imagePullPolicyy" not in container and container["image"] == "python:3"

    # An update through kubectl apply's patch is checked the same way.
    patched = local_cluster.kubectl("apply", "-f", "-", input=DEPLOYMENT % "        tty: true\n      bogus: 1",
                                    check=False)
    assert patched.returncode != 0 and 'unknown field "spec.template.spec.bogus"' in patched.stderr, patched.stderr


def test_valid_built_in_objects_pass_strict_validation(local_cluster):
    local_cluster.kubectl("apply", "--validate=strict", "-f", "-", input=DEPLOYMENT % (
        "        ports: [{containerPort: 8000}]\n"
        "        resources: {limits: {cpu: 1, memory: 64Mi}}\n"
        "        readinessProbe: {httpGet: {path: /, port: 8000}}\n"
        "        livenessProbe: {grpc: {port: 8000}}"))
    local_cluster.kubectl("create", "configmap", "settings", "--from-literal=a=b")
    local_cluster.kubectl("apply", "--validate=strict", "-f", str(DATA / "widgets_crd.yaml"))
    # The project's CRDs use fields newer than the generator's client (x-kubernetes-validations).
    for crd in sorted(CRDS.glob("*.yaml")):
        local_cluster.kubectl("apply", "--validate=strict", "-f", str(crd))


def test_openapi_v2_is_swagger_2_with_the_served_kinds(local_cluster):
    with local_cluster.urlopen(urllib.request.Request(local_cluster.url + "/openapi/v2",
                                                      headers={"Accept": "application/json"})) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("application/json")
        doc = json.load(r)
    assert doc["swagger"] == "2.0"
    definitions = doc["definitions"]
    deployment = definitions["io.k8s.api.apps.v1.Deployment"]
    assert deployment["x-kubernetes-group-version-kind"] == [{"group": "apps", "kind": "Deployment", "version": "v1"}]
    assert deployment["properties"]["spec"]["$ref"] == "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
    # Every reference resolves within the document.
    refs = set()

    def collect(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$ref" and isinstance(value, str):
                    refs.add(value)
                else:
                    collect(value)
        elif isinstance(node, list):
            for item in node:
                collect(item)
    collect(doc)
    assert refs and all(ref.startswith("#/definitions/") and ref[len("#/definitions/"):] in definitions for ref in refs)
    path = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]
    assert set(path) >= {"get", "put", "patch", "delete", "parameters"}
    assert path["patch"]["x-kubernetes-action"] == "patch"
    assert path["put"]["x-kubernetes-group-version-kind"]["kind"] == "Deployment"
    assert any(p["name"] == "fieldValidation" for p in path["patch"]["parameters"])
    assert doc["paths"]["/api/v1/namespaces/{namespace}/pods"]["post"]["x-kubernetes-action"] == "post"


def test_openapi_v2_includes_custom_resources(local_cluster):
    local_cluster.kubectl("apply", "-f", str(DATA / "widgets_crd.yaml"))
    local_cluster.kubectl("wait", "--for=condition=Established", "crd/widgets.example.modelfleet.io", "--timeout=20s")
    with local_cluster.urlopen("/openapi/v2") as r:
        doc = json.load(r)
    widget = [d for d in doc["definitions"].values()
              if {"group": "example.modelfleet.io", "kind": "Widget", "version": "v1"} in d.get("x-kubernetes-group-version-kind", [])]
    assert len(widget) == 1 and "spec" in widget[0]["properties"]
    assert widget[0]["properties"]["metadata"]["$ref"] == "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"


@pytest.mark.parametrize("accept", ["application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
                                    "application/json;q=0, application/vnd.kubernetes.protobuf"])
def test_openapi_v2_refuses_protobuf_only(local_cluster, accept):
    request = urllib.request.Request(local_cluster.url + "/openapi/v2", headers={"Accept": accept})
    with pytest.raises(urllib.error.HTTPError) as err:
        local_cluster.urlopen(request)
    assert err.value.code == 406
    assert json.load(err.value)["reason"] == "NotAcceptable"


def test_openapi_v3_group_documents_carry_built_in_schemas(local_cluster):
    with local_cluster.urlopen("/openapi/v3/apis/apps/v1") as r:
        doc = json.load(r)
    schemas = doc["components"]["schemas"]
    assert "io.k8s.api.core.v1.PodSpec" in schemas and "io.k8s.api.apps.v1.DeploymentSpec" in schemas
    assert "io.k8s.api.rbac.v1.Role" not in schemas  # only what the group-version references
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert any(p["name"] == "fieldValidation" for p in patch["parameters"])
