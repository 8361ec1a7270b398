// ReconcileStudy() against the in-memory API server: decisions are written to status before they
// are acted on, acting twice is harmless, metrics come from the chief's log, stopped trials lose
// their jobs, and a bad spec touches nothing.
#include "trainingjob/study/study_reconcile.h"

#include <gtest/gtest.h>

#include "k8s/event_recorder.h"
#include "tests/unit/k8s/fake_api_server.h"
#include "trainingjob/desired.h"
#include "trainingjob/study/planner.h"

namespace mf::op::study {
namespace {

constexpr char kJobs[] = "/apis/modelfleet.io/v1alpha1/trainingjobs";

Json StudyJob() {
  return Json::parse(R"({
    "apiVersion": "modelfleet.io/v1alpha1", "kind": "TrainingJob",
    "metadata": {"name": "tune", "namespace": "ml", "uid": "u-1"},
    "spec": {
      "replicaSpecs": {"Chief": {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [
          {"name": "train", "image": "modelfleet/python-train", "args": ["train.py"]}]}}}},
      "hyperparameters": {"metricTag": "accuracy", "maxTrials": 3, "maxParallelTrials": 2, "algorithm": "random",
        "params": [{"name": "lr", "type": "DOUBLE", "min": 0.001, "max": 0.1, "scaleType": "UNIT_LOG_SCALE"}]}
    }})");
}

class StudyReconcileTest : public ::testing::Test {
 protected:
  // One reconcile of `job` (its status as the last one left it), as the controller runs it.
  StudyOutcome Reconcile(const Json& job) {
    auto spec = training::ParseTrainingJob(job);
    EXPECT_TRUE(spec.ok()) << spec.status().message();
    const StudyContext context{client_, events_, jobs_, pods_, 1'800'000'000};
    return ReconcileStudy(context, job, *spec);
  }
  static Json WithStatus(Json job, const Json& status) {
    job["status"] = status;
    return job;
  }
  // A child as the controller's cache holds it, with the given condition True ("" = running).
  void CacheChild(const std::string& name, const std::string& condition) {
    Json child = *server_->Object(kJobs, "ml", name);
    if (!condition.empty()) {
      child["status"]["conditions"] = Json::array({{{"type", condition}, {"status", "True"}, {"reason", "Done"}}});
    }
    jobs_.Upsert("ml/" + name, child);
  }
  void CacheChiefPod(const std::string& job, const std::string& log) {
    const std::string pod = job + "-chief-0";
    Json p = {{"metadata",
               {{"name", pod},
                {"namespace", "ml"},
                {"labels", {{training::kJobNameLabel, job}, {training::kJobRoleLabel, "master"}}}}},
              {"status", Json::object()}};
    pods_.Upsert("ml/" + pod, p);
    server_->SetPodLog("ml", pod, log);
  }
  std::vector<std::string> ChildrenOnServer() {
    std::vector<std::string> names;
    for (const char* n : {"tune-trial-1", "tune-trial-2", "tune-trial-3", "tune-trial-4"}) {
      if (server_->Object(kJobs, "ml", n)) names.push_back(n);
    }
    return names;
  }

  std::shared_ptr<k8s::testing::FakeApiServer> server_ = std::make_shared<k8s::testing::FakeApiServer>();
  k8s::Client client_{server_, k8s::ClusterConfig{}, k8s::ClientOptions{.qps = 0}};
  k8s::EventRecorder events_{client_, {.component = "test"}};
  k8s::Store jobs_, pods_;
};

TEST_F(StudyReconcileTest, RecordsTrialsFirstThenCreatesTheirJobsOnce) {
  const Json job = StudyJob();
  // First: two trials recorded, no job created yet, and a quick requeue to act on the record.
  StudyOutcome first = Reconcile(job);
  ASSERT_TRUE(first.error.ok()) << first.error.message();
  ASSERT_EQ(first.status["trials"].size(), 2u);
  EXPECT_EQ(first.status["trials"][0]["phase"], "Pending");
  EXPECT_TRUE(ChildrenOnServer().empty());
  EXPECT_EQ(first.requeue_after, std::chrono::seconds(1));
  EXPECT_EQ(first.status["state"], "Running");
  EXPECT_EQ(first.status["trialSummary"], "0/3 done, 2 running");

  // Next, from the stored status: the recorded trials' jobs, with their arguments.
  StudyOutcome second = Reconcile(WithStatus(job, first.status));
  ASSERT_TRUE(second.error.ok()) << second.error.message();
  EXPECT_EQ(ChildrenOnServer(), (std::vector<std::string>{"tune-trial-1", "tune-trial-2"}));
  EXPECT_EQ(second.status["trials"], first.status["trials"]);  // the same trials, nothing new
  const Json child = *server_->Object(kJobs, "ml", "tune-trial-1");
  const Json args = child["spec"]["replicaSpecs"]["Chief"]["template"]["spec"]["containers"][0]["args"];
  EXPECT_EQ(args, Json::array({"train.py", "--lr=" + FormatValue(first.status["trials"][0]["parameters"]["lr"])}));

  // An operator restarted before its cache shows the children does it again: AlreadyExists, no error.
  StudyOutcome again = Reconcile(WithStatus(job, first.status));
  EXPECT_TRUE(again.error.ok()) << again.error.message();
  EXPECT_EQ(ChildrenOnServer().size(), 2u);

  // Trial 1 succeeds with its metric in the chief's log; trial 2 runs; trial 3 is recorded.
  CacheChild("tune-trial-1", "Succeeded");
  CacheChild("tune-trial-2", "");
  CacheChiefPod("tune-trial-1", "epoch 1\nmodelfleet-metric accuracy=0.5\nmodelfleet-metric accuracy=0.75\n");
  StudyOutcome third = Reconcile(WithStatus(job, second.status));
  ASSERT_TRUE(third.error.ok()) << third.error.message();
  const Json& trials = third.status["trials"];
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[0]["phase"], "Succeeded");
  EXPECT_EQ(trials[0]["metric"], 0.75);
  EXPECT_EQ(trials[1]["phase"], "Running");
  EXPECT_EQ(trials[2]["phase"], "Pending");
  EXPECT_EQ(third.status["bestTrial"]["name"], "tune-trial-1");
  EXPECT_EQ(ChildrenOnServer().size(), 2u);  // trial 3's job waits for the record to be stored
}

TEST_F(StudyReconcileTest, AStoppedTrialLosesItsJobAndAMissingMetricFailsTheTrial) {
  Json job = StudyJob();
  job["spec"]["hyperparameters"]["maxTrials"] = 2;
  StudyOutcome first = Reconcile(job);
  Reconcile(WithStatus(job, first.status));
  ASSERT_EQ(ChildrenOnServer().size(), 2u);
  CacheChild("tune-trial-1", "");
  CacheChild("tune-trial-2", "Succeeded");
  CacheChiefPod("tune-trial-2", "no metric here\n");
  // As if the median rule had stopped trial 1 in an earlier reconcile.
  Json status = first.status;
  status["trials"][0]["phase"] = "Stopped";
  status["trials"][0]["reason"] = "EarlyStopped";
  StudyOutcome out = Reconcile(WithStatus(job, status));
  ASSERT_TRUE(out.error.ok()) << out.error.message();
  EXPECT_EQ(ChildrenOnServer(), std::vector<std::string>{"tune-trial-2"});
  const Json& failed = out.status["trials"][1];
  EXPECT_EQ(failed["phase"], "Failed");
  EXPECT_EQ(failed["reason"], "MetricNotReported");
  EXPECT_NE(failed["message"].get<std::string>().find("pod tune-trial-2-chief-0"), std::string::npos);
  // Both trials are over and none reported a metric: the study failed, and says so.
  EXPECT_EQ(out.status["state"], "Failed");
  EXPECT_FALSE(out.status.contains("bestTrial"));
}

TEST_F(StudyReconcileTest, ABadSpecIsReportedAndTouchesNothing) {
  const Json good = StudyJob();
  StudyOutcome first = Reconcile(good);
  Reconcile(WithStatus(good, first.status));
  ASSERT_EQ(ChildrenOnServer().size(), 2u);
  events_.Flush();  // Events are written in the background
  const size_t requests = server_->requests().size();

  Json bad = WithStatus(good, first.status);
  bad["spec"]["hyperparameters"]["params"][0]["min"] = 0;  // a log scale from 0
  StudyOutcome out = Reconcile(bad);
  EXPECT_EQ(out.status["state"], "Failed");
  EXPECT_EQ(out.status["trials"], first.status["trials"]);
  bool reported = false;
  for (const auto& c : out.status["conditions"]) {
    if (c["type"] == "Failed") {
      reported =
          c["reason"] == "InvalidSpec" &&
          c["message"].get<std::string>().find("UNIT_LOG_SCALE needs every value greater than 0") != std::string::npos;
    }
  }
  EXPECT_TRUE(reported) << out.status.dump();
  events_.Flush();
  EXPECT_EQ(server_->requests().size(), requests);
  EXPECT_EQ(ChildrenOnServer().size(), 2u);

  // Fixed: the study carries on and is no longer Failed.
  StudyOutcome fixed = Reconcile(WithStatus(good, out.status));
  EXPECT_EQ(fixed.status["state"], "Running");
}

TEST_F(StudyReconcileTest, AStudyWhoseTrialsCouldNotRunIsRefused) {
  Json job = StudyJob();
  job["metadata"]["name"] = std::string(50, 'a');  // fits "<name>-chief-0", not "<name>-trial-3-chief-0"
  StudyOutcome out = Reconcile(job);
  EXPECT_EQ(out.status["state"], "Failed");
  EXPECT_NE(out.status.dump().find("its trials' TrainingJobs would be refused"), std::string::npos)
      << out.status.dump();
  EXPECT_FALSE(out.status.contains("trials"));
}

}  // namespace
}  // namespace mf::op::study
