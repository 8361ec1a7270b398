#include "trainingjob/study/trial_job.h"

#include <gtest/gtest.h>

namespace mf::op::study {
namespace {

Json StudyJob() {
  return Json::parse(R"({
    "apiVersion": "modelfleet.io/v1alpha1", "kind": "TrainingJob",
    "metadata": {"name": "tune", "namespace": "ml", "uid": "u-1", "labels": {"team": "a"}},
    "spec": {
      "framework": "tensorflow",
      "replicaSpecs": {
        "Chief": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "train", "image": "python", "command": ["python", "train.py"],
             "env": [{"name": "EPOCHS", "value": "3"}]},
            {"name": "sidecar", "image": "busybox"}]}}},
        "Worker": {"replicas": 2, "template": {"spec": {"containers": [
            {"name": "train", "image": "python", "args": ["--data=/d"]}]}}}
      },
      "runPolicy": {"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 60, "backoffLimit": 1},
      "output": {"modelUri": "pvc://store/tune/", "deployTo": {"modelDeployment": "m"}},
      "hyperparameters": {"metricTag": "accuracy", "maxTrials": 4,
        "params": [{"name": "lr", "type": "DOUBLE", "min": 0.001, "max": 0.1},
                   {"name": "opt", "type": "CATEGORICAL", "values": ["sgd", "adam"]}]}
    }})");
}

Trial SomeTrial() {
  Trial t;
  t.name = "tune-trial-3";
  t.parameters = {{"lr", 0.01}, {"opt", "adam"}};
  return t;
}

TEST(TrialJobTest, TheStudysSpecWithTheTrialsArguments) {
  const Json job = StudyJob();
  auto study = ParseStudySpec(job["spec"]["hyperparameters"]);
  ASSERT_TRUE(study.ok()) << study.status().message();
  const Json child = BuildTrialJob(job, *study, SomeTrial());

  EXPECT_EQ(child["metadata"]["name"], "tune-trial-3");
  EXPECT_EQ(child["metadata"]["namespace"], "ml");
  EXPECT_EQ(child["metadata"]["labels"]["team"], "a");
  EXPECT_EQ(child["metadata"]["labels"][kStudyLabel], "tune");
  const Json& owner = child["metadata"]["ownerReferences"][0];
  EXPECT_EQ(owner["uid"], "u-1");
  EXPECT_EQ(owner["kind"], "TrainingJob");
  EXPECT_EQ(owner["controller"], true);

  const Json& spec = child["spec"];
  EXPECT_FALSE(spec.contains("hyperparameters"));
  EXPECT_EQ(spec["framework"], "tensorflow");
  EXPECT_EQ(spec["output"]["modelUri"], "pvc://store/tune/tune-trial-3");
  EXPECT_FALSE(spec["output"].contains("deployTo"));
  EXPECT_EQ(spec["runPolicy"]["cleanPodPolicy"], "Running");  // the chief's log outlives the job
  EXPECT_FALSE(spec["runPolicy"].contains("ttlSecondsAfterFinished"));
  EXPECT_EQ(spec["runPolicy"]["backoffLimit"], 1);

  const Json& chief = spec["replicaSpecs"]["Chief"]["template"]["spec"]["containers"];
  EXPECT_EQ(chief[0]["args"], Json::parse(R"(["--lr=0.01", "--opt=adam"])"));
  EXPECT_EQ(chief[0]["command"], Json::parse(R"(["python", "train.py"])"));
  EXPECT_EQ(chief[0]["terminationMessagePath"], "/dev/termination-log");
  EXPECT_EQ(chief[0]["env"], Json::parse(R"([{"name": "EPOCHS", "value": "3"},
                            {"name": "MODELFLEET_METRICS_FILE", "value": "/dev/termination-log"}])"));
  EXPECT_FALSE(chief[1].contains("args"));  // only the first container is the trainer
  const Json& worker = spec["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(worker["args"], Json::parse(R"(["--data=/d", "--lr=0.01", "--opt=adam"])"));
  EXPECT_FALSE(worker.contains("env"));  // the chief reports the metric
}

TEST(TrialJobTest, TheMetricComesFromMasterOrWorkerZeroWithoutAChief) {
  EXPECT_EQ(MetricReplicaType(Json::parse(R"({"replicaSpecs": {"Worker": {}, "PS": {}}})")), "Worker");
  EXPECT_EQ(MetricReplicaType(Json::parse(R"({"replicaSpecs": {"Worker": {}, "Master": {}}})")), "Master");
  EXPECT_EQ(MetricReplicaType(Json::parse(R"({"replicaSpecs": {"Chief": {}, "Worker": {}}})")), "Chief");
  EXPECT_EQ(MetricReplicaType(Json::parse(R"({"replicaSpecs": {"PS": {}}})")), "");
  EXPECT_EQ(MetricReplicaType(Json::parse(R"({"replicaSpecs": 3})")), "");
  EXPECT_EQ(MetricContainerName(StudyJob()["spec"]), "train");
  EXPECT_EQ(MetricContainerName(Json::parse(R"({"replicaSpecs": {"Worker": {"template": {}}}})")), "");
}

TEST(TrialJobTest, AMetricsFileTheTrainerNamedBecomesTheTerminationMessage) {
  Json job = StudyJob();
  job["spec"]["replicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["env"] =
      Json::parse(R"([{"name": "MODELFLEET_METRICS_FILE", "value": "/tmp/metrics.txt"}])");
  auto study = ParseStudySpec(job["spec"]["hyperparameters"]);
  const Json child = BuildTrialJob(job, *study, SomeTrial());
  const Json& c = child["spec"]["replicaSpecs"]["Chief"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["terminationMessagePath"], "/tmp/metrics.txt");
  EXPECT_EQ(c["env"], Json::parse(R"([{"name": "MODELFLEET_METRICS_FILE", "value": "/tmp/metrics.txt"}])"));
  // Or the container's own terminationMessagePath.
  EXPECT_EQ(MetricsFilePath(Json::parse(R"({"terminationMessagePath": "/m"})")), "/m");
  EXPECT_EQ(MetricsFilePath(Json::parse(R"({"env": [{"name": "MODELFLEET_METRICS_FILE", "valueFrom": {}}]})")),
            "/dev/termination-log");
}

TEST(TrialJobTest, TerminationMessageOfTheMetricContainer) {
  const Json pod = Json::parse(R"({"status": {"containerStatuses": [
      {"name": "sidecar", "state": {"terminated": {"exitCode": 0, "message": "other"}}},
      {"name": "train", "state": {"terminated": {"exitCode": 0, "message": "accuracy=0.9\n"}}}]}})");
  EXPECT_EQ(TerminationMessage(pod, "train"), "accuracy=0.9\n");
  const Json running =
      Json::parse(R"({"status": {"containerStatuses": [{"name": "train", "state": {"running": {}}}]}})");
  EXPECT_EQ(TerminationMessage(running, "train"), std::nullopt);
  const Json empty =
      Json::parse(R"({"status": {"containerStatuses": [{"name": "train", "state": {"terminated": {}}}]}})");
  EXPECT_EQ(TerminationMessage(empty, "train"), "");
  EXPECT_EQ(TerminationMessage(Json::parse(R"({"status": 1})"), "train"), std::nullopt);
}

}  // namespace
}  // namespace mf::op::study
