"""modelfleet-operator end to end on modelfleet-local: installed by its Helm chart, running in its
pods under the chart's RBAC (enforced by the real API server), reconciling the digits example
into serving pods behind the router; predictions over REST and gRPC; scale, self-healing, a bad
storageUri, zero failed requests while pods go away, leader election, crashes of the operator
and of the API server; deletion by the real garbage collector; the RBAC the chart grants is
exactly what the operator calls (from the API server's audit log).

The tests share one cluster and run in file order; each leaves the example Ready."""
import collections
import json
import time

import grpc
import numpy as np
import pytest
import requests

import proto_stubs
from fleet_fixtures import (CHART, PREDICT, STUDY_ONLY_GRANTS, SYSTEM_NS, TRAINING_ONLY_GRANTS, Load, audit_calls,
                            granted, grpc_predict_request, kill9, pids_of_pod, processes, rest_url)
from local_fixtures import wait_until

pytestmark = pytest.mark.go_components


@pytest.fixture(scope="module")
def example(fleet):
    fleet.apply(fleet.local_example())
    fleet.wait_ready(timeout=240)
    return fleet


def test_operator_installed_by_the_chart_runs_two_replicas_with_one_leader(fleet):
    pods = wait_until(lambda: [p for p in fleet.operator_pods()
                               if any(c["type"] == "Ready" and c["status"] == "True"
                                      for c in p["status"].get("conditions", []))] or None,
                      timeout=60, what="ready operator pods")
    assert len(fleet.operator_pods()) == 2
    names = {p["metadata"]["name"] for p in fleet.operator_pods()}
    # Identities are POD_NAME_<random>, as controller-runtime's are.
    assert wait_until(lambda: fleet.leader().rsplit("_", 1)[0] in names, timeout=30, what="a leader")
    for p in pods:
        sa = p["spec"]["serviceAccountName"]
        assert sa.endswith("operator"), sa
        assert p["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True


def test_example_becomes_ready_with_printer_columns(example):
    out = example.kubectl("get", "md", "digits").stdout
    header, row = out.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "READY", "TRAFFIC", "QPS"] or header.split()[:3] == ["NAME", "READY", "TRAFFIC"]
    assert "2/2" in row and "v1=90,v2=10" in row, out
    md = example.md()
    assert md["status"]["observedGeneration"] == md["metadata"]["generation"]
    assert md["status"]["url"] == "http://digits.default.svc:8501"
    assert [v["modelState"] for v in md["status"]["versions"]] == ["AVAILABLE", "AVAILABLE"]
    names = {d["metadata"]["name"] for d in example.json("deployments", "-n", "default")["items"]}
    assert {"digits-v1", "digits-v2", "digits-router"} <= names
    for kind in ("deployment/digits-v1", "service/digits-v1", "deployment/digits-router", "service/digits",
                 "configmap/digits-router", "serviceaccount/digits-router", "rolebinding/digits-router"):
        refs = example.json(kind, "-n", "default")["metadata"]["ownerReferences"]
        assert refs[0]["kind"] == "ModelDeployment" and refs[0]["controller"] is True, kind
    events = example.kubectl("describe", "md", "digits").stdout
    assert "Created" in events and "Ready" in events


def test_predictions_through_the_router_over_rest(example):
    url = rest_url(example)
    versions = collections.Counter()
    with requests.Session() as s:
        for _ in range(300):
            r = s.post(url, json=PREDICT, timeout=10)
            assert r.status_code == 200, r.text
            assert np.array(r.json()["predictions"]).shape == (2, 10)
            versions[r.headers["x-modelfleet-version"]] += 1
    assert set(versions) == {"v1", "v2"}, versions
    assert 0.03 <= versions["v2"] / 300 <= 0.2, versions  # 10% weight


def test_predictions_through_the_router_over_grpc(example):
    services = proto_stubs.module("tensorflow_serving.apis.prediction_service_pb2_grpc")
    request = grpc_predict_request()
    seen = collections.Counter()
    with grpc.insecure_channel(f"{example.lb_address()}:8500") as channel:
        stub = services.PredictionServiceStub(channel)
        for _ in range(40):
            response, call = stub.Predict.with_call(request, timeout=10)
            assert list(response.outputs["scores"].tensor_shape.dim[i].size for i in range(2)) == [2, 10]
            seen[dict(call.initial_metadata()).get("x-modelfleet-version")] += 1
    assert set(seen) <= {"v1", "v2"} and seen["v1"] > 0, seen


def test_kubectl_scale_and_wait(example):
    example.kubectl("scale", "md", "digits", "--replicas", "2")
    wait_until(lambda: example.json("deployment", "digits-v1", "-n", "default")["spec"]["replicas"] == 2,
               timeout=20, what="digits-v1 scaled to 2")
    example.wait_ready()
    assert "4/4" in example.kubectl("get", "md", "digits").stdout
    assert example.md()["status"]["replicas"] == 2
    example.kubectl("scale", "md", "digits", "--replicas", "1")
    example.wait_ready()
    wait_until(lambda: "2/2" in example.kubectl("get", "md", "digits").stdout, timeout=60, what="2/2 again")


def test_a_deleted_deployment_is_recreated(example):
    old_uid = example.json("deployment", "digits-v2", "-n", "default")["metadata"]["uid"]
    example.kubectl("delete", "deployment", "digits-v2", "-n", "default", "--wait=false")

    def recreated():
        r = example.kubectl("get", "deployment", "digits-v2", "-n", "default", "-o", "json", check=False)
        return r.returncode == 0 and json.loads(r.stdout)["metadata"]["uid"] != old_uid
    wait_until(recreated, timeout=10, what="digits-v2 recreated")
    example.wait_ready()


def test_other_controllers_labels_cause_no_fight(example):
    example.kubectl("label", "deployment", "digits-v1", "-n", "default", "team=vision")
    example.kubectl("annotate", "deployment", "digits-v1", "-n", "default", "example.com/owner=ml-platform")
    def ours(d):
        return [m for m in d["metadata"]["managedFields"] if m["manager"] == "modelfleet-operator"]
    before = example.json("deployment", "digits-v1", "-n", "default", "--show-managed-fields")
    time.sleep(4)
    d = example.json("deployment", "digits-v1", "-n", "default", "--show-managed-fields")
    assert d["metadata"]["labels"]["team"] == "vision"
    assert d["metadata"]["annotations"]["example.com/owner"] == "ml-platform"
    # The operator wrote nothing back: its managed fields and the spec's generation stand.
    assert ours(d) == ours(before) and ours(d)
    assert d["metadata"]["generation"] == before["metadata"]["generation"]


def test_a_bad_storage_uri_degrades_only_its_version(example):
    url = rest_url(example)
    good = example.md()["spec"]["versions"][1]["storageUri"]
    with Load(url, clients=2) as load:
        example.kubectl("patch", "md", "digits", "--type", "json", "-p", json.dumps(
            [{"op": "replace", "path": "/spec/versions/1/storageUri", "value": "file:///nonexistent/model.onnx"}]))

        def degraded():
            c = example.condition(example.md(), "Degraded")
            return c if c.get("status") == "True" else None
        c = wait_until(degraded, timeout=90, what="Degraded")
        assert c["reason"] == "ModelSyncFailed", c
        assert "v2" in c["message"] and "nonexistent" in c["message"], c
        events = example.kubectl("describe", "md", "digits").stdout
        assert "ModelSyncFailed" in events
        time.sleep(2)
    assert load.failed() == 0, (load.outcomes, load.failures)
    assert load.total() > 20
    example.kubectl("patch", "md", "digits", "--type", "json", "-p", json.dumps(
        [{"op": "replace", "path": "/spec/versions/1/storageUri", "value": good}]))
    wait_until(lambda: example.condition(example.md(), "Degraded").get("status") == "False", timeout=120,
               what="Degraded False again")
    example.wait_ready()


def test_no_failed_request_while_pods_go_away(example):
    """Scale-down, a rollout of a new storageUri and the removal of a version, each under steady
    load through the router. A request the router sends to a pod that went away a moment before
    its EndpointSlice change arrived is refused; the router sends it again to a ready endpoint
    (docs/router.md, Retry), so the client sees no failure."""
    url = rest_url(example)
    spec = example.md()["spec"]
    try:
        pods_go_away_under_load(example, url, spec)
    finally:
        example.apply(example.local_example())  # back to the example whatever happened
        example.wait_ready()


def pods_go_away_under_load(example, url, spec):
    with Load(url) as load:
        example.kubectl("scale", "md", "digits", "--replicas", "2")
        example.wait_ready()
        example.kubectl("scale", "md", "digits", "--replicas", "1")
        wait_until(lambda: example.json("deployment", "digits-v1", "-n", "default")["status"].get("replicas") == 1,
                   timeout=90, what="scale-down done")
        example.kubectl("patch", "md", "digits", "--type", "json", "-p", json.dumps(
            [{"op": "replace", "path": "/spec/versions/0/storageUri", "value": spec["versions"][1]["storageUri"]}]))
        time.sleep(1)
        example.wait_ready()
        example.kubectl("patch", "md", "digits", "--type", "merge", "-p", json.dumps(
            {"spec": {"versions": [spec["versions"][0]], "traffic": {"v1": 100, "v2": None}}}))
        wait_until(lambda: example.kubectl("get", "deployment", "digits-v2", "-n", "default",
                                           check=False).returncode != 0, timeout=60, what="digits-v2 deleted")
        time.sleep(2)
    assert load.failed() == 0, (load.outcomes, load.failures)
    assert load.total() > 100, load.outcomes
    events = example.kubectl("describe", "md", "digits").stdout
    assert "RetiringVersion" in events


def test_leader_takeover_after_kill(example):
    """kill -9 of the leader: it cannot release the lease, so a new candidate (the other replica,
    or the restarted container, which campaigns under a new identity) takes over once the 10 s
    lease has expired: within 15 s of the leader's death."""
    leader = example.leader()
    pod = leader.rsplit("_", 1)[0]
    pids = pids_of_pod(pod, "modelfleet-operator")
    assert pids, f"no process for the leader {leader}"
    killed_at = time.monotonic()
    kill9(pids)
    new_leader = wait_until(lambda: example.leader() if example.leader() not in ("", leader) else None,
                            timeout=25, what="a new leader")
    took = time.monotonic() - killed_at
    assert took <= 15, f"takeover took {took:.1f} s"
    # The new leader acts: a traffic edit reaches the router's configuration.
    example.kubectl("patch", "md", "digits", "--type", "merge", "-p", '{"spec":{"traffic":{"v1":80,"v2":20}}}')
    wait_until(lambda: '"weight": 20' in example.json("configmap", "digits-router", "-n", "default")["data"]["router.yaml"],
               timeout=15, what=f"router config from {new_leader}")
    example.kubectl("patch", "md", "digits", "--type", "merge", "-p", '{"spec":{"traffic":{"v1":90,"v2":10}}}')
    example.wait_ready()


def test_operator_killed_mid_reconcile_converges_without_duplicates(example):
    manifest = example.local_example().replace("name: digits\n", "name: digits2\n", 1)
    example.apply(manifest)
    time.sleep(0.3)
    for pod in example.operator_pods():
        kill9(pids_of_pod(pod["metadata"]["name"], "modelfleet-operator"))
    example.wait_ready("digits2", timeout=240)
    deployments = [d["metadata"]["name"] for d in
                   example.json("deployments", "-n", "default", "-l", "modelfleet.io/modeldeployment=digits2")["items"]]
    assert sorted(deployments) == ["digits2-router", "digits2-v1", "digits2-v2"]
    example.kubectl("delete", "md", "digits2")


def test_api_server_restart_watches_recover(example):
    pids = [pid for pid in pids_by_program("kube-apiserver", str(example.cluster.data_dir))]
    assert pids
    kill9(pids)
    wait_until(lambda: example.kubectl("get", "--raw", "/readyz", check=False).returncode == 0, timeout=60,
               what="the API server back")
    example.kubectl("patch", "md", "digits", "--type", "merge", "-p", '{"spec":{"traffic":{"v1":70,"v2":30}}}')
    wait_until(lambda: '"weight": 30' in example.json("configmap", "digits-router", "-n", "default")["data"]["router.yaml"],
               timeout=60, what="the operator acting after the API server restart")
    example.kubectl("patch", "md", "digits", "--type", "merge", "-p", '{"spec":{"traffic":{"v1":90,"v2":10}}}')
    example.wait_ready()


def pids_by_program(program: str, marker: str):
    return [pid for pid, argv, _ in processes(program) if any(marker.encode() in a for a in argv)]


def test_batching_settings_become_server_flags_and_roll_the_pods(example):
    example.kubectl("patch", "md", "digits", "--type", "merge", "-p",
                    '{"spec":{"server":{"batching":{"maxBatchSize":8,"batchTimeoutMicros":2000}}}}')
    cm = wait_until(lambda: example.kubectl("get", "configmap", "digits-server", "-n", "default", "-o", "json",
                                            check=False).stdout or None, timeout=15, what="the batching ConfigMap")
    assert "max_batch_size { value: 8 }" in json.loads(cm)["data"]["batching_parameters.txt"]
    args = example.json("deployment", "digits-v1", "-n", "default")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--enable_batching" in args
    example.wait_ready()
    r = requests.post(rest_url(example), json=PREDICT, timeout=10)
    assert r.status_code == 200, r.text
    example.kubectl("patch", "md", "digits", "--type", "json", "-p", '[{"op":"remove","path":"/spec/server"}]')
    wait_until(lambda: example.kubectl("get", "configmap", "digits-server", "-n", "default",
                                       check=False).returncode != 0, timeout=15, what="the batching ConfigMap gone")
    example.wait_ready()


def has_gpu():
    import shutil
    import subprocess
    return bool(shutil.which("nvidia-smi")) and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def test_gpu_version_gets_its_device_or_says_why_it_cannot_serve(example):
    manifest = example.local_example().replace("name: digits\n", "name: gpu\n", 1).replace(
        "  replicas: 1\n", "  replicas: 1\n  server: {resources: {limits: {nvidia.com/gpu: 1}}}\n", 1)
    example.apply(manifest)
    try:
        pod = wait_until(lambda: [p for p in example.json("pods", "-n", "default", "-l",
                                                          "modelfleet.io/modeldeployment=gpu,modelfleet.io/version=v1")["items"]
                                  if p["status"].get("phase") == "Running"] or None, timeout=60, what="a gpu pod")[0]
        env = (pids_of_pod_ip(pod["status"]["podIP"]) or [{}])[-1]
        assert env.get("NVIDIA_VISIBLE_DEVICES", "").isdigit(), env.get("NVIDIA_VISIBLE_DEVICES")
        assert env.get("CUDA_VISIBLE_DEVICES") == env.get("NVIDIA_VISIBLE_DEVICES")
        if has_gpu():
            example.wait_ready("gpu", timeout=240)
            return
        # No GPU here: the server refuses to run the model on the CPU, and status says why.
        def degraded():
            c = example.condition(example.md("gpu"), "Degraded")
            return c if c.get("status") == "True" and c.get("reason") == "ModelLoadFailed" else None
        c = wait_until(degraded, timeout=90, what="Degraded ModelLoadFailed")
        assert "CUDA" in c["message"], c
        assert example.md("gpu")["status"]["versions"][0]["modelState"] == "FAILED"
    finally:
        example.kubectl("delete", "md", "gpu", "--wait=false")


def pids_of_pod_ip(ip):
    """Environments of the model-server processes bound to a pod IP (its --rest_api_address)."""
    return [env for _, _, env in processes("modelfleet-server") if env.get("POD_IP") == ip]


def test_helm_upgrade_rolls_the_operator_and_the_fleet_keeps_serving(example):
    with Load(rest_url(example), clients=2) as load:
        example.helm("upgrade", "modelfleet", str(CHART), "-n", SYSTEM_NS, "--reuse-values",
                     "--set", "operator.logLevel=debug", "--wait", "--timeout", "150s")
        time.sleep(1)
    assert load.failed() == 0, (load.outcomes, load.failures)
    pods = example.operator_pods()
    assert all("--log-level=debug" in p["spec"]["containers"][0]["args"] for p in pods), pods
    names = {p["metadata"]["name"] for p in pods}
    wait_until(lambda: example.leader().rsplit("_", 1)[0] in names, timeout=30, what="a leader among the new pods")
    assert example.helm("history", "modelfleet", "-n", SYSTEM_NS).stdout.count("\n") >= 3  # header + 2 revisions


def test_invalid_spec_is_reported_and_changes_nothing(example):
    before = example.json("deployment", "digits-v1", "-n", "default")["metadata"]["resourceVersion"]
    bad = example.kubectl("patch", "md", "digits", "--type", "merge", "-p", '{"spec":{"traffic":{"v1":50,"v2":10}}}',
                          check=False)
    assert bad.returncode != 0 and "sum to 100" in bad.stderr  # the CRD's CEL rule, at admission
    assert example.json("deployment", "digits-v1", "-n", "default")["metadata"]["resourceVersion"] == before


def test_delete_removes_every_object(example):
    example.kubectl("delete", "md", "digits", "--wait=true", timeout=90)

    def gone():
        left = []
        for kind in ("deployments", "services", "configmaps", "serviceaccounts", "rolebindings", "pods"):
            items = example.json(kind, "-n", "default", "-l", "modelfleet.io/modeldeployment=digits")["items"]
            left += [f"{kind}/{i['metadata']['name']}" for i in items]
        return not left or None
    wait_until(gone, timeout=90, what="the garbage collector removing digits' objects")


def test_rbac_grants_exactly_what_the_operator_calls(fleet):
    sa = fleet.operator_pods()[0]["spec"]["serviceAccountName"]
    called = audit_calls(fleet, f"system:serviceaccount:{SYSTEM_NS}:{sa}")
    grants = granted(fleet, sa)
    # Server-side apply of an object that does not exist yet creates it: the API server checks
    # `create` then, while the audit log records the call as `patch`. `bind` on the router role
    # is checked when the RoleBinding is written, not called.
    implied = {("create", g, r) for (v, g, r) in called if v == "patch"} | {("bind", "rbac.authorization.k8s.io", "clusterroles")}
    assert called <= grants, f"called but not granted: {sorted(called - grants)}"
    # What only TrainingJobs and studies use is called once their suites have run (they check it then).
    unused = grants - called - implied - TRAINING_ONLY_GRANTS - STUDY_ONLY_GRANTS
    assert not unused, f"granted but never called: {sorted(unused)}"
