"""TensorFlow on TrainingJobs.

- The TF_CONFIG the operator writes (the controller's own code, through modelfleet-tfconfig) for
  every replica layout, read back by TensorFlow's TFConfigClusterResolver and checked by the
  validation its multi-worker strategies run (multi_worker_util); a Master replica, which those
  strategies refuse, is refused by the operator first, with a message saying to use a Chief.
- The trainers' own TF_CONFIG handling (examples/training/tf_cluster.py).
- On modelfleet-local, with the chart-installed operator: the MultiWorkerMirroredStrategy job
  (chief + 2 workers) and the ParameterServerStrategy job (chief + 2 workers + ps) train for real
  across their pods, succeed, report their accuracy and leave a model.onnx that serves the digits.
"""
import json
import re
import subprocess
import sys
import time

import pytest
import yaml

from conftest import ROOT, build_dir, free_port
from local_fixtures import wait_until

sys.path.insert(0, str(ROOT / "examples" / "training"))
import tf_cluster  # noqa: E402 (the trainers' module, imported from examples/training)

pytestmark = pytest.mark.go_components

NS = "ml"
PORT = 2222

# Replica layouts and the strategy each is for.
LAYOUTS = {
    "mwms-chief-2-workers": {"Chief": 1, "Worker": 2},
    "mwms-workers-only": {"Worker": 3},
    "pss-chief-workers-ps": {"Chief": 1, "Worker": 2, "PS": 2},
    "pss-workers-ps-no-chief": {"Worker": 2, "PS": 1},
    "chief-workers-evaluator": {"Chief": 1, "Worker": 2, "Evaluator": 1},
}


def training_job(name: str, replicas: dict, framework="tensorflow") -> dict:
    container = {"name": "tensorflow", "image": "tensorflow/tensorflow:2.21.0", "command": ["python", "train.py"]}
    return {
        "apiVersion": "modelfleet.io/v1alpha1", "kind": "TrainingJob",
        "metadata": {"name": name, "namespace": NS, "uid": "00000000-0000-0000-0000-000000000001"},
        "spec": {"framework": framework, "port": PORT,
                 "replicaSpecs": {t: {"replicas": n, "template": {"spec": {"containers": [container]}}}
                                  for t, n in replicas.items()}},
    }


def tfconfig_tool(job: dict, *flags) -> subprocess.CompletedProcess:
    tool = build_dir() / "operator" / "modelfleet-tfconfig"
    if not tool.exists():
        pytest.skip(f"{tool} is not built")
    return subprocess.run([str(tool), *flags], input=json.dumps(job), capture_output=True, text=True, timeout=30)


def pod_envs(job: dict, *flags) -> dict:
    result = tfconfig_tool(job, *flags)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def tf():
    import tensorflow
    return tensorflow


def read_with_tensorflow(tf, tf_config: str, monkeypatch):
    """What TensorFlow itself makes of a TF_CONFIG: (cluster dict, task type, task id)."""
    monkeypatch.setenv("TF_CONFIG", tf_config)
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    return resolver.cluster_spec().as_dict(), resolver.task_type, resolver.task_id


# Tests that import TensorFlow into the pytest process run in a pytest process of their own
# (scripts/test.sh): once another module has loaded the generated TF Serving stubs, `tensorflow`
# there is their namespace package and TensorFlow's own protos would clash with theirs.
@pytest.mark.tensorflow_in_process
@pytest.mark.parametrize("distinct_ports", [False, True], ids=["own-network", "shared-network"])
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_operator_tf_config_reads_back_in_tensorflow(tf, monkeypatch, layout, distinct_ports):
    from tensorflow.python.distribute import multi_worker_util
    replicas = LAYOUTS[layout]
    job = training_job("tj", replicas)
    pods = pod_envs(job, *(["--distinct_ports"] if distinct_ports else []))
    expected_pods = {f"tj-{t.lower()}-{i}" for t, n in replicas.items() for i in range(n)}
    assert set(pods) == expected_pods

    clusters = []
    for pod_name, pod in pods.items():
        config = json.loads(pod["env"]["TF_CONFIG"])
        cluster, task_type, task_id = read_with_tensorflow(tf, pod["env"]["TF_CONFIG"], monkeypatch)
        assert (task_type, task_id) == (pod["replicaType"].lower(), pod["index"])
        assert pod_name == f"tj-{task_type}-{task_id}"
        # Kubeflow's form: the evaluator inside the cluster, "environment": "cloud" (which
        # TensorFlow ignores), every job a list in index order.
        assert config.get("environment") == "cloud"
        assert set(cluster) == {t.lower() for t in replicas}
        counts = {t.lower(): n for t, n in replicas.items()}
        for job_name, addresses in cluster.items():
            hosts = [a.rsplit(":", 1)[0] for a in addresses]
            assert hosts == [f"tj-{job_name}-{i}.{NS}.svc" for i in range(counts[job_name])]
        # The checks MultiWorkerMirroredStrategy and ParameterServerStrategy run on it.
        multi_worker_util._validate_cluster_spec(cluster, task_type, task_id)
        has_chief = "chief" in cluster
        assert multi_worker_util.is_chief(cluster, task_type, task_id) == (
            task_type in ("chief", "evaluator") or (task_type == "worker" and task_id == 0 and not has_chief))
        # The trainers accept it as it is.
        assert tf_cluster.parse(pod["env"]["TF_CONFIG"])["cluster"] == cluster
        clusters.append(cluster)

    # Every pod sees the same cluster.
    assert all(c == clusters[0] for c in clusters)
    ports = [int(a.rsplit(":", 1)[1]) for addresses in clusters[0].values() for a in addresses]
    if distinct_ports:
        # Pods sharing one network namespace cannot share a port: TensorFlow's server listens on
        # 0.0.0.0:<port>.
        assert len(set(ports)) == len(ports)
        assert min(ports) == PORT
    else:
        assert set(ports) == {PORT}

    cluster = clusters[0]
    spec = tf.train.ClusterSpec(cluster)
    if "ps" in cluster:
        # ParameterServerStrategy: at least one ps and one worker; its coordinator is "chief".
        assert multi_worker_util.task_count(spec, "ps") >= 1
        assert multi_worker_util.task_count(spec, "worker") >= 1
    else:
        # MultiWorkerMirroredStrategy: chief and workers are numbered 0..n-1 for the collectives,
        # and the collective leader is the chief (else worker 0).
        trainers = [(t, i) for t in ("chief", "worker") for i in range(len(cluster.get(t, [])))]
        ids = sorted(multi_worker_util.id_in_cluster(spec, t, i) for t, i in trainers)
        assert ids == list(range(len(trainers)))
        assert multi_worker_util.worker_count(spec, "worker") == len(trainers)
        leader = "/job:chief/replica:0/task:0" if "chief" in cluster else "/job:worker/replica:0/task:0"
        assert multi_worker_util.collective_leader(spec, "worker", 0) == leader
    if "evaluator" in cluster:
        assert multi_worker_util.worker_count(spec, "evaluator") == 1


def test_one_pod_job_gets_no_tf_config():
    pods = pod_envs(training_job("solo", {"Worker": 1}))
    assert list(pods) == ["solo-worker-0"]
    assert "TF_CONFIG" not in pods["solo-worker-0"]["env"]


@pytest.mark.tensorflow_in_process
def test_master_replica_is_refused_for_tensorflow(tf):
    from tensorflow.python.distribute import multi_worker_util
    # What TensorFlow would say, much later, inside every pod:
    with pytest.raises(ValueError, match="Disallowed task type"):
        multi_worker_util._validate_cluster_spec({"master": ["m:2222"], "worker": ["w:2222"]}, "worker", 0)
    # The operator refuses the spec itself, and says what to use instead.
    result = tfconfig_tool(training_job("legacy", {"Master": 1, "Worker": 2}))
    assert result.returncode != 0
    assert "Master" in result.stderr and "Chief" in result.stderr, result.stderr


# The trainers' own TF_CONFIG handling.

def test_trainer_refuses_unusable_tf_config():
    cases = {
        "{not json": "not JSON",
        '["a"]': "JSON object",
        '{"cluster": {"master": ["m:1"]}, "task": {"type": "master", "index": 0}}': "use a Chief replica",
        '{"cluster": {"trainer": ["t:1"]}, "task": {"type": "trainer", "index": 0}}': "accepts only",
        '{"cluster": {"worker": ["w0:1"]}, "task": {"type": "chief", "index": 0}}': "not a job of the cluster",
        '{"cluster": {"worker": ["w0:1"]}, "task": {"type": "worker", "index": 1}}': "out of range",
        '{"cluster": {"worker": ["w0"]}, "task": {"type": "worker", "index": 0}}': "host:port",
        '{"cluster": {"worker": {"1": "w1:1"}}, "task": {"type": "worker", "index": 0}}': "sparse",
    }
    for text, message in cases.items():
        with pytest.raises(tf_cluster.ConfigError, match=message):
            tf_cluster.parse(text)
    # The dense dict form TensorFlow's ClusterSpec also accepts becomes a list.
    config = tf_cluster.parse('{"cluster": {"worker": {"1": "w1:1", "0": "w0:1"}}, "task": {"type": "worker"}}')
    assert config["cluster"] == {"worker": ["w0:1", "w1:1"]}


def test_trainer_waits_for_peers_to_resolve_then_uses_addresses():
    answers = {"tj-chief-0.ml.svc": ["10.244.1.7"], "tj-worker-0.ml.svc": [None, None, "10.244.1.8"]}
    calls = []

    def lookup(host):
        calls.append(host)
        queue = answers[host]
        value = queue.pop(0) if len(queue) > 1 else queue[0]
        if value is None:
            raise OSError("not yet")
        return value

    cluster = {"chief": ["tj-chief-0.ml.svc:2222"], "worker": ["tj-worker-0.ml.svc:2223"]}
    resolved = tf_cluster.resolve(cluster, timeout_s=30, lookup=lookup, sleep=lambda s: None)
    assert resolved == {"chief": ["10.244.1.7:2222"], "worker": ["10.244.1.8:2223"]}
    assert calls.count("tj-chief-0.ml.svc") == 1  # a resolved name is not asked again
    assert calls.count("tj-worker-0.ml.svc") == 3

    def never(host):
        raise OSError("no such host")

    with pytest.raises(tf_cluster.ConfigError, match=r"still do not resolve: \['tj-worker-0.ml.svc'\]"):
        tf_cluster.resolve({"worker": ["tj-worker-0.ml.svc:2222"]}, timeout_s=0, lookup=never, sleep=lambda s: None)


def test_trainer_names_a_taken_port_before_tensorflow_fails_on_it():
    import socket
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(tf_cluster.ConfigError, match=f"port {port} is taken.*spec.port values further apart"):
            tf_cluster.check_port_free(port)
    tf_cluster.check_port_free(port)  # free again once nothing listens


# End to end on modelfleet-local: the chart-installed operator runs the example jobs' pods.

def local_job(example: str, model_root) -> dict:
    text = (ROOT / "examples" / "training" / example).read_text().replace("/MODELFLEET_ROOT", str(ROOT))
    job = yaml.safe_load(text)
    job["spec"]["output"]["modelUri"] = f"file://{model_root}"
    return job


@pytest.fixture(scope="module")
def trainer_fleet(fleet):
    args = fleet.cluster.extra_args
    images = yaml.safe_load(open(args[args.index("--image-map") + 1]))["images"]
    if "modelfleet/python-train" not in images:
        pytest.skip("the fleet's image map has no modelfleet/python-train (the trainers' python)")
    return fleet


class JobRun:
    """A TrainingJob applied to the fleet, watched until it finishes; deleted (with its pods) at
    the end, so the next job finds the ports free (pods share one network namespace here)."""

    def __init__(self, fleet, job: dict):
        self.fleet, self.job = fleet, job
        self.name, self.ns = job["metadata"]["name"], job["metadata"]["namespace"]

    def __enter__(self):
        self.started = time.monotonic()
        self.fleet.apply(json.dumps(self.job))
        return self

    def __exit__(self, *exc):
        self.fleet.kubectl("delete", "trainingjob", self.name, "-n", self.ns, "--wait=true", "--timeout=60s",
                           check=False, timeout=90)
        wait_until(lambda: not self.pods(), timeout=60, what=f"{self.name}'s pods gone")

    def get(self) -> dict:
        return self.fleet.json("trainingjob", self.name, "-n", self.ns)

    def pods(self) -> dict:
        items = self.fleet.json("pods", "-n", self.ns)["items"]
        return {p["metadata"]["name"]: p for p in items if p["metadata"]["name"].startswith(self.name + "-")}

    def logs(self, pod: str) -> str:
        return self.fleet.kubectl("logs", pod, "-n", self.ns, check=False).stdout

    def all_logs(self) -> str:
        return "\n".join(f"--- {pod} ({p['status'].get('phase')})\n{self.logs(pod)[-2500:]}"
                         for pod, p in sorted(self.pods().items()))

    def wait_finished(self, timeout: float) -> dict:
        def finished():
            job = self.get()
            done = {c["type"] for c in job.get("status", {}).get("conditions", [])
                    if c["type"] in ("Succeeded", "Failed") and c["status"] == "True"}
            return (job, done) if done else None
        try:
            job, done = wait_until(finished, timeout=timeout, interval=1, what=f"TrainingJob {self.name} finished")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{json.dumps(self.get().get('status'), indent=1)}\n{self.all_logs()}") from None
        self.duration = time.monotonic() - self.started
        assert done == {"Succeeded"}, f"{json.dumps(job.get('status'), indent=1)}\n{self.all_logs()}"
        return job


def metric(log: str) -> float:
    values = re.findall(r"^modelfleet-metric accuracy=([0-9.]+)$", log, re.MULTILINE)
    assert values, f"no metric line in:\n{log[-3000:]}"
    return float(values[-1])


def onnx_accuracy(path) -> float:
    """The exported model's accuracy on the trainers' test split, in ONNX Runtime."""
    import onnxruntime
    import tf_digits
    _, _, x_test, y_test = tf_digits.load_data()
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["images"]
    assert [o.name for o in session.get_outputs()] == ["scores"]
    scores = session.run(None, {"images": x_test})[0]
    assert scores.shape == (len(x_test), 10)
    return float((scores.argmax(axis=1) == y_test).mean())


def served_accuracy(model_base) -> float:
    """The trained model's accuracy on the test split as ModelFleet's own server answers it (TF
    Serving REST) from `model_base`/<version>/model.onnx."""
    import numpy as np
    import requests
    import tf_digits
    _, _, x_test, y_test = tf_digits.load_data()
    rest, grpc_port = free_port(), free_port()
    server = subprocess.Popen([str(build_dir() / "server" / "main" / "modelfleet-server"), "--model_name=digits",
                               f"--model_base_path={model_base}", f"--rest_api_port={rest}", f"--port={grpc_port}",
                               "--grpc_address=127.0.0.1", "--device=cpu"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{rest}/v1/models/digits"

        def available():
            try:
                return requests.get(url, timeout=2).json()["model_version_status"][0]["state"] == "AVAILABLE"
            except (requests.RequestException, KeyError, IndexError, ValueError):
                return False
        wait_until(available, timeout=30, what="the trained model AVAILABLE in modelfleet-server")
        answer = requests.post(url + ":predict", json={"instances": x_test.tolist()}, timeout=30)
        assert answer.status_code == 200, answer.text
        return float((np.array(answer.json()["predictions"]).argmax(axis=1) == y_test).mean())
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_api_server_refuses_a_tensorflow_master_replica(trainer_fleet):
    job = training_job("legacy-master", {"Master": 1, "Worker": 1})
    job["metadata"] = {"name": "legacy-master", "namespace": "default"}
    result = trainer_fleet.kubectl("apply", "--dry-run=server", "-f", "-", input=json.dumps(job), check=False)
    assert result.returncode != 0
    assert "name the coordinating replica Chief" in result.stderr, result.stderr


def test_multi_worker_mirrored_job_trains_across_three_pods(trainer_fleet, tmp_path):
    job = local_job("trainingjob-tf-mwms-local.yaml", tmp_path / "digits-tf")
    with JobRun(trainer_fleet, job) as run:
        run.wait_finished(timeout=240)
        print(f"MultiWorkerMirrored job: Succeeded {run.duration:.1f} s after apply")
        chief = f"{run.name}-chief-0"
        # The job's success is the chief's; a worker still exiting at that moment is deleted by
        # cleanPodPolicy Running, so only the finished pods left are read.
        pods = run.pods()
        assert chief in pods and set(pods) <= {chief, f"{run.name}-worker-0", f"{run.name}-worker-1"}
        assert pods[chief]["status"]["phase"] == "Succeeded"
        logs = {pod: run.logs(pod) for pod, p in pods.items()
                if p["status"].get("phase") == "Succeeded" and not p["metadata"].get("deletionTimestamp")}
        # Three processes in one synchronous ring: each trained 3 replicas in sync and ended with
        # the same weights, hence the same test accuracy.
        finals = set()
        for pod, log in logs.items():
            assert "MultiWorkerMirroredStrategy: 3 replica(s) in sync" in log, log[-3000:]
            finals.add(re.findall(r"test accuracy ([0-9.]+)", log)[-1])
        assert len(finals) == 1, finals
        accuracy = metric(logs[chief])
        assert accuracy >= 0.85
        assert all("modelfleet-metric" not in log for pod, log in logs.items() if pod != chief)
        model = tmp_path / "digits-tf" / "1" / "model.onnx"
        assert model.exists(), run.all_logs()
        assert abs(onnx_accuracy(model) - accuracy) < 1e-3
        # ModelFleet's own runtime serves it with the same answers.
        assert abs(served_accuracy(tmp_path / "digits-tf") - accuracy) < 1e-3


def test_parameter_server_job_trains_and_its_servers_are_cleaned_up(trainer_fleet, tmp_path):
    job = local_job("trainingjob-tf-ps-local.yaml", tmp_path / "digits-tf-ps")
    with JobRun(trainer_fleet, job) as run:
        run.wait_finished(timeout=240)
        print(f"ParameterServer job: Succeeded {run.duration:.1f} s after apply")
        chief = f"{run.name}-chief-0"
        log = run.logs(chief)
        assert "ParameterServerStrategy: 2 worker(s), 1 ps" in log, log[-3000:]
        assert "variables on ['/job:ps/replica:0/task:0/device:CPU:0']" in log, log[-3000:]
        steps = json.loads(re.search(r"steps by worker: (\[.*\])", log).group(1))
        assert sum(steps) == 100 and all(s > 0 for s in steps), steps  # both worker pods trained
        accuracy = metric(log)
        assert accuracy >= 0.85
        # Workers and parameter servers serve until stopped: once the chief succeeded,
        # cleanPodPolicy Running deletes them; the chief's pod stays with its log.
        wait_until(lambda: set(run.pods()) == {chief}, timeout=60, what="worker and ps pods cleaned up")
        assert run.pods()[chief]["status"]["phase"] == "Succeeded"
        model = tmp_path / "digits-tf-ps" / "1" / "model.onnx"
        assert abs(onnx_accuracy(model) - accuracy) < 1e-3
