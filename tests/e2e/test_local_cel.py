"""ModelFleet's CRDs (crds/) on the real kube-apiserver, which checks their structural schemas,
defaults, and CEL x-kubernetes-validations rules itself: every CRD is accepted and established,
every example in examples/k8s passes a server-side dry run, defaults are filled in, and objects
that break the schema or a rule get the API server's own 422 Invalid (on create, patch, update,
server-side apply and the status subresource) with nothing stored; the printer columns and the
scale subresource work on ModelDeployment, and kubectl explain shows the schemas.

One cluster serves the module; each test works in a namespace of its own."""
import copy
import json
import pathlib
import time
import urllib.error
import urllib.request

import pytest
import yaml

from local_fixtures import module_cluster, namespaced  # noqa: F401  (fixtures)

pytestmark = pytest.mark.go_components

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD_FILES = sorted((ROOT / "crds").glob("*.yaml"))
EXAMPLES = sorted((ROOT / "examples" / "k8s").glob("*.yaml"))
CRD_OF_KIND = {doc["spec"]["names"]["kind"]: doc["metadata"]["name"]
               for doc in (yaml.safe_load(path.read_text()) for path in CRD_FILES)}
MODEL_DEPLOYMENTS = "modeldeployments.modelfleet.io"
TRAINING_JOBS = "trainingjobs.modelfleet.io"


@pytest.fixture(scope="module")
def applied_crds(module_cluster):  # noqa: F811
    """Each CRD in crds/ applied; {CRD name: kubectl's result}. A refused CRD fails the tests that
    need it (see require), not the whole module."""
    results = {}
    for path in CRD_FILES:
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        results[name] = applied = module_cluster.kubectl("apply", "-f", str(path), check=False)
        if applied.returncode == 0:
            module_cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=30s")
    return results


def require(applied_crds, name):
    applied = applied_crds[name]
    if applied.returncode != 0:
        pytest.fail(f"kube-apiserver refused the CRD {name}:\n{applied.stderr}", pytrace=False)


@pytest.fixture
def model_deployments(applied_crds, namespaced):  # noqa: F811
    require(applied_crds, MODEL_DEPLOYMENTS)
    return namespaced


@pytest.fixture
def training_jobs(applied_crds, namespaced):  # noqa: F811
    require(applied_crds, TRAINING_JOBS)
    return namespaced


def get_json(cluster, *args):
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


TEMPLATE = {"spec": {"containers": [{"name": "train", "image": "python:3.11"}]}}


def model_deployment(name="bad", **spec):
    doc = {"apiVersion": "modelfleet.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": name},
           "spec": {"versions": [{"name": "v1", "storageUri": "file:///models/m/1"},
                                 {"name": "v2", "storageUri": "file:///models/m/2"}],
                    "traffic": {"v1": 90, "v2": 10}}}
    doc["spec"].update(copy.deepcopy(spec))
    return doc


def training_job(name="bad", **spec):
    doc = {"apiVersion": "modelfleet.io/v1alpha1", "kind": "TrainingJob", "metadata": {"name": name},
           "spec": {"framework": "tensorflow",
                    "replicaSpecs": {"Chief": {"replicas": 1, "template": TEMPLATE},
                                     "Worker": {"replicas": 2, "template": TEMPLATE}}}}
    doc["spec"].update(copy.deepcopy(spec))
    return doc


def test_every_crd_is_accepted_and_established(module_cluster, applied_crds):  # noqa: F811
    assert set(applied_crds) == {MODEL_DEPLOYMENTS, TRAINING_JOBS}
    refused = {name: r.stderr for name, r in applied_crds.items() if r.returncode != 0}
    assert not refused, "kube-apiserver refused:\n" + "\n".join(f"{n}:\n{e}" for n, e in refused.items())
    for name in applied_crds:
        crd = get_json(module_cluster, "crd", name)
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True" and conditions["NamesAccepted"] == "True", (name, conditions)
        assert "NonStructuralSchema" not in conditions, (name, crd["status"]["conditions"])
    # Both kinds are served (api-resources also refreshes kubectl's discovery cache, which the
    # category below needs) and make up the modelfleet category.
    resources = module_cluster.kubectl("api-resources", "--api-group=modelfleet.io", "-o", "wide").stdout.splitlines()
    rows = {line.split()[0]: line for line in resources[1:]}
    assert sorted(rows) == ["modeldeployments", "trainingjobs"], resources
    assert all("modelfleet" in row.split()[-1] for row in rows.values()), resources  # CATEGORIES
    assert module_cluster.kubectl("get", "modelfleet", "-A").returncode == 0


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_pass_a_server_side_dry_run(module_cluster, applied_crds, path):  # noqa: F811
    example = yaml.safe_load(path.read_text())
    require(applied_crds, CRD_OF_KIND[example["kind"]])
    name = example["metadata"]["name"]
    dry = module_cluster.kubectl("apply", "--dry-run=server", "-f", str(path))
    assert f"{name} created (server dry run)" in dry.stdout, dry.stdout
    # kubectl's strict field validation (the server's) finds no unknown field either.
    module_cluster.kubectl("create", "--dry-run=server", "--validate=strict", "-f", str(path))
    assert module_cluster.kubectl("get", example["kind"].lower(), name, "-n", example["metadata"]["namespace"],
                                  check=False).returncode != 0  # nothing stored


def test_defaults_are_filled_in(model_deployments, training_jobs):
    cluster = model_deployments
    cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "modelfleet.io/v1alpha1", "kind": "ModelDeployment", "metadata": {"name": "minimal"},
        "spec": {"versions": [{"name": "v1", "storageUri": "file:///models/m/1"}],
                 "mirror": {"version": "v1"}, "autoscaling": {"targetPerReplica": 10},
                 "rollout": {"steps": [{"percent": 10}], "analysis": {}}, "server": {"batching": {}},
                 "router": {}}}))
    assert get_json(cluster, "modeldeployment", "minimal")["spec"] == {
        "versions": [{"name": "v1", "storageUri": "file:///models/m/1"}],
        "replicas": 1,
        "mirror": {"version": "v1", "percent": 100},
        "autoscaling": {"targetPerReplica": 10, "metric": "qps", "minReplicas": 1, "maxReplicas": 10,
                        "scaleDownStabilizationSeconds": 300},
        "rollout": {"steps": [{"percent": 10}], "analysis": {"intervalSeconds": 30, "minRequests": 100}},
        "server": {"batching": {"maxBatchSize": 32, "batchTimeoutMicros": 1000, "numBatchThreads": 2,
                                "maxEnqueuedBatches": 100}},
        "router": {"replicas": 2, "serviceType": "ClusterIP"}}
    cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "modelfleet.io/v1alpha1", "kind": "TrainingJob", "metadata": {"name": "minimal"},
        "spec": {"replicaSpecs": {"Worker": {"template": TEMPLATE}}, "runPolicy": {},
                 "hyperparameters": {"metricTag": "acc", "maxTrials": 3,
                                     "params": [{"name": "lr", "type": "DOUBLE", "min": 0.1, "max": 1}]},
                 "output": {"deployTo": {"modelDeployment": "digits"}}}}))
    assert get_json(cluster, "trainingjob", "minimal")["spec"] == {
        "framework": "tensorflow", "port": 2222, "successPolicy": "Default",
        "replicaSpecs": {"Worker": {"replicas": 1, "restartPolicy": "OnFailure", "template": TEMPLATE}},
        "runPolicy": {"backoffLimit": 3, "cleanPodPolicy": "Running", "restartScope": "Pod", "suspend": False},
        "hyperparameters": {"metricTag": "acc", "maxTrials": 3, "goal": "MAXIMIZE", "algorithm": "random",
                            "maxParallelTrials": 1,
                            "params": [{"name": "lr", "type": "DOUBLE", "min": 0.1, "max": 1,
                                        "scaleType": "UNIT_LINEAR_SCALE"}]},
        "output": {"deployTo": {"modelDeployment": "digits", "canaryPercent": 10}}}
    table = cluster.kubectl("get", "trainingjobs").stdout.splitlines()
    assert table[0].split() == ["NAME", "FRAMEWORK", "STATE", "RESTARTS", "TRIALS", "AGE"]
    assert table[1].split()[:2] == ["minimal", "tensorflow"]


NOT_CHECKED = "some validation rules were not checked because the object was invalid"

# (id, object, what kube-apiserver answers): each object breaks one rule or schema constraint.
INVALID = [
    # ModelDeployment: its CEL rules...
    ("traffic-sum", model_deployment(traffic={"v1": 80, "v2": 10}),
     'The ModelDeployment "bad" is invalid: spec: Invalid value: spec.traffic percentages must sum to 100'),
    ("traffic-unknown-version", model_deployment(traffic={"v1": 90, "v3": 10}),
     'The ModelDeployment "bad" is invalid: spec: Invalid value: '
     'every key of spec.traffic must name an entry of spec.versions'),
    ("route-unknown-version", model_deployment(routes=[{"match": {"header": "x-exp", "value": "b"}, "version": "v3"}]),
     'The ModelDeployment "bad" is invalid: spec: Invalid value: every route must name an entry of spec.versions'),
    ("mirror-unknown-version", model_deployment(mirror={"version": "v9"}),
     'The ModelDeployment "bad" is invalid: spec: Invalid value: spec.mirror.version must name an entry of spec.versions'),
    ("autoscaling-min-above-max", model_deployment(autoscaling={"targetPerReplica": 5, "minReplicas": 5, "maxReplicas": 2}),
     'The ModelDeployment "bad" is invalid: spec: Invalid value: spec.autoscaling.minReplicas must not exceed maxReplicas'),
    # ...and its schema.
    ("negative-replicas", model_deployment(replicas=-1),
     "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"),
    ("traffic-out-of-range", model_deployment(traffic={"v1": 110, "v2": -10}),
     "spec.traffic.v1: Invalid value: 110: spec.traffic.v1 in body should be less than or equal to 100"),
    ("zero-target", model_deployment(autoscaling={"targetPerReplica": 0}),
     "spec.autoscaling.targetPerReplica: Invalid value: 0: spec.autoscaling.targetPerReplica in body should be greater than 0"),
    ("bad-enum", model_deployment(router={"serviceType": "ExternalName"}),
     'spec.router.serviceType: Unsupported value: "ExternalName": supported values: "ClusterIP", "NodePort", "LoadBalancer"'),
    ("no-versions", model_deployment(versions=[], traffic={"v1": 100}),
     "spec.versions: Invalid value: 0: spec.versions in body should have at least 1 items"),
    ("missing-storage-uri", model_deployment(versions=[{"name": "v1"}], traffic={"v1": 100}),
     "spec.versions[0].storageUri: Required value"),
    ("bad-storage-uri", model_deployment(versions=[{"name": "v1", "storageUri": "s3://bucket/m"}], traffic={"v1": 100}),
     'spec.versions[0].storageUri: Invalid value: "s3://bucket/m": spec.versions[0].storageUri in body should match'),
    ("duplicate-version", model_deployment(versions=[{"name": "v1", "storageUri": "file:///a"},
                                                     {"name": "v1", "storageUri": "file:///b"}], traffic={"v1": 100}),
     'spec.versions[1]: Duplicate value: {"name":"v1"}'),
    ("two-sticky-keys", model_deployment(stickyBy={"header": "x-user", "cookie": "user"}),
     "spec.stickyBy: Too many: 2: must have at most 1 item"),
    # TrainingJob: its CEL rules...
    ("two-chiefs", training_job(replicaSpecs={"Chief": {"replicas": 2, "template": TEMPLATE}}),
     'The TrainingJob "bad" is invalid: spec: Invalid value: a TrainingJob has at most one Chief'),
    ("pytorch-parameter-servers", training_job(framework="pytorch", replicaSpecs={"Worker": {"template": TEMPLATE},
                                                                                  "PS": {"template": TEMPLATE}}),
     'The TrainingJob "bad" is invalid: spec: Invalid value: PyTorch jobs have no parameter servers (PS)'),
    ("no-chief-or-worker", training_job(replicaSpecs={"Evaluator": {"template": TEMPLATE}}),
     'The TrainingJob "bad" is invalid: spec: Invalid value: a TrainingJob needs a Chief (PyTorch: Master) or at least one Worker'),
    ("categorical-without-values",
     training_job(hyperparameters={"metricTag": "acc", "maxTrials": 3, "params": [{"name": "opt", "type": "CATEGORICAL"}]}),
     'The TrainingJob "bad" is invalid: spec.hyperparameters.params[0]: Invalid value: '
     "CATEGORICAL params need values, DISCRETE params discreteValues; INTEGER and DOUBLE params need min <= max"),
    ("min-above-max",
     training_job(hyperparameters={"metricTag": "acc", "maxTrials": 3,
                                   "params": [{"name": "lr", "type": "DOUBLE", "min": 1, "max": 0.1}]}),
     "spec.hyperparameters.params[0]: Invalid value: "
     "CATEGORICAL params need values, DISCRETE params discreteValues; INTEGER and DOUBLE params need min <= max"),
    # ...and its schema.
    ("unknown-framework", training_job(framework="jax"),
     'spec.framework: Unsupported value: "jax": supported values: "tensorflow", "pytorch"'),
    ("port-out-of-range", training_job(port=70000),
     "spec.port: Invalid value: 70000: spec.port in body should be less than or equal to 65535"),
    ("missing-template", training_job(replicaSpecs={"Worker": {"replicas": 2}}),
     "spec.replicaSpecs.Worker.template: Required value"),
    ("bad-restart-policy", training_job(replicaSpecs={"Worker": {"template": TEMPLATE, "restartPolicy": "Sometimes"}}),
     'spec.replicaSpecs.Worker.restartPolicy: Unsupported value: "Sometimes"'),
    ("missing-metric-tag",
     training_job(hyperparameters={"maxTrials": 3, "params": [{"name": "lr", "type": "DOUBLE", "min": 0, "max": 1}]}),
     "spec.hyperparameters.metricTag: Required value"),
]


@pytest.mark.parametrize("doc,answer", [case[1:] for case in INVALID], ids=[case[0] for case in INVALID])
def test_invalid_objects_get_the_api_servers_422_and_are_not_stored(applied_crds, namespaced, doc, answer):  # noqa: F811
    require(applied_crds, CRD_OF_KIND[doc["kind"]])
    refused = namespaced.kubectl("create", "-f", "-", input=json.dumps(doc), check=False)
    assert refused.returncode != 0
    assert f'The {doc["kind"]} "bad" is invalid: ' in refused.stderr, refused.stderr  # 422 Invalid
    assert answer in refused.stderr, refused.stderr
    assert namespaced.kubectl("get", doc["kind"].lower(), "bad", check=False).returncode != 0


def test_the_same_object_made_valid_is_accepted(model_deployments, training_jobs):
    """The base objects the invalid cases start from are valid: each case fails for its own reason."""
    model_deployments.kubectl("create", "-f", "-", input=json.dumps(model_deployment("good")))
    training_jobs.kubectl("create", "-f", "-", input=json.dumps(training_job("good")))
    # An unknown field is a strict decoding error (400), not a schema one.
    unknown = training_jobs.kubectl("create", "-f", "-", input=json.dumps(training_job("typo", replicas=3)),
                                    check=False)
    assert 'strict decoding error: unknown field "spec.replicas"' in unknown.stderr, unknown.stderr


def test_patch_update_and_server_side_apply_are_checked_and_change_nothing(model_deployments):
    cluster = model_deployments
    cluster.kubectl("apply", "-f", "-", input=json.dumps(model_deployment("canary")))
    rule = "spec.traffic percentages must sum to 100"
    patch = cluster.kubectl("patch", "modeldeployment", "canary", "--type", "merge",
                            "-p", '{"spec":{"traffic":{"v2":20}}}', check=False)
    assert patch.returncode != 0 and rule in patch.stderr, patch.stderr
    json_patch = cluster.kubectl("patch", "modeldeployment", "canary", "--type", "json",
                                 "-p", '[{"op": "remove", "path": "/spec/versions/1"}]', check=False)
    assert "every key of spec.traffic must name an entry of spec.versions" in json_patch.stderr, json_patch.stderr
    stored = get_json(cluster, "modeldeployment", "canary")
    replaced = copy.deepcopy(stored)
    replaced["spec"]["traffic"] = {"v1": 100, "v2": 100}
    update = cluster.kubectl("replace", "-f", "-", input=json.dumps(replaced), check=False)
    assert update.returncode != 0 and rule in update.stderr, update.stderr
    ssa = cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-",
                          input=json.dumps(model_deployment("canary", traffic={"v1": 50, "v2": 10})), check=False)
    assert ssa.returncode != 0 and rule in ssa.stderr, ssa.stderr
    after = get_json(cluster, "modeldeployment", "canary")
    assert after["spec"] == stored["spec"]
    assert after["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    cluster.kubectl("patch", "modeldeployment", "canary", "--type", "merge",
                    "-p", '{"spec":{"traffic":{"v1":80,"v2":20}}}')
    assert get_json(cluster, "modeldeployment", "canary")["spec"]["traffic"] == {"v1": 80, "v2": 20}


def test_a_raw_request_gets_kube_apiservers_422_status_with_causes(training_jobs):
    cluster = training_jobs
    body = json.dumps(training_job("raw", replicaSpecs={"Chief": {"replicas": 3, "template": TEMPLATE}})).encode()
    request = urllib.request.Request(
        f"{cluster.url}/apis/modelfleet.io/v1alpha1/namespaces/{cluster.namespace}/trainingjobs",
        data=body, method="POST", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as error:
        cluster.urlopen(request)
    assert error.value.code == 422
    status = json.loads(error.value.read())
    assert (status["kind"], status["status"], status["reason"], status["code"]) == ("Status", "Failure", "Invalid", 422)
    assert status["message"] == ('TrainingJob.modelfleet.io "raw" is invalid: spec: Invalid value: '
                                 'a TrainingJob has at most one Chief')
    assert status["details"]["name"] == "raw" and status["details"]["kind"] == "TrainingJob"
    assert status["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": "Invalid value: a TrainingJob has at most one Chief", "field": "spec"}]


def openapi_schemas(cluster, group_version):
    try:
        with cluster.urlopen(f"/openapi/v3/apis/{group_version}") as r:
            return json.load(r)["components"]["schemas"]
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return {}
        raise


def wait_for_openapi(cluster, group_version, names, timeout=30):
    """kube-apiserver publishes a new CRD's schema in its OpenAPI a little after the CRD is
    established."""
    deadline = time.monotonic() + timeout
    while not set(names) <= set(openapi_schemas(cluster, group_version)):
        assert time.monotonic() < deadline, f"{names} not in /openapi/v3/apis/{group_version} after {timeout} s"
        time.sleep(0.2)


def test_explain_shows_our_schemas(model_deployments, training_jobs):
    """kube-apiserver publishes the CRDs' schemas in its OpenAPI, which kubectl explain reads."""
    wait_for_openapi(model_deployments, "modelfleet.io/v1alpha1",
                     ["io.modelfleet.v1alpha1.ModelDeployment", "io.modelfleet.v1alpha1.TrainingJob"])
    traffic = model_deployments.kubectl("explain", "modeldeployment.spec.traffic").stdout
    assert "KIND:       ModelDeployment" in traffic and "FIELD: traffic <map[string]integer>" in traffic, traffic
    assert "Percent of traffic per version name; sums to 100." in traffic
    spec = model_deployments.kubectl("explain", "md.spec").stdout
    assert "versions\t<[]Object> -required-" in spec and "Name the model is served under" in spec, spec
    framework = training_jobs.kubectl("explain", "trainingjob.spec.framework").stdout
    assert "KIND:       TrainingJob" in framework and "tensorflow" in framework and "pytorch" in framework, framework
    schemas = openapi_schemas(model_deployments, "modelfleet.io/v1alpha1")
    deployment = schemas["io.modelfleet.v1alpha1.ModelDeployment"]
    assert deployment["properties"]["spec"]["properties"]["replicas"]["default"] == 1
    assert "io.modelfleet.v1alpha1.TrainingJob" in schemas


def test_model_deployment_status_printer_columns_and_scale(model_deployments):
    cluster, ns = model_deployments, model_deployments.namespace
    cluster.kubectl("create", "-f", "-", input=json.dumps(model_deployment("digits")))
    status = {"status": {"replicas": 2, "selector": "app=digits", "readySummary": "2/2", "trafficSummary": "v1=90,v2=10",
                         "qps": 12.5, "rollout": {"phase": "Progressing", "step": 1}}}
    cluster.kubectl("patch", "md", "digits", "--subresource", "status", "--type", "merge", "-p", json.dumps(status))
    table = cluster.kubectl("get", "modeldeployments").stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "TRAFFIC", "QPS", "PHASE", "AGE"]
    assert table[1].split()[:5] == ["digits", "2/2", "v1=90,v2=10", "12.5", "Progressing"]
    # The status schema is checked too, and a bad status changes nothing.
    bad = cluster.kubectl("patch", "md", "digits", "--subresource", "status", "--type", "merge",
                          "-p", '{"status":{"rollout":{"phase":"Finished"}}}', check=False)
    assert 'status.rollout.phase: Unsupported value: "Finished"' in bad.stderr, bad.stderr
    assert get_json(cluster, "md", "digits")["status"]["rollout"]["phase"] == "Progressing"
    # kubectl scale goes through the scale subresource (spec.replicas, status.replicas, status.selector).
    cluster.kubectl("scale", "md", "digits", "--replicas", "3")
    digits = get_json(cluster, "md", "digits")
    assert digits["spec"]["replicas"] == 3 and digits["metadata"]["generation"] == 2
    scale = json.loads(cluster.kubectl(
        "get", "--raw", f"/apis/modelfleet.io/v1alpha1/namespaces/{ns}/modeldeployments/digits/scale").stdout)
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"] == {"replicas": 2, "selector": "app=digits"}
