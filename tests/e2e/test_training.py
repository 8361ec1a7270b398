"""TrainingJobs with PyTorch on modelfleet-local, run by the chart-installed operator:

- the data-parallel digits job (Master + 2 Workers, gloo) reaches >= 0.9 validation accuracy, and
  its model is handed to the example ModelDeployment as a 10 % canary that answers predictions
  through the router;
- a worker killed mid-job is restarted (OnFailure; restartScope Job restarts the cluster from the
  last checkpoint) and the job still succeeds;
- an always-failing worker ends the job Failed after backoffLimit restarts, with a clear reason,
  and ttlSecondsAfterFinished then deletes the job and, by garbage collection, its pods;
- a job whose pods cannot all fit on the nodes gets none, and says why;
- suspend deletes a running job's pods, resume starts new ones;
- the API server refuses replica layouts the frameworks cannot run (the CRD's CEL rules);
- RBAC: the grants only TrainingJobs use were all called.

The jobs are the example in examples/training/, with fewer epochs; each uses its own port, since
pods share one network namespace on modelfleet-local."""
import json
import os
import re
import signal
import time

import pytest
import requests
import yaml

from conftest import ROOT
from fleet_fixtures import PREDICT, SYSTEM_NS, TRAINING_ONLY_GRANTS, audit_calls, granted, processes, rest_url
from local_fixtures import wait_until

pytestmark = [pytest.mark.timeout(600), pytest.mark.go_components]

EXAMPLE = ROOT / "examples" / "training" / "trainingjob-pytorch-local.yaml"


def example_job(name, port, model_root, epochs=20, extra_args=(), deploy=True):
    job = yaml.safe_load(EXAMPLE.read_text().replace("/MODELFLEET_ROOT", str(ROOT)))
    job["metadata"]["name"] = name
    job["spec"]["port"] = port
    for replica in job["spec"]["replicaSpecs"].values():
        container = replica["template"]["spec"]["containers"][0]
        container["args"] = [a if not a.startswith("--epochs=") else f"--epochs={epochs}" for a in container["args"]]
        container["args"] += list(extra_args)
    job["spec"]["output"]["modelUri"] = f"file://{model_root}"
    if not deploy:
        del job["spec"]["output"]["deployTo"]
    return job


def apply(fleet, job):
    fleet.apply(json.dumps(job))


def tj(fleet, name):
    return fleet.json("trainingjob", name)


def condition(job, kind):
    return next((c for c in job.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def wait_state(fleet, name, states, timeout):
    def done():
        state = tj(fleet, name).get("status", {}).get("state")
        return state if state in states else None
    return wait_until(done, timeout=timeout, interval=1, what=f"TrainingJob {name} in {states}")


def events_of(fleet, name):
    items = fleet.json("events", "--field-selector", f"involvedObject.kind=TrainingJob,involvedObject.name={name}")
    return [(e["reason"], e["message"]) for e in items["items"]]


def describe_failure(fleet, name):
    """What to print when a job does not end as expected: its status, events and pod logs."""
    out = [json.dumps(tj(fleet, name).get("status", {}), indent=1), str(events_of(fleet, name))]
    for pod in fleet.json("pods", "-l", f"modelfleet.io/job-name={name}")["items"]:
        logs = fleet.kubectl("logs", pod["metadata"]["name"], check=False)
        out.append(f"--- {pod['metadata']['name']} {pod['status'].get('phase')}\n{logs.stdout[-1500:]}{logs.stderr[-300:]}")
    return "\n".join(out)


@pytest.fixture(scope="module")
def digits(fleet):
    """The example ModelDeployment (v1 90 %, v2 10 %), restored afterwards."""
    fleet.apply(fleet.local_example())
    fleet.wait_ready(timeout=240)
    yield fleet
    original = yaml.safe_load(fleet.local_example())["spec"]
    traffic = {v: None for v in fleet.md()["spec"]["traffic"]}  # merge patch: null removes a key
    traffic.update(original["traffic"])
    fleet.kubectl("patch", "modeldeployment", "digits", "--type", "merge", "-p",
                  json.dumps({"spec": {"versions": original["versions"], "traffic": traffic}}))


def test_pytorch_job_trains_hands_off_and_its_canary_serves(digits, tmp_path):
    fleet = digits
    name = "digits-pytorch"
    apply(fleet, example_job(name, 23456, tmp_path / "models" / "digits"))
    try:
        state = wait_state(fleet, name, {"Succeeded", "Failed"}, timeout=300)
        assert state == "Succeeded", describe_failure(fleet, name)
        job = tj(fleet, name)
        status = job["status"]
        assert condition(job, "Succeeded")["reason"] == "TrainingJobSucceeded"
        assert condition(job, "Running")["status"] == "False"
        assert status["startTime"] and status["completionTime"]
        assert status["replicaStatuses"]["Master"]["succeeded"] == 1
        # The Master reports its accuracy on the held-out digits.
        log = fleet.kubectl("logs", f"{name}-master-0").stdout
        accuracy = float(re.findall(r"^modelfleet-metric accuracy=([0-9.]+)$", log, re.M)[-1])
        assert accuracy >= 0.9, log
        # The next version above v1 and v2, written where MODEL_DIR said, added at 10 %.
        assert status["modelVersion"] == 3
        assert (tmp_path / "models" / "digits" / "3" / "model.onnx").stat().st_size > 0
        assert status["handoff"]["version"] == "v3", status
        md = fleet.md()
        assert md["spec"]["versions"][-1] == {"name": "v3", "storageUri": f"file://{tmp_path}/models/digits/3"}
        assert md["spec"]["traffic"] == {"v1": 81, "v2": 9, "v3": 10}
        assert any(r == "HandedOff" for r, _ in events_of(fleet, name))
        printed = fleet.kubectl("get", "tj", name).stdout
        assert "Succeeded" in printed and "pytorch" in printed, printed

        # The canary answers predictions through the router.
        url = rest_url(fleet)

        def canary_answer():
            r = requests.post(url, json=PREDICT, timeout=10)
            if r.status_code == 200 and r.headers.get("x-modelfleet-version") == "v3":
                return r.json()
            return None
        answer = wait_until(canary_answer, timeout=180, interval=0.05, what="a prediction from the canary v3")
        assert len(answer["predictions"]) == 2 and len(answer["predictions"][0]) == 10
    finally:
        fleet.kubectl("delete", "tj", name, "--wait=false", check=False)


def trainer_pids(pod_name):
    """The trainer processes of a pod (the node agent sets HOSTNAME to the pod's name)."""
    return [pid for pid, argv, env in processes("") if env.get("HOSTNAME") == pod_name
            and any(a.endswith(b"pytorch_digits.py") for a in argv)]


def test_a_killed_worker_is_restarted_and_the_job_still_succeeds(fleet, tmp_path):
    name = "digits-kill"
    apply(fleet, example_job(name, 23466, tmp_path / "models", epochs=24, extra_args=["--epoch_seconds=0.5"],
                             deploy=False))
    try:
        wait_until(lambda: "epoch 3/" in fleet.kubectl("logs", f"{name}-master-0", check=False).stdout,
                   timeout=180, interval=0.5, what="the Master at epoch 3")
        pids = wait_until(lambda: trainer_pids(f"{name}-worker-1"), timeout=10, what="worker 1's process")
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        state = wait_state(fleet, name, {"Succeeded", "Failed"}, timeout=300)
        assert state == "Succeeded", describe_failure(fleet, name)
        job = tj(fleet, name)
        assert job["status"]["restarts"] >= 1, job["status"]
        assert condition(job, "Restarting")["status"] == "False"  # running again, then done
        # The first pod the operator saw fail: worker 1, or a peer whose collective broke with it.
        restarts = [m for r, m in events_of(fleet, name) if r == "Restarting"]
        assert restarts and "is restarting every pod" in restarts[0] and "exit code" in restarts[0], restarts
        # The restarted cluster resumed from the Master's checkpoint.
        log = fleet.kubectl("logs", f"{name}-master-0").stdout
        assert "resuming from" in log, log
        assert float(re.findall(r"^modelfleet-metric accuracy=([0-9.]+)$", log, re.M)[-1]) >= 0.9
    finally:
        fleet.kubectl("delete", "tj", name, "--wait=false", check=False)


def test_an_always_failing_worker_fails_the_job_after_the_backoff_limit(fleet, tmp_path):
    name = "digits-failing"
    job = example_job(name, 23476, tmp_path / "models", deploy=False)
    worker = job["spec"]["replicaSpecs"]["Worker"]
    worker["replicas"] = 1
    worker["restartPolicy"] = "ExitCode"
    worker["template"]["spec"]["containers"][0]["args"] = [
        "-c", "import sys; print('worker: the data shard is missing (simulated)'); sys.exit(137)"]
    job["spec"]["runPolicy"] = {"backoffLimit": 2, "cleanPodPolicy": "All", "ttlSecondsAfterFinished": 5}
    apply(fleet, job)
    state = wait_state(fleet, name, {"Succeeded", "Failed"}, timeout=180)
    assert state == "Failed", describe_failure(fleet, name)
    failed = condition(tj(fleet, name), "Failed")
    assert failed["reason"] == "BackoffLimitExceeded", failed
    assert failed["message"].startswith(f"TrainingJob {name} has failed because it has reached the specified "
                                        "backoff limit (2 restarts): Worker 0"), failed
    assert "exit code 137" in failed["message"], failed
    restarts = [m for r, m in events_of(fleet, name) if r == "Restarting"]
    assert restarts, events_of(fleet, name)
    # ttlSecondsAfterFinished: the job goes, and its pods and Services with it.
    wait_until(lambda: fleet.kubectl("get", "tj", name, check=False).returncode != 0, timeout=60,
               what="the job deleted after its TTL")
    wait_until(lambda: not fleet.json("pods,services", "-l", f"modelfleet.io/job-name={name}")["items"],
               timeout=90, what="the job's pods and Services collected")


def test_a_job_that_cannot_fit_gets_no_pod_and_says_why(fleet, tmp_path):
    name = "digits-too-big"
    job = example_job(name, 23486, tmp_path / "models", deploy=False)
    for replica in job["spec"]["replicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1000}}
    apply(fleet, job)
    try:
        running = wait_until(lambda: condition(tj(fleet, name), "Running") or None, timeout=60,
                             what="the job's Running condition")
        assert running["status"] == "False" and running["reason"] == "Unschedulable", running
        assert "none of the job's pods is created" in running["message"], running
        assert "nvidia.com/gpu" in running["message"], running
        time.sleep(2)
        assert not fleet.json("pods", "-l", f"modelfleet.io/job-name={name}")["items"]
    finally:
        fleet.kubectl("delete", "tj", name, check=False)


def test_suspend_deletes_the_pods_and_resume_starts_them_again(fleet, tmp_path):
    name = "digits-suspend"
    job = example_job(name, 23496, tmp_path / "models", deploy=False)
    for replica in job["spec"]["replicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["args"] = ["-c", "import time; time.sleep(300)"]
    apply(fleet, job)
    pods = lambda: [p for p in fleet.json("pods", "-l", f"modelfleet.io/job-name={name}")["items"]  # noqa: E731
                    if not p["metadata"].get("deletionTimestamp")]
    try:
        wait_state(fleet, name, {"Running"}, timeout=60)
        first = {p["metadata"]["uid"] for p in pods()}
        assert len(first) == 3
        fleet.kubectl("patch", "tj", name, "--type", "merge", "-p", '{"spec":{"runPolicy":{"suspend":true}}}')
        wait_state(fleet, name, {"Suspended"}, timeout=30)
        wait_until(lambda: not fleet.json("pods", "-l", f"modelfleet.io/job-name={name}")["items"], timeout=60,
                   what="the suspended job's pods gone")
        assert condition(tj(fleet, name), "Running")["status"] == "False"
        fleet.kubectl("patch", "tj", name, "--type", "merge", "-p", '{"spec":{"runPolicy":{"suspend":false}}}')
        wait_state(fleet, name, {"Running"}, timeout=60)
        assert condition(tj(fleet, name), "Suspended")["reason"] == "TrainingJobResumed"
        again = {p["metadata"]["uid"] for p in pods()}
        assert len(again) == 3 and not again & first
    finally:
        fleet.kubectl("delete", "tj", name, "--wait=false", check=False)


@pytest.mark.parametrize("framework,replicas,message", [
    ("tensorflow", {"Master": 1, "Worker": 1}, "name the coordinating replica Chief"),
    ("pytorch", {"Master": 1, "PS": 1}, "PyTorch jobs have no parameter servers"),
    ("pytorch", {"Master": 2}, "at most one Master"),
    ("tensorflow", {"PS": 1}, "needs a Chief (PyTorch: Master) or at least one Worker"),
])
def test_the_api_server_refuses_layouts_the_frameworks_cannot_run(fleet, framework, replicas, message):
    template = {"spec": {"containers": [{"name": "c", "image": "modelfleet/python-train"}]}}
    job = {"apiVersion": "modelfleet.io/v1alpha1", "kind": "TrainingJob", "metadata": {"name": "refused"},
           "spec": {"framework": framework,
                    "replicaSpecs": {t: {"replicas": n, "template": template} for t, n in replicas.items()}}}
    result = fleet.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(job), check=False)
    assert result.returncode != 0 and message in result.stderr, result.stderr


def test_rbac_grants_only_training_jobs_use_were_called(fleet):
    sa = fleet.operator_pods()[0]["spec"]["serviceAccountName"]
    called = audit_calls(fleet, f"system:serviceaccount:{SYSTEM_NS}:{sa}")
    grants = granted(fleet, sa)
    assert TRAINING_ONLY_GRANTS <= grants
    assert called <= grants, f"called but not granted: {sorted(called - grants)}"
    assert TRAINING_ONLY_GRANTS <= called, f"granted but never called: {sorted(TRAINING_ONLY_GRANTS - called)}"
