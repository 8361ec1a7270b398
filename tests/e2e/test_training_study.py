"""Hyperparameter studies end to end on modelfleet-local, under the chart-installed operator: a
study of 6 trials, 2 at a time, runs as child TrainingJobs whose chief prints its metric; the
operator's leader pod is deleted mid-study and the new leader carries on from the study's status
(no trial lost, none created twice); the best trial is reported. Then a trial whose trainer
reports through MODELFLEET_METRICS_FILE (the container's termination message), and one that
reports nothing, which fails saying what was missing.

The trainer (examples/training/study_toy_trainer.py) computes its accuracy from its arguments in
about a second, so each check here knows the right answer."""
import json
import math
import threading
import time

import pytest
import yaml

from conftest import ROOT
from fleet_fixtures import STUDY_ONLY_GRANTS, SYSTEM_NS, audit_calls, granted
from local_fixtures import wait_until

pytestmark = pytest.mark.go_components

MANIFEST = ROOT / "examples" / "training" / "trainingjob-study-local.yaml"


def expected_accuracy(p):
    penalty = {"adam": 0.0, "rmsprop": 0.05, "sgd": 0.1}[p["optimizer"]]
    return 0.95 - 0.1 * (math.log10(p["learning_rate"]) + 2) ** 2 - 0.01 * (p["layers"] - 4) ** 2 - penalty


def set_trainer_flags(job: dict, *flags):
    container = job["spec"]["replicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]
    container["args"] = [container["args"][0], *flags]  # the script, then its flags


def study_manifest(name, **hyperparameters) -> dict:
    job = yaml.safe_load(MANIFEST.read_text().replace("/MODELFLEET_ROOT", str(ROOT)))
    job["metadata"]["name"] = name
    job["spec"]["hyperparameters"].update(hyperparameters)
    return job


def apply(fleet, job: dict):
    fleet.kubectl("apply", "-f", "-", input=json.dumps(job))


def get_tj(fleet, name):
    return fleet.json("tj", name, "-n", "default")


def children(fleet, study):
    return fleet.json("tj", "-n", "default", "-l", f"modelfleet.io/study={study}")["items"]


def finished(job) -> bool:
    return any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True"
               for c in job.get("status", {}).get("conditions", []))


def condition(job, kind):
    return next((c for c in job.get("status", {}).get("conditions", []) if c["type"] == kind), {})


class ParallelismWatch:
    """Samples the study's children in the background: how many run at once, at most."""

    def __init__(self, fleet, study):
        self.fleet, self.study = fleet, study
        self.most = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            try:
                running = [c for c in children(self.fleet, self.study) if not finished(c)]
                self.most = max(self.most, len(running))
            except Exception:  # noqa: BLE001 (the API server may be briefly away; sample again)
                pass
            time.sleep(0.3)

    def close(self):
        self.stop.set()
        self.thread.join(timeout=10)


def delete_leader_pod(fleet):
    leader = fleet.leader()
    pod = leader.rsplit("_", 1)[0]
    fleet.kubectl("delete", "pod", pod, "-n", SYSTEM_NS, "--wait=false")
    return wait_until(lambda: fleet.leader() not in ("", leader) and fleet.leader(), timeout=40,
                      what="a new operator leader")


def test_study_of_six_trials_two_at_a_time_survives_an_operator_restart(fleet):
    study = "study-six"
    job = study_manifest(study)
    # Trials of about 3 s, so the restart (a graceful delete: the lease is handed over at once)
    # lands mid-study.
    set_trainer_flags(job, "--steps=3", "--step_seconds=1")
    apply(fleet, job)
    watch = ParallelismWatch(fleet, study)
    try:
        # Mid-study: a trial has finished and others are still to come.
        wait_until(lambda: any(t.get("phase") == "Succeeded" for t in get_tj(fleet, study)
                               .get("status", {}).get("trials", [])),
                   timeout=60, what="the first finished trial")
        before = get_tj(fleet, study)["status"]["trials"]
        assert len(before) < 6, "the study ended before the operator could be restarted"
        delete_leader_pod(fleet)
        assert not finished(get_tj(fleet, study)), "the study ended before a new operator leader took over"
        job = wait_until(lambda: (j := get_tj(fleet, study)) and finished(j) and j, timeout=120,
                         what="the study to finish")
    finally:
        watch.close()

    status = job["status"]
    assert condition(job, "Succeeded").get("status") == "True", json.dumps(status, indent=1)
    assert condition(job, "Succeeded")["reason"] == "MaxTrialsReached"
    trials = status["trials"]
    assert [t["name"] for t in trials] == [f"{study}-trial-{i}" for i in range(1, 7)]
    # The trials recorded before the restart are unchanged after it.
    for old, new in zip(before, trials):
        assert old["parameters"] == new["parameters"], (old, new)
    for t in trials:
        assert t["phase"] == "Succeeded", t
        assert t["metric"] == pytest.approx(expected_accuracy(t["parameters"]), abs=1e-9), t
    best = max(trials, key=lambda t: t["metric"])
    assert status["bestTrial"] == {"name": best["name"], "parameters": best["parameters"], "metric": best["metric"]}
    assert status["trialSummary"].startswith("6/6 done")
    assert status["state"] == "Succeeded"

    # One child per trial (none created twice across the restart), each run with its trial's arguments.
    kids = {c["metadata"]["name"]: c for c in children(fleet, study)}
    assert sorted(kids) == sorted(t["name"] for t in trials)
    for t in trials:
        container = kids[t["name"]]["spec"]["replicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]
        flags = dict(a[2:].split("=", 1) for a in container["args"][-3:])
        assert sorted(flags) == ["layers", "learning_rate", "optimizer"], container["args"]
        assert float(flags["learning_rate"]) == t["parameters"]["learning_rate"]  # exact: shortest round-trip form
        assert flags["layers"] == str(t["parameters"]["layers"])
        assert flags["optimizer"] == t["parameters"]["optimizer"]
        assert "hyperparameters" not in kids[t["name"]]["spec"]
    assert 1 <= watch.most <= 2, f"{watch.most} trials ran at once"
    fleet.kubectl("delete", "tj", study, "-n", "default")


def test_metric_from_the_metrics_file_and_a_missing_metric(fleet):
    """One study reports through MODELFLEET_METRICS_FILE, one reports nothing at all."""
    def one_trial(name, report):
        job = study_manifest(name, maxTrials=1, maxParallelTrials=1, algorithm="random")
        set_trainer_flags(job, "--steps=1", "--step_seconds=0.1", f"--report={report}")
        apply(fleet, job)
        return name

    by_file, silent = one_trial("study-file", "file"), one_trial("study-silent", "none")
    job = wait_until(lambda: (j := get_tj(fleet, by_file)) and finished(j) and j, timeout=60, what="study-file")
    trial = job["status"]["trials"][0]
    assert trial["phase"] == "Succeeded", trial
    assert trial["metric"] == pytest.approx(expected_accuracy(trial["parameters"]), abs=1e-12)
    assert job["status"]["bestTrial"]["name"] == trial["name"]

    job = wait_until(lambda: (j := get_tj(fleet, silent)) and finished(j) and j, timeout=60, what="study-silent")
    trial = job["status"]["trials"][0]
    assert trial["phase"] == "Failed", trial
    assert trial["reason"] == "MetricNotReported"
    assert "has no line 'modelfleet-metric accuracy=<number>'" in trial["message"], trial["message"]
    assert f"pod {silent}-trial-1-chief-0" in trial["message"], trial["message"]
    assert condition(job, "Failed").get("status") == "True"
    assert condition(job, "Failed")["reason"] == "TooManyFailedTrials"
    assert "bestTrial" not in job["status"]
    fleet.kubectl("delete", "tj", by_file, silent, "-n", "default")


def test_invalid_study_is_reported_and_raising_max_trials_extends_it(fleet):
    """A spec the schema accepts but the operator cannot run (a log scale from 0) is reported in
    status; fixing it and later raising maxTrials runs more trials."""
    name = "study-grow"
    job = study_manifest(name, maxTrials=1, maxParallelTrials=1, algorithm="random")
    job["spec"]["hyperparameters"]["params"][0]["min"] = 0
    apply(fleet, job)
    bad = wait_until(lambda: (j := get_tj(fleet, name)) and condition(j, "Failed").get("reason") == "InvalidSpec"
                     and j, timeout=30, what="InvalidSpec")
    assert "UNIT_LOG_SCALE needs every value greater than 0" in condition(bad, "Failed")["message"]
    assert not children(fleet, name)

    fleet.kubectl("patch", "tj", name, "-n", "default", "--type", "json", "-p",
                  '[{"op": "replace", "path": "/spec/hyperparameters/params/0/min", "value": 0.0001}]')
    done = wait_until(lambda: (j := get_tj(fleet, name)) and condition(j, "Succeeded").get("status") == "True" and j,
                      timeout=60, what="the fixed study to finish")
    assert len(done["status"]["trials"]) == 1
    fleet.kubectl("patch", "tj", name, "-n", "default", "--type", "merge", "-p",
                  '{"spec": {"hyperparameters": {"maxTrials": 2}}}')
    grown = wait_until(lambda: (j := get_tj(fleet, name)) and len(j["status"].get("trials", [])) == 2
                       and condition(j, "Succeeded").get("status") == "True" and j,
                       timeout=60, what="the extended study to finish")
    assert [t["phase"] for t in grown["status"]["trials"]] == ["Succeeded", "Succeeded"]
    fleet.kubectl("delete", "tj", name, "-n", "default")


def test_median_rule_stops_a_bad_trial_early(fleet):
    """Three good trials finish together; the fourth (12 layers, far worse at every step) is
    stopped by the median rule while it runs, its job deleted, and the study still succeeds."""
    name = "study-stop"
    job = study_manifest(name, maxTrials=4, maxParallelTrials=3, algorithm="grid", enableTrialEarlyStopping=True,
                         params=[{"name": "layers", "type": "DISCRETE", "discreteValues": [3, 4, 5, 12]}])
    set_trainer_flags(job, "--learning_rate=0.01", "--optimizer=adam", "--steps=10", "--step_seconds=0.5")
    apply(fleet, job)
    done = wait_until(lambda: (j := get_tj(fleet, name)) and finished(j) and j, timeout=60, what="study-stop")
    trials = done["status"]["trials"]
    assert [t["phase"] for t in trials] == ["Succeeded"] * 3 + ["Stopped"], json.dumps(trials, indent=1)
    stopped = trials[3]
    assert stopped["parameters"] == {"layers": 12}
    assert stopped["reason"] == "EarlyStopped", stopped
    assert len(stopped["intermediateMetrics"]) < 10, stopped  # it did not run to the end
    assert condition(done, "Succeeded").get("status") == "True"
    assert done["status"]["bestTrial"]["parameters"] == {"layers": 4}
    wait_until(lambda: f"{name}-trial-4" not in [c["metadata"]["name"] for c in children(fleet, name)], timeout=30,
               what="the stopped trial's job deleted")
    fleet.kubectl("delete", "tj", name, "-n", "default")


def test_rbac_grants_what_studies_call(fleet):
    """After the studies above: what only studies call (creating trials, reading chief logs) was
    granted and called (test_operator.py leaves these to this module)."""
    sa = fleet.operator_pods()[0]["spec"]["serviceAccountName"]
    called = audit_calls(fleet, f"system:serviceaccount:{SYSTEM_NS}:{sa}")
    grants = granted(fleet, sa)
    assert called <= grants, f"called but not granted: {sorted(called - grants)}"
    assert STUDY_ONLY_GRANTS <= called, f"granted for studies but never called: {sorted(STUDY_ONLY_GRANTS - called)}"
