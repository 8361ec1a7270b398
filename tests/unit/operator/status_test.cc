#include "modeldeployment/status.h"

#include <gtest/gtest.h>

#include "modeldeployment/desired.h"
#include "test_objects.h"

namespace mf::op {
namespace {

using testing::SampleModelDeployment;

struct TrafficCase {
  std::map<std::string, int> weights;
  std::set<std::string> ready;
  std::map<std::string, int> expected;
};

TEST(StatusTest, EffectiveTrafficTable) {
  const TrafficCase cases[] = {
      {{{"v1", 90}, {"v2", 10}}, {"v1", "v2"}, {{"v1", 90}, {"v2", 10}}},
      // A canary that is not ready gets nothing; its share goes to the rest.
      {{{"v1", 90}, {"v2", 10}}, {"v1"}, {{"v1", 100}, {"v2", 0}}},
      {{{"a", 50}, {"b", 30}, {"c", 20}}, {"a", "b"}, {{"a", 63}, {"b", 37}, {"c", 0}}},
      {{{"a", 34}, {"b", 33}, {"c", 33}}, {"a", "b", "c"}, {{"a", 34}, {"b", 33}, {"c", 33}}},
      // Nothing ready: the weights stand (status says why in Ready).
      {{{"v1", 90}, {"v2", 10}}, {}, {{"v1", 90}, {"v2", 10}}},
      // Only a zero-weight version is ready: still nothing to redistribute.
      {{{"v1", 100}, {"v2", 0}}, {"v2"}, {{"v1", 100}, {"v2", 0}}},
  };
  for (const auto& c : cases) {
    const auto got = EffectiveTraffic(c.weights, c.ready);
    EXPECT_EQ(got, c.expected);
    int sum = 0;
    for (const auto& [k, v] : got) sum += v;
    EXPECT_EQ(sum, 100);
  }
}

struct PodCase {
  const char* name;
  const char* pod;
  const char* reason;
  const char* message_part;
};

TEST(StatusTest, DiagnosePodTable) {
  const PodCase cases[] = {
      {"healthy", R"({"status": {"containerStatuses": [{"name": "server", "state": {"running": {}}}]}})", "", ""},
      {"sync_failed",
       R"({"status": {"containerStatuses": [{"name": "sync", "state": {"waiting": {"reason": "CrashLoopBackOff"}},
           "lastState": {"terminated": {"exitCode": 1, "message": "fetching\nmodelfleet-sync: sha256 mismatch: expected ab, got cd\n"}}}]}})",
       "ModelSyncFailed", "modelfleet-sync: sha256 mismatch"},
      {"server_crash",
       R"({"status": {"containerStatuses": [{"name": "server", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]}})",
       "ServerFailed", "exited with code 2: Error"},
      {"unschedulable",
       R"({"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
           "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}]}})",
       "Unschedulable", "Insufficient nvidia.com/gpu"},
      {"clean_exit",
       R"({"status": {"containerStatuses": [{"name": "sync", "state": {"terminated": {"exitCode": 0}}}]}})", "", ""},
      {"garbage", R"({"status": {"containerStatuses": [1, "x", {"name": 3}]}})", "", ""},
  };
  for (const auto& c : cases) {
    const auto p = DiagnosePod(Json::parse(c.pod));
    EXPECT_EQ(p.reason, c.reason) << c.name;
    EXPECT_NE(p.message.find(c.message_part), std::string::npos) << c.name << ": " << p.message;
  }
}

TEST(StatusTest, DiagnoseModelStatusTable) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model_version_status": [{"version": "1", "state": "END", "status": {"error_code": "UNAVAILABLE",
          "error_message": "model.onnx: this build of the runtime has no CUDA backend"}}]})",
       "version 1 failed to load: UNAVAILABLE: model.onnx: this build of the runtime has no CUDA backend"},
      {R"({"model_version_status": [{"version": "1", "state": "LOADING", "status": {"error_code": "OK"}}]})", ""},
      {R"({"model_version_status": [{"version": "1", "state": "END", "status": {"error_code": "OK"}}]})", ""},
      {"not json", ""},
      {R"({"model_version_status": "x"})", ""},
  };
  for (const auto& [body, message] : cases) {
    const auto p = DiagnoseModelStatus(body);
    EXPECT_EQ(p.message, message) << body;
    EXPECT_EQ(p.reason, *message ? "ModelLoadFailed" : "") << body;
  }
}

TEST(StatusTest, ServerNotReadySeconds) {
  const Json pod = Json::parse(R"({"status": {"containerStatuses": [
      {"name": "sync", "ready": true, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
      {"name": "server", "ready": false, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}})");
  const int64_t started = 1767225600;  // 2026-01-01T00:00:00Z
  EXPECT_EQ(ServerNotReadySeconds(pod, started + 10), 10);
  Json ready = pod;
  ready["status"]["containerStatuses"][1]["ready"] = true;
  EXPECT_EQ(ServerNotReadySeconds(ready, started + 60), -1);
  EXPECT_EQ(ServerNotReadySeconds(Json::parse(R"({"status": {"containerStatuses": [{"name": "server"}]}})"), started),
            -1);
  EXPECT_EQ(ServerNotReadySeconds(Json::parse(R"([1])"), started), -1);
}

Json Deployment(int64_t desired, int64_t ready, int64_t updated, int64_t generation = 1, int64_t observed = 1) {
  return {{"metadata", {{"generation", generation}}},
          {"spec", {{"replicas", desired}}},
          {"status",
           {{"observedGeneration", observed},
            {"replicas", desired},
            {"readyReplicas", ready},
            {"updatedReplicas", updated}}}};
}

struct Fixture {
  Json object = SampleModelDeployment();
  ModelDeploymentSpec spec = *ParseModelDeployment(object);
  ObservedState observed;
  Json Status(const std::string& now = "2026-11-26T00:00:00Z") {
    StatusInput in{.object = &object, .spec = &spec, .observed = &observed, .weights = spec.traffic, .now = now};
    return BuildStatus(in);
  }
};

TEST(StatusTest, AllReadyIsReadyWithSummaries) {
  Fixture f;
  f.observed.versions["v1"].deployment = Deployment(2, 2, 2);
  f.observed.versions["v2"].deployment = Deployment(1, 1, 1);
  f.observed.router_deployment = Deployment(2, 2, 2);
  const Json s = f.Status();
  EXPECT_EQ(s["observedGeneration"], 3);
  EXPECT_EQ(s["readySummary"], "3/3");
  EXPECT_EQ(s["trafficSummary"], "v1=90,v2=10");
  EXPECT_EQ(s["url"], "http://mnist.ml.svc:8501");
  EXPECT_EQ(s["replicas"], 2);
  EXPECT_EQ(s["selector"], "modelfleet.io/modeldeployment=mnist");
  EXPECT_EQ(FindCondition(s, "Ready")["status"], "True");
  EXPECT_EQ(FindCondition(s, "Progressing")["status"], "False");
  EXPECT_EQ(FindCondition(s, "Degraded")["status"], "False");
  EXPECT_EQ(s["versions"][0]["modelState"], "AVAILABLE");
}

TEST(StatusTest, ALoadingCanaryGetsNoTrafficAndTheDeploymentIsNotReady) {
  Fixture f;
  f.observed.versions["v1"].deployment = Deployment(2, 2, 2);
  f.observed.versions["v2"].deployment = Deployment(1, 0, 1);
  f.observed.router_deployment = Deployment(2, 2, 2);
  const Json s = f.Status();
  EXPECT_EQ(s["traffic"]["v2"], 0);
  EXPECT_EQ(s["traffic"]["v1"], 100);
  EXPECT_EQ(s["versions"][1]["modelState"], "LOADING");
  EXPECT_EQ(FindCondition(s, "Ready")["status"], "False");
  EXPECT_NE(FindCondition(s, "Ready")["message"].get<std::string>().find("v2 0/1 ready"), std::string::npos);
  EXPECT_EQ(FindCondition(s, "Progressing")["reason"], "RollingOut");
}

TEST(StatusTest, AFailedSyncDegradesOnlyItsVersion) {
  Fixture f;
  f.observed.versions["v1"].deployment = Deployment(2, 2, 2);
  f.observed.versions["v2"].deployment = Deployment(1, 0, 1);
  f.observed.versions["v2"].pods.push_back(Json::parse(
      R"({"status": {"containerStatuses": [{"name": "sync", "state": {"terminated": {"exitCode": 1, "message": "modelfleet-sync: HTTP 404 for https://x/model.onnx"}}}]}})"));
  f.observed.router_deployment = Deployment(2, 2, 2);
  const Json s = f.Status();
  const Json degraded = FindCondition(s, "Degraded");
  EXPECT_EQ(degraded["status"], "True");
  EXPECT_EQ(degraded["reason"], "ModelSyncFailed");
  EXPECT_EQ(degraded["message"], "v2: modelfleet-sync: HTTP 404 for https://x/model.onnx");
  EXPECT_EQ(s["versions"][0]["modelState"], "AVAILABLE");
  EXPECT_EQ(s["versions"][1]["modelState"], "FAILED");
  EXPECT_EQ(s["traffic"]["v1"], 100);
}

TEST(StatusTest, StaleDeploymentsAndRetiringVersionsAreProgressing) {
  Fixture f;
  f.observed.versions["v1"].deployment = Deployment(2, 2, 2, /*generation=*/2, /*observed=*/1);
  f.observed.versions["v2"].deployment = Deployment(1, 1, 1);
  f.observed.router_deployment = Deployment(2, 2, 2);
  EXPECT_EQ(FindCondition(f.Status(), "Ready")["status"], "False");
  f.observed.versions["v1"].deployment = Deployment(2, 2, 2);
  f.observed.retiring = {"v0"};
  const Json s = f.Status();
  EXPECT_EQ(FindCondition(s, "Progressing")["reason"], "RemovingVersions");
  EXPECT_EQ(FindCondition(s, "Ready")["status"], "True");
}

TEST(StatusTest, TransitionTimesMoveOnlyWhenTheStatusChanges) {
  Fixture f;
  f.observed.versions["v1"].deployment = Deployment(2, 2, 2);
  f.observed.versions["v2"].deployment = Deployment(1, 1, 1);
  f.observed.router_deployment = Deployment(2, 2, 2);
  f.object["status"] = f.Status("2026-01-01T00:00:00Z");
  EXPECT_EQ(FindCondition(f.Status("2026-02-02T00:00:00Z"), "Ready")["lastTransitionTime"], "2026-01-01T00:00:00Z");
  f.observed.versions["v2"].deployment = Deployment(1, 0, 1);
  EXPECT_EQ(FindCondition(f.Status("2026-02-02T00:00:00Z"), "Ready")["lastTransitionTime"], "2026-02-02T00:00:00Z");
}

TEST(StatusTest, AnInvalidSpecIsDegradedWithItsReason) {
  Json object = SampleModelDeployment();
  StatusInput in{.object = &object, .spec_error = InvalidArgument("spec.traffic percentages sum to 60"), .now = "t"};
  const Json s = BuildStatus(in);
  EXPECT_EQ(FindCondition(s, "Degraded")["reason"], "InvalidSpec");
  EXPECT_EQ(FindCondition(s, "Degraded")["message"], "spec.traffic percentages sum to 60");
  EXPECT_EQ(FindCondition(s, "Ready")["status"], "False");
  EXPECT_FALSE(s.contains("url"));
}

}  // namespace
}  // namespace mf::op
