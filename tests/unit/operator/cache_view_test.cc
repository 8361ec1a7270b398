#include "modeldeployment/cache_view.h"

#include <gtest/gtest.h>

#include "modeldeployment/desired.h"
#include "modeldeployment/status.h"
#include "test_objects.h"

namespace mf::op {
namespace {

// A serving pod as the API server returns it, trimmed to what matters here but with the bulk
// (spec, managedFields, conditions, image ids) a real one carries.
Json FullPod(const char* server_state, bool server_ready, const char* sync_last_state = "{}") {
  return Json::parse(std::string(R"({
    "metadata": {"name": "digits-v1-7d9f-abcde", "namespace": "ml", "uid": "u1",
                 "labels": {"modelfleet.io/modeldeployment": "digits", "modelfleet.io/version": "v1",
                            "modelfleet.io/component": "server"},
                 "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}]},
    "spec": {"containers": [{"name": "server", "image": "modelfleet/server:0.1.0", "args": ["--port=8500"]},
                            {"name": "sync", "image": "modelfleet/sync:0.1.0"}]},
    "status": {"phase": "Running", "podIP": "10.244.1.7", "hostIP": "10.244.0.1",
      "conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}],
      "containerStatuses": [
        {"name": "server", "ready": )") +
                     (server_ready ? "true" : "false") + R"(, "restartCount": 0, "image": "modelfleet/server:0.1.0",
         "imageID": "sha256:0123456789abcdef", "state": )" +
                     server_state + R"(},
        {"name": "sync", "ready": true, "restartCount": 2, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
         "lastState": )" +
                     sync_last_state + R"(}]}})");
}

TEST(CacheViewTest, CompactPodAnswersAsTheFullPod) {
  const Json cases[] = {
      FullPod(R"({"running": {"startedAt": "2026-01-01T00:00:00Z"}})", true),
      FullPod(R"({"running": {"startedAt": "2026-01-01T00:00:00Z"}})", false),
      FullPod(R"({"terminated": {"exitCode": 2, "reason": "Error", "message": "bad flag"}})", false),
      FullPod(R"({"terminated": {"exitCode": 0, "reason": "Completed"}})", false),
      FullPod(R"({"waiting": {"reason": "CrashLoopBackOff"}})", false,
              R"({"terminated": {"exitCode": 1, "message": "modelfleet-sync: sha256 mismatch"}})"),
      Json::parse(R"({"metadata": {"name": "p"}, "status": {"conditions": [{"type": "PodScheduled", "status": "False",
          "reason": "Unschedulable", "message": "0/1 nodes are available"}]}})"),
      Json::parse(R"({"status": {"containerStatuses": [1, "x", {"name": 3}]}})"),
      Json::parse(R"([1, 2])"),
  };
  const int64_t now = 1767225600 + 30;
  for (const auto& full : cases) {
    Json compact = full;
    CompactPodForCache(&compact);
    const PodProblem a = DiagnosePod(full), b = DiagnosePod(compact);
    EXPECT_EQ(a.reason, b.reason) << full.dump();
    EXPECT_EQ(a.message, b.message) << full.dump();
    EXPECT_EQ(ServerNotReadySeconds(full, now), ServerNotReadySeconds(compact, now)) << full.dump();
    if (full.is_object() && full.contains("metadata")) {
      EXPECT_EQ(compact["metadata"].value("labels", Json::object()), full["metadata"].value("labels", Json::object()));
      EXPECT_FALSE(compact["metadata"].contains("managedFields"));
    }
  }
  Json compact = cases[0];
  CompactPodForCache(&compact);
  EXPECT_FALSE(compact.contains("spec"));
  EXPECT_LT(compact.dump().size(), cases[0].dump().size());
}

TEST(CacheViewTest, CompactDeploymentKeepsWhatTheReconcileReads) {
  Json d = Json::parse(R"({
    "metadata": {"name": "digits-v1", "namespace": "ml", "uid": "u", "resourceVersion": "7", "generation": 3,
                 "creationTimestamp": "2026-01-01T00:00:00Z",
                 "labels": {"modelfleet.io/version": "v1", "app.kubernetes.io/managed-by": "modelfleet-operator",
                            "team": "search"},
                 "annotations": {"modelfleet.io/applied-hash": "h", "deployment.kubernetes.io/revision": "2"},
                 "ownerReferences": [{"apiVersion": "modelfleet.io/v1alpha1", "kind": "ModelDeployment",
                                      "name": "digits", "uid": "md-uid", "controller": true,
                                      "blockOwnerDeletion": true}, {"kind": "Other", "uid": "x"}],
                 "managedFields": [{"manager": "modelfleet-operator"}]},
    "spec": {"replicas": 2, "selector": {}, "template": {"spec": {"containers": [{"name": "server"}]}}},
    "status": {"observedGeneration": 3, "replicas": 2, "readyReplicas": 1, "updatedReplicas": 2,
               "availableReplicas": 1, "conditions": [{"type": "Available", "message": "long text"}]}})");
  const std::string digest = LiveDigest(d);
  CompactOwnedForCache(&d);
  EXPECT_EQ(d, Json::parse(R"({
    "metadata": {"name": "digits-v1", "namespace": "ml", "uid": "u", "resourceVersion": "7", "generation": 3,
                 "labels": {"modelfleet.io/version": "v1", "app.kubernetes.io/managed-by": "modelfleet-operator"},
                 "annotations": {"modelfleet.io/applied-hash": "h"},
                 "ownerReferences": [{"kind": "ModelDeployment", "name": "digits", "uid": "md-uid", "controller": true}]},
    "modelfleet.io/digest": ")" +
                           digest + R"(",
    "spec": {"replicas": 2},
    "status": {"observedGeneration": 3, "replicas": 2, "readyReplicas": 1, "updatedReplicas": 2,
               "availableReplicas": 1}})"));
  EXPECT_EQ(CachedDigest(d), digest);
}

TEST(CacheViewTest, LiveDigestSeesContentNotMetadataOrStatus) {
  const Json service = Json::parse(R"({"apiVersion": "v1", "kind": "Service",
      "metadata": {"name": "s", "resourceVersion": "1"}, "spec": {"ports": [{"port": 8501}]}, "status": {}})");
  Json list_item = service;  // items of a list come without apiVersion and kind
  list_item.erase("apiVersion");
  list_item.erase("kind");
  list_item["metadata"]["resourceVersion"] = "2";
  list_item["status"] = {{"loadBalancer", Json::object()}};
  EXPECT_EQ(LiveDigest(list_item), LiveDigest(service));
  Json edited = service;
  edited["spec"]["ports"][0]["port"] = 9000;
  EXPECT_NE(LiveDigest(edited), LiveDigest(service));
  Json compact = service;
  CompactOwnedForCache(&compact);
  EXPECT_EQ(CachedDigest(compact), LiveDigest(service));
  EXPECT_FALSE(compact.contains("spec"));
  EXPECT_EQ(CachedDigest(service), "");
}

TEST(CacheViewTest, AppliedHashIgnoresItsOwnAnnotationAndSeesEveryField) {
  const Json object = Json::parse(R"({"metadata": {"name": "a", "labels": {"x": "1"}},
                                      "spec": {"replicas": 1, "template": {"spec": {"containers": [{"image": "i:1"}]}}}})");
  Json stamped = object;
  StampAppliedHash(&stamped);
  EXPECT_EQ(stamped["metadata"]["annotations"][kAppliedHashAnnotation], AppliedHash(object));
  EXPECT_EQ(AppliedHash(stamped), AppliedHash(object));
  EXPECT_EQ(AppliedHash(object).size(), 16u);
  Json changed = object;
  changed["spec"]["template"]["spec"]["containers"][0]["image"] = "i:2";
  EXPECT_NE(AppliedHash(changed), AppliedHash(object));
  changed = object;
  changed["spec"]["replicas"] = 2;
  EXPECT_NE(AppliedHash(changed), AppliedHash(object));
}

}  // namespace
}  // namespace mf::op
