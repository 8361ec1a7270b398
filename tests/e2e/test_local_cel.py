"""CRD validation rules (x-kubernetes-validations, CEL) in modelfleet-local: kubectl applying our
own CRDs from crds/ and custom resources that break their rules gets kube-apiserver's 422
Invalid, on create, update, patch, server-side apply and the status subresource, and nothing is
stored; transition rules (oldSelf) run on update only; a CRD whose rule does not parse is
refused."""
import json
import pathlib
import urllib.error
import urllib.request

import pytest

from local_fixtures import local_cluster  # noqa: F401  (fixture)

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"


@pytest.fixture
def fleet(local_cluster):  # noqa: F811
    """The cluster with ModelFleet's CRDs applied and established."""
    for crd in sorted(CRDS.glob("*.yaml")):
        local_cluster.kubectl("apply", "-f", str(crd))
    for name in ("modeldeployments.modelfleet.io", "trainingjobs.modelfleet.io"):
        local_cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=20s")
    return local_cluster


def model_deployment(name, traffic):
    return {
        "apiVersion": "modelfleet.io/v1alpha1", "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"versions": [{"name": "v1", "storageUri": "file:///models/m/1"},
                              {"name": "v2", "storageUri": "file:///models/m/2"}],
                 "traffic": traffic},
    }


def training_job(name, chiefs):
    template = {"spec": {"containers": [{"name": "train", "image": "python:3.11"}]}}
    return {
        "apiVersion": "modelfleet.io/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"framework": "tensorflow",
                 "replicaSpecs": {"Chief": {"replicas": chiefs, "template": template},
                                  "Worker": {"replicas": 2, "template": template}}},
    }


def test_traffic_not_summing_to_100_is_refused(fleet):
    bad = fleet.kubectl("apply", "-f", "-", input=json.dumps(model_deployment("split", {"v1": 80, "v2": 10})), check=False)
    assert bad.returncode != 0
    assert ('The ModelDeployment "split" is invalid: spec: Invalid value: "object": '
            'spec.traffic percentages must sum to 100') in bad.stderr, bad.stderr
    assert fleet.kubectl("get", "modeldeployment", "split", check=False).returncode != 0
    unknown = fleet.kubectl("create", "-f", "-", input=json.dumps(model_deployment("split", {"v1": 90, "v3": 10})), check=False)
    assert "every key of spec.traffic must name an entry of spec.versions" in unknown.stderr, unknown.stderr
    # The example from the docs is valid.
    fleet.kubectl("apply", "-f", str(ROOT / "examples" / "k8s" / "modeldeployment-mnist.yaml"))


def test_two_chiefs_are_refused(fleet):
    bad = fleet.kubectl("apply", "-f", "-", input=json.dumps(training_job("two-chiefs", 2)), check=False)
    assert bad.returncode != 0
    assert ('The TrainingJob "two-chiefs" is invalid: spec: Invalid value: "object": '
            'a TrainingJob has at most one Chief') in bad.stderr, bad.stderr
    assert fleet.kubectl("get", "trainingjob", "two-chiefs", check=False).returncode != 0
    fleet.kubectl("apply", "-f", str(ROOT / "examples" / "k8s" / "trainingjob-digits.yaml"))


def test_patch_update_and_server_side_apply_are_checked_and_change_nothing(fleet):
    fleet.kubectl("apply", "-f", "-", input=json.dumps(model_deployment("canary", {"v1": 90, "v2": 10})))
    patch = fleet.kubectl("patch", "modeldeployment", "canary", "--type", "merge",
                          "-p", '{"spec":{"traffic":{"v2":20}}}', check=False)
    assert "spec.traffic percentages must sum to 100" in patch.stderr, patch.stderr
    ssa = fleet.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                        input=json.dumps(model_deployment("canary", {"v1": 50, "v2": 10})), check=False)
    assert "spec.traffic percentages must sum to 100" in ssa.stderr, ssa.stderr
    stored = json.loads(fleet.kubectl("get", "modeldeployment", "canary", "-o", "json").stdout)
    assert stored["spec"]["traffic"] == {"v1": 90, "v2": 10}
    fleet.kubectl("patch", "modeldeployment", "canary", "--type", "merge", "-p", '{"spec":{"traffic":{"v1":80,"v2":20}}}')


def test_invalid_status_is_kube_apiservers_422_with_causes(fleet):
    body = json.dumps(training_job("raw", 3)).encode()
    request = urllib.request.Request(fleet.url + "/apis/modelfleet.io/v1alpha1/namespaces/default/trainingjobs",
                                     data=body, method="POST", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as error:
        fleet.urlopen(request)
    assert error.value.code == 422
    status = json.loads(error.value.read())
    assert status["reason"] == "Invalid"
    assert status["message"] == ('TrainingJob.modelfleet.io "raw" is invalid: spec: Invalid value: "object": '
                                 'a TrainingJob has at most one Chief')
    assert status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "object": a TrainingJob has at most one Chief',
         "field": "spec"}]


GADGETS_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.modelfleet.io}
spec:
  group: example.modelfleet.io
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              mode:
                type: string
                x-kubernetes-validations:
                - {rule: "self == oldSelf", message: "mode is immutable"}
              sizes:
                type: array
                items: {type: integer}
                x-kubernetes-validations:
                - rule: "self.isSorted() && self.all(s, s % 2 == 0)"
          status:
            type: object
            x-kubernetes-validations:
            - {rule: "self.ready <= self.total", message: "ready cannot exceed total"}
            properties:
              ready: {type: integer}
              total: {type: integer}
"""


def test_transition_status_and_uncompilable_rules(local_cluster):  # noqa: F811
    cluster = local_cluster
    broken = GADGETS_CRD.replace('"self == oldSelf"', '"self == "')
    refused = cluster.kubectl("apply", "-f", "-", input=broken, check=False)
    assert refused.returncode != 0
    assert "x-kubernetes-validations[0].rule: Invalid value" in refused.stderr, refused.stderr
    assert "compilation failed" in refused.stderr, refused.stderr

    cluster.kubectl("apply", "-f", "-", input=GADGETS_CRD)
    cluster.kubectl("wait", "--for=condition=Established", "crd/gadgets.example.modelfleet.io", "--timeout=20s")
    gadget = {"apiVersion": "example.modelfleet.io/v1", "kind": "Gadget", "metadata": {"name": "g"},
              "spec": {"mode": "fast", "sizes": [2, 4]}}
    cluster.kubectl("create", "-f", "-", input=json.dumps(gadget))  # transition rules do not run on create

    unsorted = cluster.kubectl("patch", "gadget", "g", "--type", "merge", "-p", '{"spec":{"sizes":[4,2]}}', check=False)
    assert ('spec.sizes: Invalid value: "array": failed rule: self.isSorted() && self.all(s, s % 2 == 0)'
            in unsorted.stderr), unsorted.stderr
    immutable = cluster.kubectl("patch", "gadget", "g", "--type", "merge", "-p", '{"spec":{"mode":"slow"}}', check=False)
    assert 'spec.mode: Invalid value: "string": mode is immutable' in immutable.stderr, immutable.stderr

    status = cluster.kubectl("patch", "gadget", "g", "--subresource", "status", "--type", "merge",
                             "-p", '{"status":{"ready":3,"total":2}}', check=False)
    assert 'status: Invalid value: "object": ready cannot exceed total' in status.stderr, status.stderr
    cluster.kubectl("patch", "gadget", "g", "--subresource", "status", "--type", "merge",
                    "-p", '{"status":{"ready":2,"total":2}}')
    stored = json.loads(cluster.kubectl("get", "gadget", "g", "-o", "json").stdout)
    assert stored["spec"] == {"mode": "fast", "sizes": [2, 4]}
    assert stored["status"] == {"ready": 2, "total": 2}
