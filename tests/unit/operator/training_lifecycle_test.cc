// The lifecycle's decisions, table-driven: restarts (per policy, exit code, scope and backoff
// limit), success (per success policy), cleanup (per cleanPodPolicy), and the gang start,
// deadline, TTL and suspend/resume.
#include <gtest/gtest.h>

#include <algorithm>

#include "trainingjob/desired.h"
#include "trainingjob/lifecycle.h"
#include "trainingjob/status.h"

namespace mf::op::training {
namespace {

constexpr int64_t kNow = 1'700'000'000;

Json Replica(int replicas, const std::string& policy) {
  return {
      {"replicas", replicas},
      {"restartPolicy", policy},
      {"template", {{"spec", {{"containers", Json::array({{{"name", "tensorflow"}, {"image", "python:3.11"}}})}}}}}};
}

TrainingJobSpec Spec(Json replica_specs, Json run_policy = Json::object(), std::string success = "Default") {
  Json object = {{"metadata", {{"name", "job"}, {"namespace", "ml"}, {"uid", "u"}}},
                 {"spec",
                  {{"framework", "tensorflow"},
                   {"replicaSpecs", std::move(replica_specs)},
                   {"runPolicy", std::move(run_policy)},
                   {"successPolicy", success}}}};
  auto spec = ParseTrainingJob(object);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return *spec;
}

// A pod as the kubelet reports it: "Running", "Succeeded", "Failed:137" (exit code), "Pending";
// `restarts` in-place restarts of its container.
Json Pod(const TrainingJobSpec& spec, Task task, const std::string& state, int restarts = 0, bool deleting = false) {
  Json pod = DesiredPod(spec, task, {});
  pod["metadata"]["uid"] = "uid-" + TaskName(spec, task);
  pod["metadata"]["creationTimestamp"] = FormatTime(kNow - 10);
  if (deleting) pod["metadata"]["deletionTimestamp"] = FormatTime(kNow);
  std::string phase = state;
  Json container = {{"name", "tensorflow"}, {"restartCount", restarts}};
  if (state.starts_with("Failed:") || state == "Succeeded") {
    phase = state == "Succeeded" ? "Succeeded" : "Failed";
    const int code = state == "Succeeded" ? 0 : std::stoi(state.substr(7));
    container["state"] = {{"terminated", {{"exitCode", code}, {"reason", code == 0 ? "Completed" : "Error"}}}};
  } else if (state == "Running") {
    container["state"] = {{"running", Json::object()}};
  } else if (state.starts_with("Crashed:")) {  // the kubelet will restart it in place
    phase = "Running";
    container["state"] = {{"terminated", {{"exitCode", std::stoi(state.substr(8))}, {"reason", "Error"}}}};
  }
  if (restarts > 0) container["lastState"] = {{"terminated", {{"exitCode", 137}, {"reason", "Error"}}}};
  pod["status"] = {{"phase", phase}, {"containerStatuses", Json::array({container})}};
  return pod;
}

Json RunningStatus(int64_t restarts = 0) {
  Json status = Json::object();
  SetCondition(&status, "Created", true, "TrainingJobCreated", "", FormatTime(kNow - 100));
  SetCondition(&status, "Running", true, "TrainingJobRunning", "", FormatTime(kNow - 100));
  status["startTime"] = FormatTime(kNow - 100);
  status["restarts"] = restarts;
  return status;
}

std::vector<std::string> Names(const std::vector<PodToDelete>& pods) {
  std::vector<std::string> out;
  for (const auto& p : pods) out.push_back(p.name);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> Names(const TrainingJobSpec& spec, const std::vector<Task>& tasks) {
  std::vector<std::string> out;
  for (const auto& t : tasks) out.push_back(TaskName(spec, t));
  std::sort(out.begin(), out.end());
  return out;
}

const Task kChief{ReplicaType::kChief, 0}, kW0{ReplicaType::kWorker, 0}, kW1{ReplicaType::kWorker, 1},
    kPs{ReplicaType::kPS, 0};

struct RestartCase {
  const char* name;
  std::string worker_policy;
  std::string worker1_state;  // the other pods run
  int worker1_restarts;
  int64_t restarts_before;  // status.restarts from the last reconcile
  Json run_policy;
  std::string expected_state;   // Running | Restarting | Failed
  std::string expected_reason;  // of that condition
  std::vector<std::string> expected_deleted;
  int64_t expected_restarts;
};

class RestartTest : public ::testing::TestWithParam<RestartCase> {};

TEST_P(RestartTest, Decides) {
  const auto& c = GetParam();
  const TrainingJobSpec spec =
      Spec({{"Chief", Replica(1, "OnFailure")}, {"Worker", Replica(2, c.worker_policy)}}, c.run_policy);
  LifecycleInput in{.spec = &spec,
                    .old_status = RunningStatus(c.restarts_before),
                    .pods = {Pod(spec, kChief, "Running"), Pod(spec, kW0, "Running"),
                             Pod(spec, kW1, c.worker1_state, c.worker1_restarts)},
                    .now = kNow};
  const LifecycleDecision d = Decide(in);
  EXPECT_EQ(d.status["state"], c.expected_state) << d.status.dump();
  EXPECT_EQ(FindCondition(d.status, c.expected_state)["reason"], c.expected_reason);
  EXPECT_EQ(Names(d.remove), c.expected_deleted);
  EXPECT_EQ(d.status["restarts"], c.expected_restarts);
  EXPECT_TRUE(d.create.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Table, RestartTest,
    ::testing::Values(
        // Pod scope.
        RestartCase{"ExitCodeRetryable",
                    "ExitCode",
                    "Failed:137",
                    0,
                    0,
                    {},
                    "Restarting",
                    "TrainingJobRestarting",
                    {"job-worker-1"},
                    1},
        RestartCase{"ExitCodePermanent",
                    "ExitCode",
                    "Failed:1",
                    0,
                    0,
                    {},
                    "Failed",
                    "TrainingJobFailed",
                    {"job-chief-0", "job-worker-0"},
                    0},
        RestartCase{"NeverFails",
                    "Never",
                    "Failed:137",
                    0,
                    0,
                    {},
                    "Failed",
                    "TrainingJobFailed",
                    {"job-chief-0", "job-worker-0"},
                    0},
        RestartCase{"OnFailureEvictedPodIsRecreated",
                    "OnFailure",
                    "Failed:0",
                    0,
                    0,
                    {},
                    "Restarting",
                    "TrainingJobRestarting",
                    {"job-worker-1"},
                    1},
        RestartCase{
            "InPlaceRestartIsCounted", "OnFailure", "Running", 1, 0, {}, "Restarting", "TrainingJobRestarting", {}, 1},
        RestartCase{
            "NoNewRestartKeepsRunning", "OnFailure", "Running", 1, 1, {}, "Running", "TrainingJobRunning", {}, 1},
        RestartCase{"BackoffLimitReachedInPlace",
                    "OnFailure",
                    "Running",
                    3,
                    2,
                    {{"backoffLimit", 2}},
                    "Failed",
                    "BackoffLimitExceeded",
                    {"job-chief-0", "job-worker-0", "job-worker-1"},
                    3},
        RestartCase{"BackoffLimitReachedByFailedPod",
                    "ExitCode",
                    "Failed:143",
                    0,
                    0,
                    {{"backoffLimit", 0}},
                    "Failed",
                    "BackoffLimitExceeded",
                    {"job-chief-0", "job-worker-0"},
                    0},
        // Job scope: everything goes, one restart counted.
        RestartCase{"JobScopeRestartsEveryPod",
                    "ExitCode",
                    "Failed:137",
                    0,
                    0,
                    {{"restartScope", "Job"}},
                    "Restarting",
                    "TrainingJobRestarting",
                    {"job-chief-0", "job-worker-0", "job-worker-1"},
                    1},
        RestartCase{"PodScopeLeavesACrashToTheKubelet",
                    "OnFailure",
                    "Crashed:137",
                    0,
                    0,
                    {},
                    "Running",
                    "TrainingJobRunning",
                    {},
                    0},
        RestartCase{"JobScopeRestartsOnACrashAtOnce",
                    "OnFailure",
                    "Crashed:137",
                    0,
                    0,
                    {{"restartScope", "Job"}},
                    "Restarting",
                    "TrainingJobRestarting",
                    {"job-chief-0", "job-worker-0", "job-worker-1"},
                    1},
        RestartCase{"JobScopeAfterInPlaceRestart",
                    "OnFailure",
                    "Running",
                    1,
                    0,
                    {{"restartScope", "Job"}},
                    "Restarting",
                    "TrainingJobRestarting",
                    {"job-chief-0", "job-worker-0", "job-worker-1"},
                    1}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(RestartTest, ClearMessages) {
  const TrainingJobSpec spec = Spec({{"Worker", Replica(2, "ExitCode")}}, {{"backoffLimit", 1}});
  LifecycleInput in{.spec = &spec,
                    .old_status = RunningStatus(1),
                    .pods = {Pod(spec, kW0, "Running"), Pod(spec, kW1, "Failed:137")},
                    .now = kNow};
  in.old_status["pastRestarts"] = 1;
  const LifecycleDecision d = Decide(in);
  EXPECT_EQ(FindCondition(d.status, "Failed")["message"],
            "TrainingJob job has failed because it has reached the specified backoff limit (1 restarts): Worker 1 "
            "(pod job-worker-1) failed with exit code 137 (Error)");
  ASSERT_FALSE(d.events.empty());
  EXPECT_TRUE(d.events.back().warning);

  LifecycleInput permanent{.spec = &spec,
                           .old_status = RunningStatus(),
                           .pods = {Pod(spec, kW0, "Running"), Pod(spec, kW1, "Failed:2")},
                           .now = kNow};
  EXPECT_EQ(FindCondition(Decide(permanent).status, "Failed")["message"],
            "TrainingJob job has failed: Worker 1 (pod job-worker-1) failed with exit code 2 (Error) and restartPolicy "
            "ExitCode (exit codes 1-127 are permanent)");
}

TEST(RestartTest, DeadChiefOrPsFailsTheJob) {
  const TrainingJobSpec spec =
      Spec({{"Chief", Replica(1, "Never")}, {"PS", Replica(1, "ExitCode")}, {"Worker", Replica(1, "OnFailure")}});
  for (const auto& [dead, state] : {std::pair{kChief, "Failed:1"}, std::pair{kPs, "Failed:3"}}) {
    std::vector<Json> pods;
    for (Task t : {kChief, kPs, kW0}) pods.push_back(Pod(spec, t, t.type == dead.type ? state : "Running"));
    const LifecycleDecision d = Decide({.spec = &spec, .old_status = RunningStatus(), .pods = pods, .now = kNow});
    EXPECT_EQ(d.status["state"], "Failed") << TaskName(spec, dead);
  }
}

TEST(RestartTest, RecreatesADeletedPodOnceItIsGone) {
  const TrainingJobSpec spec = Spec({{"Worker", Replica(2, "ExitCode")}});
  Json status = RunningStatus(1);
  status["pastRestarts"] = 1;
  LifecycleDecision d = Decide({.spec = &spec,
                                .old_status = status,
                                .pods = {Pod(spec, kW0, "Running"), Pod(spec, kW1, "Failed:137", 0, true)},
                                .now = kNow});
  EXPECT_TRUE(d.create.empty());
  EXPECT_GT(d.requeue_after, 0);
  d = Decide({.spec = &spec, .old_status = d.status, .pods = {Pod(spec, kW0, "Running")}, .now = kNow});
  EXPECT_EQ(Names(spec, d.create), std::vector<std::string>{"job-worker-1"});
  EXPECT_EQ(d.status["restarts"], 1);
}

struct SuccessCase {
  const char* name;
  bool chief;
  std::string policy;
  std::vector<std::string> worker_states;
  std::string chief_state;
  bool succeeded;
};

class SuccessTest : public ::testing::TestWithParam<SuccessCase> {};

TEST_P(SuccessTest, Decides) {
  const auto& c = GetParam();
  Json replicas = {{"Worker", Replica(static_cast<int>(c.worker_states.size()), "OnFailure")}};
  if (c.chief) replicas["Chief"] = Replica(1, "OnFailure");
  const TrainingJobSpec spec = Spec(replicas, {}, c.policy);
  std::vector<Json> pods;
  if (c.chief) pods.push_back(Pod(spec, kChief, c.chief_state));
  for (size_t i = 0; i < c.worker_states.size(); ++i) {
    pods.push_back(Pod(spec, {ReplicaType::kWorker, static_cast<int32_t>(i)}, c.worker_states[i]));
  }
  const LifecycleDecision d = Decide({.spec = &spec, .old_status = RunningStatus(), .pods = pods, .now = kNow});
  EXPECT_EQ(IsConditionTrue(d.status, "Succeeded"), c.succeeded) << d.status.dump();
  if (c.succeeded) {
    EXPECT_EQ(d.status["completionTime"], FormatTime(kNow));
    EXPECT_FALSE(IsConditionTrue(d.status, "Running"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, SuccessTest,
    ::testing::Values(SuccessCase{"ChiefDone", true, "Default", {"Running", "Running"}, "Succeeded", true},
                      SuccessCase{
                          "ChiefRunningWorkersDone", true, "Default", {"Succeeded", "Succeeded"}, "Running", false},
                      SuccessCase{"Worker0Done", false, "Default", {"Succeeded", "Running"}, "", true},
                      SuccessCase{"Worker1DoneOnly", false, "Default", {"Running", "Succeeded"}, "", false},
                      SuccessCase{"AllWorkersWaitsForAll", false, "AllWorkers", {"Succeeded", "Running"}, "", false},
                      SuccessCase{"AllWorkersDone", false, "AllWorkers", {"Succeeded", "Succeeded"}, "", true}),
    [](const auto& info) { return std::string(info.param.name); });

struct CleanupCase {
  const char* name;
  std::string policy;
  std::vector<std::string> deleted;
  bool services;
};

class CleanupTest : public ::testing::TestWithParam<CleanupCase> {};

TEST_P(CleanupTest, AfterSuccess) {
  const auto& c = GetParam();
  const TrainingJobSpec spec =
      Spec({{"Chief", Replica(1, "OnFailure")}, {"PS", Replica(1, "OnFailure")}, {"Worker", Replica(1, "OnFailure")}},
           {{"cleanPodPolicy", c.policy}});
  const LifecycleDecision d =
      Decide({.spec = &spec,
              .old_status = RunningStatus(),
              .pods = {Pod(spec, kChief, "Succeeded"), Pod(spec, kPs, "Running"), Pod(spec, kW0, "Succeeded")},
              .now = kNow});
  EXPECT_EQ(d.status["state"], "Succeeded");
  EXPECT_EQ(Names(d.remove), c.deleted);
  EXPECT_EQ(d.remove_services, c.services);
}

INSTANTIATE_TEST_SUITE_P(Table, CleanupTest,
                         ::testing::Values(CleanupCase{"Running", "Running", {"job-ps-0"}, false},
                                           CleanupCase{"All", "All", {"job-chief-0", "job-ps-0", "job-worker-0"}, true},
                                           CleanupCase{"None", "None", {}, false}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(LifecycleTest, GangStartCreatesAllOrNone) {
  const TrainingJobSpec spec = Spec({{"Chief", Replica(1, "OnFailure")}, {"Worker", Replica(2, "OnFailure")}});
  ASSERT_TRUE(WantsGangStart(spec, Json::object(), {}));
  LifecycleDecision d = Decide({.spec = &spec, .now = kNow, .gang_problem = "pod job-worker-1 does not fit"});
  EXPECT_TRUE(d.create.empty());
  EXPECT_EQ(FindCondition(d.status, "Running")["reason"], "Unschedulable");
  EXPECT_EQ(FindCondition(d.status, "Running")["message"],
            "none of the job's pods is created: pod job-worker-1 does not fit");
  EXPECT_EQ(d.status["state"], "Created");
  EXPECT_GT(d.requeue_after, 0);
  d = Decide({.spec = &spec, .old_status = d.status, .now = kNow});
  EXPECT_EQ(Names(spec, d.create), (std::vector<std::string>{"job-chief-0", "job-worker-0", "job-worker-1"}));
  EXPECT_EQ(d.status["startTime"], FormatTime(kNow));
  EXPECT_FALSE(WantsGangStart(spec, d.status, {Pod(spec, kChief, "Pending")}));
}

TEST(LifecycleTest, RunningOncePodsRunAndStuckPendingIsReported) {
  const TrainingJobSpec spec = Spec({{"Worker", Replica(2, "OnFailure")}});
  Json pending = Pod(spec, kW1, "Pending");
  pending["status"]["conditions"] = {{{"type", "PodScheduled"},
                                      {"status", "False"},
                                      {"reason", "Unschedulable"},
                                      {"message", "0/1 nodes are available"}}};
  Json status = Json::object();
  LifecycleDecision d =
      Decide({.spec = &spec, .old_status = status, .pods = {Pod(spec, kW0, "Running"), pending}, .now = kNow});
  EXPECT_EQ(FindCondition(d.status, "Running")["reason"], "PodsPending");
  d = Decide({.spec = &spec, .old_status = d.status, .pods = {Pod(spec, kW0, "Running"), pending}, .now = kNow + 60});
  EXPECT_EQ(FindCondition(d.status, "Running")["reason"], "PodsStuckPending");
  EXPECT_NE(FindCondition(d.status, "Running")["message"].get<std::string>().find("0/1 nodes are available"),
            std::string::npos);
  d = Decide({.spec = &spec,
              .old_status = d.status,
              .pods = {Pod(spec, kW0, "Running"), Pod(spec, kW1, "Running")},
              .now = kNow + 61});
  EXPECT_EQ(d.status["state"], "Running");
  EXPECT_EQ(d.status["replicaStatuses"]["Worker"], Json({{"active", 2}, {"succeeded", 0}, {"failed", 0}}));
}

TEST(LifecycleTest, ActiveDeadline) {
  const TrainingJobSpec spec = Spec({{"Worker", Replica(1, "OnFailure")}}, {{"activeDeadlineSeconds", 100}});
  LifecycleDecision d =
      Decide({.spec = &spec, .old_status = RunningStatus(), .pods = {Pod(spec, kW0, "Running")}, .now = kNow - 1});
  EXPECT_EQ(d.status["state"], "Running");
  EXPECT_EQ(d.requeue_after, 1);
  d = Decide({.spec = &spec, .old_status = RunningStatus(), .pods = {Pod(spec, kW0, "Running")}, .now = kNow});
  EXPECT_EQ(d.status["state"], "Failed");
  EXPECT_EQ(FindCondition(d.status, "Failed")["reason"], "DeadlineExceeded");
  EXPECT_EQ(Names(d.remove), std::vector<std::string>{"job-worker-0"});
}

TEST(LifecycleTest, TtlDeletesTheJobAndFinishedConditionsStay) {
  const TrainingJobSpec spec = Spec({{"Worker", Replica(1, "OnFailure")}}, {{"ttlSecondsAfterFinished", 30}});
  LifecycleDecision d =
      Decide({.spec = &spec, .old_status = RunningStatus(), .pods = {Pod(spec, kW0, "Succeeded")}, .now = kNow});
  EXPECT_EQ(d.status["state"], "Succeeded");
  EXPECT_FALSE(d.delete_job);
  EXPECT_EQ(d.requeue_after, 30);
  // A later failure of a pod changes nothing once the job is finished.
  LifecycleDecision later =
      Decide({.spec = &spec, .old_status = d.status, .pods = {Pod(spec, kW0, "Failed:1")}, .now = kNow + 30});
  EXPECT_TRUE(later.delete_job);
  EXPECT_EQ(later.status["state"], "Succeeded");
  EXPECT_EQ(later.status["conditions"], d.status["conditions"]);
}

TEST(LifecycleTest, SuspendDeletesPodsAndResumeStartsAgain) {
  const TrainingJobSpec running = Spec({{"Worker", Replica(2, "OnFailure")}});
  const TrainingJobSpec suspended = Spec({{"Worker", Replica(2, "OnFailure")}}, {{"suspend", true}});
  LifecycleDecision d = Decide({.spec = &suspended,
                                .old_status = RunningStatus(),
                                .pods = {Pod(suspended, kW0, "Running", 1), Pod(suspended, kW1, "Running")},
                                .now = kNow});
  EXPECT_EQ(d.status["state"], "Suspended");
  EXPECT_EQ(FindCondition(d.status, "Suspended")["reason"], "TrainingJobSuspended");
  EXPECT_EQ(FindCondition(d.status, "Running")["status"], "False");
  EXPECT_EQ(Names(d.remove), (std::vector<std::string>{"job-worker-0", "job-worker-1"}));
  EXPECT_FALSE(d.status.contains("startTime"));
  EXPECT_EQ(d.status["restarts"], 1);
  EXPECT_FALSE(WantsGangStart(suspended, d.status, {}));

  ASSERT_TRUE(WantsGangStart(running, d.status, {}));
  d = Decide({.spec = &running, .old_status = d.status, .now = kNow + 5});
  EXPECT_EQ(FindCondition(d.status, "Suspended")["status"], "False");
  EXPECT_EQ(FindCondition(d.status, "Suspended")["reason"], "TrainingJobResumed");
  EXPECT_EQ(d.create.size(), 2u);
  EXPECT_EQ(d.status["startTime"], FormatTime(kNow + 5));
}

TEST(LifecycleTest, InvalidSpec) {
  const Json status = InvalidSpecStatus(Json::object(), "job", "spec.replicaSpecs.Master: no", kNow);
  EXPECT_EQ(status["state"], "Failed");
  EXPECT_EQ(FindCondition(status, "Failed")["reason"], "FailedValidation");
}

}  // namespace
}  // namespace mf::op::training
