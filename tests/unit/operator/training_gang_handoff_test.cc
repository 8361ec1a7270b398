// Gang admission (node allocatable vs the job's requests, GPUs included) and the hand-off patch
// that adds a trained model to a ModelDeployment.
#include <gtest/gtest.h>

#include "trainingjob/gang.h"
#include "trainingjob/handoff.h"

namespace mf::op::training {
namespace {

Json Node(const std::string& name, const std::string& cpu, const std::string& memory, int gpus, bool ready = true) {
  Json allocatable = {{"cpu", cpu}, {"memory", memory}, {"pods", "110"}};
  if (gpus) allocatable["nvidia.com/gpu"] = std::to_string(gpus);
  return {{"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
          {"status",
           {{"allocatable", allocatable},
            {"conditions", Json::array({{{"type", "Ready"}, {"status", ready ? "True" : "False"}}})}}}};
}

Json PodSpec(const std::string& cpu, const std::string& memory, int gpus = 0) {
  Json resources = {{"requests", {{"cpu", cpu}, {"memory", memory}}}};
  if (gpus) resources["limits"] = {{"nvidia.com/gpu", gpus}};
  return {{"containers", Json::array({{{"name", "c"}, {"resources", resources}}})}};
}

Json BoundPod(const std::string& node, const std::string& cpu, const std::string& phase = "Running") {
  Json spec = PodSpec(cpu, "0");
  spec["nodeName"] = node;
  return {{"spec", spec}, {"status", {{"phase", phase}}}};
}

TEST(GangTest, Quantities) {
  EXPECT_DOUBLE_EQ(*ParseQuantity("100m"), 0.1);
  EXPECT_DOUBLE_EQ(*ParseQuantity("2"), 2);
  EXPECT_DOUBLE_EQ(*ParseQuantity("1Gi"), 1073741824.0);
  EXPECT_DOUBLE_EQ(*ParseQuantity("500M"), 5e8);
  EXPECT_DOUBLE_EQ(*ParseQuantity("1e3"), 1000);
  EXPECT_FALSE(ParseQuantity("lots").has_value());
  EXPECT_FALSE(ParseQuantity("").has_value());
}

TEST(GangTest, RequestsTakeTheLargerOfInitAndContainers) {
  Json spec = PodSpec("1", "1Gi", 2);
  spec["initContainers"] = {{{"name", "i"}, {"resources", {{"requests", {{"cpu", "3"}}}}}}};
  const ResourceList r = PodRequests(spec);
  EXPECT_DOUBLE_EQ(r.at("cpu"), 3);
  EXPECT_DOUBLE_EQ(r.at("nvidia.com/gpu"), 2);  // limits stand for missing requests
  EXPECT_DOUBLE_EQ(r.at("pods"), 1);
}

struct GangCase {
  const char* name;
  std::vector<Json> nodes;
  std::vector<Json> bound;
  std::vector<Json> job;  // pod specs
  std::string problem;    // "" = fits; else a part of the message
};

class GangFitTest : public ::testing::TestWithParam<GangCase> {};

TEST_P(GangFitTest, Decides) {
  const auto& c = GetParam();
  std::vector<std::pair<std::string, Json>> pods;
  for (size_t i = 0; i < c.job.size(); ++i) pods.emplace_back("job-worker-" + std::to_string(i), c.job[i]);
  const std::string problem = CheckGangFits(FreeRoom(c.nodes, c.bound), pods);
  if (c.problem.empty()) {
    EXPECT_EQ(problem, "");
  } else {
    EXPECT_NE(problem.find(c.problem), std::string::npos) << problem;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, GangFitTest,
    ::testing::Values(
        GangCase{"Fits", {Node("a", "4", "8Gi", 0)}, {}, {PodSpec("1", "1Gi"), PodSpec("1", "1Gi")}, ""},
        GangCase{"TooManyGpus",
                 {Node("a", "16", "64Gi", 2)},
                 {},
                 {PodSpec("1", "1Gi", 1), PodSpec("1", "1Gi", 1), PodSpec("1", "1Gi", 1)},
                 "not enough nvidia.com/gpu); the job's 3 pods ask for 3 nvidia.com/gpu in all, and 0 is free"},
        GangCase{"SpreadOverNodes",
                 {Node("a", "2", "8Gi", 1), Node("b", "2", "8Gi", 1)},
                 {},
                 {PodSpec("1", "1Gi", 1), PodSpec("1", "1Gi", 1)},
                 ""},
        GangCase{"OtherPodsTakeRoom",
                 {Node("a", "4", "8Gi", 0)},
                 {BoundPod("a", "3"), BoundPod("a", "3", "Succeeded")},
                 {PodSpec("1", "1Gi"), PodSpec("1", "1Gi")},
                 "not enough cpu"},
        GangCase{
            "NotReadyNodeIgnored", {Node("a", "4", "8Gi", 0, false)}, {}, {PodSpec("1", "1Gi")}, "no node is Ready"},
        GangCase{"NodeSelector",
                 {Node("a", "4", "8Gi", 0)},
                 {},
                 {[] {
                   Json s = PodSpec("1", "1Gi");
                   s["nodeSelector"] = {{"kubernetes.io/hostname", "b"}};
                   return s;
                 }()},
                 "no node matches its nodeSelector"}),
    [](const auto& info) { return std::string(info.param.name); });

TrainingJobSpec JobDeployingTo(int canary, const std::string& uri = "file:///models/digits") {
  const Json master = {{"template", {{"spec", {{"containers", Json::array({{{"name", "pytorch"}}})}}}}}};
  const Json output = {{"modelUri", uri}, {"deployTo", {{"modelDeployment", "digits"}, {"canaryPercent", canary}}}};
  const Json object = {
      {"metadata", {{"name", "train"}, {"namespace", "default"}, {"uid", "u"}}},
      {"spec", {{"framework", "pytorch"}, {"replicaSpecs", {{"Master", master}}}, {"output", output}}}};
  auto spec = ParseTrainingJob(object);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return *spec;
}

Json Md(Json versions, Json traffic) {
  return {{"metadata", {{"name", "digits"}, {"resourceVersion", "42"}}},
          {"spec", {{"versions", std::move(versions)}, {"traffic", std::move(traffic)}}}};
}

TEST(HandoffTest, NextVersionIsAboveTheDeployments) {
  EXPECT_EQ(NextModelVersion(Md({{{"name", "v1"}}, {{"name", "v2"}}}, {})), 3);
  EXPECT_EQ(NextModelVersion(Md({{{"name", "stable"}}}, {})), 2);  // a name without digits is version 1
}

TEST(HandoffTest, AddsTheCanaryAndScalesTheOthers) {
  const Json md = Md({{{"name", "v1"}, {"storageUri", "file:///m/1"}}, {{"name", "v2"}, {"storageUri", "file:///m/2"}}},
                     {{"v1", 90}, {"v2", 10}});
  auto h = BuildHandoff(md, JobDeployingTo(10), 3);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_FALSE(h->already_done);
  EXPECT_EQ(h->version, "v3");
  EXPECT_EQ(h->storage_uri, "file:///models/digits/3");
  EXPECT_EQ(h->patch["metadata"]["resourceVersion"], "42");
  EXPECT_EQ(h->patch["spec"]["versions"].back(), Json({{"name", "v3"}, {"storageUri", "file:///models/digits/3"}}));
  EXPECT_EQ(h->patch["spec"]["traffic"], Json({{"v1", 81}, {"v2", 9}, {"v3", 10}}));

  auto even =
      BuildHandoff(Md({{{"name", "v1"}}, {{"name", "v2"}}, {{"name", "v3"}}}, {{"v1", 34}, {"v2", 33}, {"v3", 33}}),
                   JobDeployingTo(25), 4);
  ASSERT_TRUE(even.ok());
  int sum = 0;
  for (const auto& [k, v] : even->patch["spec"]["traffic"].items()) sum += v.get<int>();
  EXPECT_EQ(sum, 100);
  EXPECT_EQ(even->patch["spec"]["traffic"]["v4"], 25);
}

TEST(HandoffTest, IdempotentAndAvoidsTakenNames) {
  const Json md =
      Md({{{"name", "v1"}, {"storageUri", "file:///m/1"}}, {{"name", "v3"}, {"storageUri", "file:///models/digits/3"}}},
         {{"v1", 90}, {"v3", 10}});
  auto again = BuildHandoff(md, JobDeployingTo(10), 3);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_done);
  EXPECT_EQ(again->version, "v3");

  const Json taken =
      Md({{{"name", "v1"}, {"storageUri", "file:///m/1"}}, {{"name", "v3"}, {"storageUri", "file:///other/3"}}},
         {{"v1", 100}});
  auto moved = BuildHandoff(taken, JobDeployingTo(10), 3);
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(moved->version, "v4");
  EXPECT_EQ(moved->storage_uri, "file:///models/digits/3");
  EXPECT_EQ(moved->patch["spec"]["traffic"], Json({{"v1", 90}, {"v3", 0}, {"v4", 10}}));
}

}  // namespace
}  // namespace mf::op::training
