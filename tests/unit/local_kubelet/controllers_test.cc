// Table-driven tests of the built-in controllers' pure planners.
#include <gtest/gtest.h>

#include "tools/local/controllers/deployment.h"
#include "tools/local/controllers/endpoints.h"
#include "tools/local/controllers/replicaset.h"

namespace mf::local {
namespace {

const Clock::time_point kNow = *ParseTime("2026-11-22T20:00:00Z");

Json Template(const std::string& image) {
  return {{"metadata", {{"labels", {{"app", "web"}}}}},
          {"spec", {{"containers", Json::array({{{"name", "web"}, {"image", image}}})}}}};
}

Json MakeDeployment(int64_t replicas, const std::string& image, Json strategy = Json()) {
  Json d = {{"metadata", {{"name", "web"}, {"namespace", "default"}, {"uid", "d-1"}, {"generation", 2}}},
            {"spec",
             {{"replicas", replicas},
              {"selector", {{"matchLabels", {{"app", "web"}}}}},
              {"template", Template(image)}}}};
  if (!strategy.is_null()) d["spec"]["strategy"] = strategy;
  return d;
}

// A ReplicaSet as the controller would have created it, with observed status counts.
Json MakeReplicaSet(const Json& deployment, const std::string& image, int64_t spec_replicas,
                    int64_t replicas, int64_t available, int64_t revision) {
  Json d = deployment;
  d["spec"]["template"] = Template(image);
  auto plan = PlanDeployment(d, {}, kNow);
  EXPECT_TRUE(plan.ok());
  Json rs = *plan->create_replica_set;
  rs["metadata"]["uid"] = "rs-" + image;
  rs["metadata"]["annotations"][std::string(kRevisionAnnotation)] = std::to_string(revision);
  rs["spec"]["replicas"] = spec_replicas;
  rs["status"] = {{"replicas", replicas}, {"readyReplicas", available}, {"availableReplicas", available}};
  return rs;
}

std::map<std::string, int64_t> Scales(const DeploymentPlan& plan) {
  return {plan.scale.begin(), plan.scale.end()};
}

TEST(PodTemplateHashTest, StableDistinctAndSafe) {
  std::string a = PodTemplateHash(Template("nginx:1"), 0);
  EXPECT_EQ(a, PodTemplateHash(Template("nginx:1"), 0));
  EXPECT_NE(a, PodTemplateHash(Template("nginx:2"), 0));
  EXPECT_NE(a, PodTemplateHash(Template("nginx:1"), 1));
  EXPECT_EQ(a.find_first_not_of("bcdfghjklmnpqrstvwxz2456789"), std::string::npos);
}

TEST(DeploymentPlanTest, FirstReconcileCreatesReplicaSetWithHashOwnerAndRevision) {
  auto plan = PlanDeployment(MakeDeployment(3, "nginx:1"), {}, kNow);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  ASSERT_TRUE(plan->create_replica_set);
  const Json& rs = *plan->create_replica_set;
  std::string hash = PodTemplateHash(Template("nginx:1"), 0);
  EXPECT_EQ(NameOf(rs), "web-" + hash);
  EXPECT_EQ(rs["spec"]["replicas"], 3);
  EXPECT_EQ(rs["spec"]["selector"]["matchLabels"]["pod-template-hash"], hash);
  EXPECT_EQ(rs["spec"]["template"]["metadata"]["labels"]["pod-template-hash"], hash);
  EXPECT_EQ(rs["metadata"]["annotations"][std::string(kRevisionAnnotation)], "1");
  EXPECT_EQ(rs["metadata"]["ownerReferences"][0]["uid"], "d-1");
  EXPECT_EQ(rs["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(plan->status["observedGeneration"], 2);
  EXPECT_EQ(plan->status["replicas"], 0);
}

struct RollingCase {
  std::string name;
  int64_t replicas;
  Json strategy;
  // old RS: spec, status replicas, available; new RS: same (or spec -1 when absent)
  int64_t old_spec, old_replicas, old_available;
  int64_t new_spec, new_replicas, new_available;
  std::map<std::string, int64_t> want_scale;  // "old" / "new" -> replicas
  int64_t want_created_replicas;              // -1: nothing created
};

class RollingUpdateTest : public ::testing::TestWithParam<RollingCase> {};

TEST_P(RollingUpdateTest, Step) {
  const RollingCase& c = GetParam();
  Json d = MakeDeployment(c.replicas, "nginx:2", c.strategy);
  std::vector<Json> sets = {MakeReplicaSet(d, "nginx:1", c.old_spec, c.old_replicas, c.old_available, 1)};
  if (c.new_spec >= 0) sets.push_back(MakeReplicaSet(d, "nginx:2", c.new_spec, c.new_replicas, c.new_available, 2));
  auto plan = PlanDeployment(d, sets, kNow);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::map<std::string, int64_t> got;
  for (const auto& [name, n] : plan->scale) got[name == NameOf(sets[0]) ? "old" : "new"] = n;
  EXPECT_EQ(got, c.want_scale);
  if (c.want_created_replicas < 0) {
    EXPECT_FALSE(plan->create_replica_set);
  } else {
    ASSERT_TRUE(plan->create_replica_set);
    EXPECT_EQ((*plan->create_replica_set)["spec"]["replicas"], c.want_created_replicas);
    EXPECT_EQ((*plan->create_replica_set)["metadata"]["annotations"][std::string(kRevisionAnnotation)], "2");
  }
}

Json Rolling(Json surge, Json unavailable) {
  return {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxSurge", surge}, {"maxUnavailable", unavailable}}}};
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RollingUpdateTest,
    ::testing::Values(
        // Template changed: new RS created with the surge allowance (4 replicas, 25% -> surge 1).
        RollingCase{"CreateWithSurge", 4, Json(), 4, 4, 4, -1, 0, 0, {}, 1},
        // maxSurge 0: the new RS starts empty; old ones shrink by maxUnavailable first.
        RollingCase{"CreateNoSurge", 4, Rolling(0, 1), 4, 4, 4, -1, 0, 0, {}, 0},
        RollingCase{"ScaleDownOldNoSurge", 4, Rolling(0, 1), 4, 4, 4, 0, 0, 0, {{"old", 3}}, -1},
        // New RS at 1 and not yet available: old may not drop below 3 available.
        RollingCase{"WaitForNewAvailable", 4, Rolling(1, 0), 4, 4, 4, 1, 1, 0, {}, -1},
        // New pod available: one old one goes.
        RollingCase{"OldShrinksWhenNewAvailable", 4, Rolling(1, 0), 4, 4, 4, 1, 1, 1, {{"old", 3}}, -1},
        // Room under surge again: the new RS grows.
        RollingCase{"NewGrowsWithinSurge", 4, Rolling(1, 0), 3, 3, 3, 1, 1, 1, {{"new", 2}}, -1},
        // Unavailable old pods are removed first, even without availability budget.
        RollingCase{"UnhealthyOldFirst", 2, Rolling(0, 0), 2, 2, 0, 0, 0, 0, {{"old", 1}}, -1},
        // Percentages: surge rounds up (10 * 25% = 2.5 -> 3).
        RollingCase{"PercentSurgeRoundsUp", 10, Rolling("25%", "25%"), 10, 10, 10, -1, 0, 0, {}, 3},
        // Rollout complete: the old RS is scaled to zero.
        RollingCase{"FinishRollout", 2, Rolling(1, 0), 1, 1, 1, 2, 2, 2, {{"old", 0}}, -1},
        // Scale down of the deployment during a steady state shrinks the new RS directly.
        RollingCase{"ScaleDown", 1, Rolling(1, 0), 0, 0, 0, 3, 3, 3, {{"new", 1}}, -1}),
    [](const auto& info) { return info.param.name; });

TEST(DeploymentPlanTest, RecreateScalesOldToZeroBeforeNew) {
  Json d = MakeDeployment(2, "nginx:2", {{"type", "Recreate"}});
  Json old_rs = MakeReplicaSet(d, "nginx:1", 2, 2, 2, 1);
  Json new_rs = MakeReplicaSet(d, "nginx:2", 0, 0, 0, 2);
  auto plan = PlanDeployment(d, {old_rs, new_rs}, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Scales(*plan), (std::map<std::string, int64_t>{{NameOf(old_rs), 0}}));
  old_rs["spec"]["replicas"] = 0;
  old_rs["status"]["replicas"] = 0;
  plan = PlanDeployment(d, {old_rs, new_rs}, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(Scales(*plan), (std::map<std::string, int64_t>{{NameOf(new_rs), 2}}));
}

TEST(DeploymentPlanTest, StatusAndConditions) {
  Json d = MakeDeployment(2, "nginx:1");
  Json rs = MakeReplicaSet(d, "nginx:1", 2, 2, 2, 1);
  auto plan = PlanDeployment(d, {rs}, kNow);
  ASSERT_TRUE(plan.ok());
  const Json& s = plan->status;
  EXPECT_EQ(s["replicas"], 2);
  EXPECT_EQ(s["updatedReplicas"], 2);
  EXPECT_EQ(s["readyReplicas"], 2);
  EXPECT_EQ(s["availableReplicas"], 2);
  EXPECT_EQ(s["unavailableReplicas"], 0);
  std::map<std::string, std::string> reasons;
  for (const Json& c : s["conditions"]) reasons[c["type"]] = c["status"].get<std::string>() + "/" + c["reason"].get<std::string>();
  EXPECT_EQ(reasons["Available"], "True/MinimumReplicasAvailable");
  EXPECT_EQ(reasons["Progressing"], "True/NewReplicaSetAvailable");

  // One of two pods unavailable with maxUnavailable 0: not Available, still progressing.
  d["spec"]["strategy"] = Rolling(1, 0);
  rs["status"]["availableReplicas"] = 1;
  d["status"] = s;
  plan = PlanDeployment(d, {rs}, kNow + std::chrono::seconds(5));
  ASSERT_TRUE(plan.ok());
  for (const Json& c : plan->status["conditions"]) {
    if (c["type"] == "Available") {
      EXPECT_EQ(c["status"], "False");
      EXPECT_EQ(c["lastTransitionTime"], "2026-11-22T20:00:05Z");
    }
    if (c["type"] == "Progressing") {
      EXPECT_EQ(c["lastTransitionTime"], "2026-11-22T20:00:00Z");  // its status did not change
    }
  }
}

TEST(DeploymentPlanTest, RevisionHistoryLimitDeletesOldestEmptyReplicaSets) {
  Json d = MakeDeployment(1, "nginx:9");
  d["spec"]["revisionHistoryLimit"] = 1;
  std::vector<Json> sets;
  for (int i = 1; i <= 3; ++i) sets.push_back(MakeReplicaSet(d, "nginx:" + std::to_string(i), 0, 0, 0, i));
  sets.push_back(MakeReplicaSet(d, "nginx:9", 1, 1, 1, 4));
  auto plan = PlanDeployment(d, sets, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->delete_replica_sets, (std::vector<std::string>{NameOf(sets[0]), NameOf(sets[1])}));
}

TEST(DeploymentPlanTest, BadInputIsRejected) {
  Json d = MakeDeployment(1, "nginx:1");
  d["spec"]["selector"] = {{"matchLabels", {{"app", "other"}}}};
  EXPECT_EQ(PlanDeployment(d, {}, kNow).status().code(), StatusCode::kInvalidArgument);
  d = MakeDeployment(1, "nginx:1", Rolling("lots", 1));
  auto bad = PlanDeployment(d, {}, kNow);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("maxSurge"), std::string::npos);
  d = MakeDeployment(1, "nginx:1", {{"type", "BlueGreen"}});
  EXPECT_EQ(PlanDeployment(d, {}, kNow).status().code(), StatusCode::kInvalidArgument);
}

Json MakeRs(int64_t replicas) {
  return {{"metadata", {{"name", "web-abc"}, {"namespace", "ml"}, {"uid", "rs-1"}, {"generation", 3}}},
          {"spec",
           {{"replicas", replicas},
            {"selector", {{"matchLabels", {{"app", "web"}}}}},
            {"template", Template("nginx:1")}}}};
}

Json MakePod(const std::string& name, bool ready, std::string phase = "Running", std::string node = "local",
             int restarts = 0, std::string created = "2026-11-22T19:00:00Z") {
  Json pod = {{"metadata", {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name},
                            {"labels", {{"app", "web"}}}, {"creationTimestamp", created}}},
              {"spec", {{"nodeName", node}, {"containers", Json::array({{{"name", "web"}, {"ports", Json::array({{{"name", "http"}, {"containerPort", 8080}}})}}})}}},
              {"status", {{"phase", phase}, {"podIP", "127.0.1." + std::to_string(name.back() - '0' + 1)},
                          {"containerStatuses", Json::array({{{"restartCount", restarts}}})},
                          {"conditions", Json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"},
                                                        {"lastTransitionTime", "2026-11-22T19:59:50Z"}}})}}}};
  if (node.empty()) pod["spec"].erase("nodeName");
  return pod;
}

TEST(ReplicaSetPlanTest, CreatesMissingPodsFromTemplate) {
  auto plan = PlanReplicaSet(MakeRs(3), {MakePod("p1", true)}, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->pods_to_create, 2);
  EXPECT_EQ(plan->pod_template["metadata"]["labels"]["app"], "web");
  EXPECT_EQ(plan->pod_template["metadata"]["namespace"], "ml");
  EXPECT_EQ(plan->pod_template["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
  EXPECT_EQ(plan->pod_template["spec"]["containers"][0]["image"], "nginx:1");
  EXPECT_EQ(plan->status["replicas"], 1);
  EXPECT_EQ(plan->status["readyReplicas"], 1);
  EXPECT_EQ(plan->status["observedGeneration"], 3);
}

TEST(ReplicaSetPlanTest, DeletesLeastValuablePodsFirst) {
  std::vector<Json> pods = {MakePod("p1", true), MakePod("p2", false), MakePod("p3", true, "Pending", ""),
                            MakePod("p4", true, "Running", "local", 5)};
  auto plan = PlanReplicaSet(MakeRs(1), pods, kNow);
  ASSERT_TRUE(plan.ok());
  // Unscheduled, then not ready, then most restarts; the healthy p1 stays.
  EXPECT_EQ(plan->pods_to_delete, (std::vector<std::string>{"p3", "p2", "p4"}));
}

TEST(ReplicaSetPlanTest, TerminatingPodsAreReplacedAndFinishedOnesCleanedUp) {
  Json terminating = MakePod("p1", true);
  terminating["metadata"]["deletionTimestamp"] = "2026-11-22T19:59:59Z";
  auto plan = PlanReplicaSet(MakeRs(2), {terminating, MakePod("p2", false, "Failed")}, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->pods_to_create, 2);
  EXPECT_EQ(plan->pods_to_delete, std::vector<std::string>{"p2"});
  EXPECT_EQ(plan->status["replicas"], 0);
}

TEST(ReplicaSetPlanTest, MinReadySecondsDelaysAvailability) {
  Json rs = MakeRs(1);
  rs["spec"]["minReadySeconds"] = 30;  // ready since 19:59:50, now 20:00:00
  auto plan = PlanReplicaSet(rs, {MakePod("p1", true)}, kNow);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->status["readyReplicas"], 1);
  EXPECT_EQ(plan->status["availableReplicas"], 0);
  plan = PlanReplicaSet(rs, {MakePod("p1", true)}, kNow + std::chrono::seconds(30));
  EXPECT_EQ(plan->status["availableReplicas"], 1);
}

TEST(ReplicaSetPlanTest, RejectsTemplateNotMatchingSelector) {
  Json rs = MakeRs(1);
  rs["spec"]["selector"] = {{"matchExpressions", Json::array({{{"key", "app"}, {"operator", "Near"}}})}};
  auto plan = PlanReplicaSet(rs, {}, kNow);
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("Near"), std::string::npos);
}

TEST(LabelSelectorTest, Expressions) {
  std::map<std::string, std::string> labels = {{"app", "web"}, {"tier", "fe"}};
  auto match = [&](Json sel) { return *LabelSelectorMatches(sel, labels); };
  EXPECT_TRUE(match(Json::object()));
  EXPECT_TRUE(match({{"matchExpressions", Json::array({{{"key", "app"}, {"operator", "In"}, {"values", {"web", "x"}}}})}}));
  EXPECT_FALSE(match({{"matchExpressions", Json::array({{{"key", "app"}, {"operator", "NotIn"}, {"values", {"web"}}}})}}));
  EXPECT_TRUE(match({{"matchExpressions", Json::array({{{"key", "tier"}, {"operator", "Exists"}}})}}));
  EXPECT_FALSE(match({{"matchExpressions", Json::array({{{"key", "tier"}, {"operator", "DoesNotExist"}}})}}));
  EXPECT_FALSE(match({{"matchLabels", {{"app", "web"}, {"tier", "be"}}}}));
  EXPECT_FALSE(LabelSelectorMatches({{"matchExpressions", Json::array({{{"key", "a"}, {"operator", "In"}}})}}, labels).ok());
}

TEST(IntOrPercentTest, Resolves) {
  EXPECT_EQ(*ResolveIntOrPercent(Json(3), 10, true, "f"), 3);
  EXPECT_EQ(*ResolveIntOrPercent(Json("25%"), 10, true, "f"), 3);
  EXPECT_EQ(*ResolveIntOrPercent(Json("25%"), 10, false, "f"), 2);
  EXPECT_FALSE(ResolveIntOrPercent(Json("25"), 10, false, "f").ok());
  EXPECT_FALSE(ResolveIntOrPercent(Json(-1), 10, false, "f").ok());
  EXPECT_FALSE(ResolveIntOrPercent(Json("%"), 10, false, "f").ok());
}

Json MakeService(Json ports, Json selector = {{"app", "web"}}) {
  return {{"metadata", {{"name", "web"}, {"namespace", "ml"}, {"uid", "svc-1"}, {"labels", {{"team", "a"}}}}},
          {"spec", {{"selector", selector}, {"ports", ports}}}};
}

TEST(EndpointsTest, ReadyAndNotReadyAddressesWithNamedTargetPort) {
  Json svc = MakeService(Json::array({{{"name", "http"}, {"port", 80}, {"targetPort", "http"}}}));
  Json other = MakePod("p3", true);
  other["metadata"]["labels"]["app"] = "db";
  auto eps = BuildServiceEndpoints(svc, {MakePod("p1", true), MakePod("p2", false), other});
  ASSERT_TRUE(eps.ok()) << eps.status().ToString();
  const Json& e = eps->endpoints;
  EXPECT_EQ(NameOf(e), "web");
  ASSERT_EQ(e["subsets"].size(), 1u);
  EXPECT_EQ(e["subsets"][0]["ports"][0]["port"], 8080);
  EXPECT_EQ(e["subsets"][0]["ports"][0]["name"], "http");
  ASSERT_EQ(e["subsets"][0]["addresses"].size(), 1u);
  EXPECT_EQ(e["subsets"][0]["addresses"][0]["ip"], "127.0.1.2");
  EXPECT_EQ(e["subsets"][0]["addresses"][0]["targetRef"]["name"], "p1");
  EXPECT_EQ(e["subsets"][0]["notReadyAddresses"][0]["ip"], "127.0.1.3");
  ASSERT_EQ(eps->slices.size(), 1u);
  const Json& slice = eps->slices[0];
  EXPECT_EQ(slice["metadata"]["labels"][std::string(kServiceNameLabel)], "web");
  EXPECT_EQ(slice["addressType"], "IPv4");
  EXPECT_EQ(slice["endpoints"].size(), 2u);
  EXPECT_EQ(slice["endpoints"][1]["conditions"]["ready"], false);
  EXPECT_EQ(slice["ports"][0]["port"], 8080);
}

TEST(EndpointsTest, NumericTargetPortDefaultAndTerminating) {
  Json svc = MakeService(Json::array({{{"port", 9000}}}));
  Json going = MakePod("p1", true);
  going["metadata"]["deletionTimestamp"] = "2026-11-22T19:59:59Z";
  auto eps = BuildServiceEndpoints(svc, {going, MakePod("p2", true)});
  ASSERT_TRUE(eps.ok());
  ASSERT_EQ(eps->endpoints["subsets"][0]["addresses"].size(), 1u);
  EXPECT_EQ(eps->endpoints["subsets"][0]["ports"][0]["port"], 9000);
  EXPECT_EQ(eps->slices[0]["endpoints"][0]["conditions"]["terminating"], true);
}

TEST(EndpointsTest, NoSelectorMeansManualEndpoints) {
  auto eps = BuildServiceEndpoints(MakeService(Json::array({{{"port", 80}}}), Json::object()), {MakePod("p1", true)});
  ASSERT_TRUE(eps.ok());
  EXPECT_TRUE(eps->endpoints.is_null());
  EXPECT_TRUE(eps->slices.empty());
}

TEST(EndpointsTest, HostnameForHeadlessSubdomain) {
  Json svc = MakeService(Json::array({{{"port", 2222}}}));
  svc["spec"]["clusterIP"] = "None";
  Json pod = MakePod("p1", true);
  pod["spec"]["hostname"] = "worker-0";
  pod["spec"]["subdomain"] = "web";
  auto eps = BuildServiceEndpoints(svc, {pod});
  ASSERT_TRUE(eps.ok());
  EXPECT_EQ(eps->endpoints["subsets"][0]["addresses"][0]["hostname"], "worker-0");
}

TEST(MalformedObjectsTest, WrongTypedFieldsAreErrorsNotCrashes) {
  Json d = MakeDeployment(2, "nginx:1");
  d["spec"]["paused"] = "yes";
  auto plan = PlanDeployment(d, {}, kNow);
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("Deployment default/web"), std::string::npos);
  d = MakeDeployment(2, "nginx:1");
  d["spec"]["replicas"] = "2";  // read as absent: the default of 1 applies, as IntAt documents
  EXPECT_TRUE(PlanDeployment(d, {}, kNow).ok());
  d["spec"]["template"] = "not an object";
  EXPECT_FALSE(PlanDeployment(d, {}, kNow).ok());

  Json rs = MakeRs(1);
  Json pod = MakePod("p1", true);
  pod["status"]["containerStatuses"] = "broken";
  pod["metadata"]["ownerReferences"] = Json::array({{{"controller", "yes"}}});
  auto rs_plan = PlanReplicaSet(rs, {pod}, kNow);
  EXPECT_TRUE(rs_plan.ok() || rs_plan.status().code() == StatusCode::kInvalidArgument);

  Json svc = MakeService(Json::array({{{"port", 80}}}));
  svc["spec"]["publishNotReadyAddresses"] = "true";
  EXPECT_EQ(BuildServiceEndpoints(svc, {MakePod("p1", true)}).status().code(), StatusCode::kInvalidArgument);
  svc = MakeService("80");
  EXPECT_EQ(BuildServiceEndpoints(svc, {}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mf::local
