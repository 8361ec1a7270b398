// TF_CONFIG and the PyTorch env for every replica layout, against the exact bytes Kubeflow v1
// writes (compact JSON, sorted cluster keys, cluster/task/environment order), plus the spec checks
// that protect them and the pods and Services that carry them.
#include <gtest/gtest.h>

#include "trainingjob/cluster_env.h"
#include "trainingjob/desired.h"
#include "trainingjob/spec.h"

namespace mf::op::training {
namespace {

Json Replica(int replicas, const char* policy = "OnFailure") {
  return {
      {"replicas", replicas},
      {"restartPolicy", policy},
      {"template", {{"spec", {{"containers", Json::array({{{"name", "tensorflow"}, {"image", "python:3.11"}}})}}}}}};
}

Json Job(const std::string& framework, Json replica_specs, Json extra = Json::object()) {
  Json spec = {{"framework", framework}, {"replicaSpecs", std::move(replica_specs)}};
  spec.update(extra);
  return {{"apiVersion", "modelfleet.io/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", "mnist"}, {"namespace", "ml"}, {"uid", "uid-1"}}},
          {"spec", spec}};
}

TrainingJobSpec Parse(const Json& object) {
  auto spec = ParseTrainingJob(object);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.ok() ? *spec : TrainingJobSpec{};
}

std::map<std::string, std::string> EnvMap(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& o = {}) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : ClusterEnv(spec, task, o)) out[k] = v;
  return out;
}

struct TfLayout {
  const char* name;
  Json replicas;
  Task task;
  const char* expected;
};

class TfConfigTest : public ::testing::TestWithParam<TfLayout> {};

TEST_P(TfConfigTest, MatchesKubeflow) {
  const auto& c = GetParam();
  const TrainingJobSpec spec = Parse(Job("tensorflow", c.replicas));
  EXPECT_EQ(TfConfig(spec, c.task, {}), c.expected);
  EXPECT_EQ(EnvMap(spec, c.task).at("TF_CONFIG"), c.expected);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TfConfigTest,
    ::testing::Values(
        TfLayout{"WorkersOnly",
                 {{"Worker", Replica(2)}},
                 {ReplicaType::kWorker, 1},
                 R"({"cluster":{"worker":["mnist-worker-0.ml.svc:2222","mnist-worker-1.ml.svc:2222"]},)"
                 R"("task":{"type":"worker","index":1},"environment":"cloud"})"},
        TfLayout{"ChiefAndWorkers",
                 {{"Chief", Replica(1)}, {"Worker", Replica(2)}},
                 {ReplicaType::kChief, 0},
                 R"({"cluster":{"chief":["mnist-chief-0.ml.svc:2222"],)"
                 R"("worker":["mnist-worker-0.ml.svc:2222","mnist-worker-1.ml.svc:2222"]},)"
                 R"("task":{"type":"chief","index":0},"environment":"cloud"})"},
        TfLayout{"ParameterServers",
                 {{"Chief", Replica(1)}, {"PS", Replica(2)}, {"Worker", Replica(2)}},
                 {ReplicaType::kPS, 1},
                 R"({"cluster":{"chief":["mnist-chief-0.ml.svc:2222"],)"
                 R"("ps":["mnist-ps-0.ml.svc:2222","mnist-ps-1.ml.svc:2222"],)"
                 R"("worker":["mnist-worker-0.ml.svc:2222","mnist-worker-1.ml.svc:2222"]},)"
                 R"("task":{"type":"ps","index":1},"environment":"cloud"})"},
        // Kubeflow's own unit test: the evaluator is inside the cluster.
        TfLayout{"Evaluator",
                 {{"Evaluator", Replica(1)}, {"PS", Replica(1)}, {"Worker", Replica(1)}},
                 {ReplicaType::kWorker, 0},
                 R"({"cluster":{"evaluator":["mnist-evaluator-0.ml.svc:2222"],)"
                 R"("ps":["mnist-ps-0.ml.svc:2222"],"worker":["mnist-worker-0.ml.svc:2222"]},)"
                 R"("task":{"type":"worker","index":0},"environment":"cloud"})"},
        TfLayout{"EvaluatorsOwnTask",
                 {{"Chief", Replica(1)}, {"Evaluator", Replica(1)}, {"PS", Replica(1)}, {"Worker", Replica(3)}},
                 {ReplicaType::kEvaluator, 0},
                 R"({"cluster":{"chief":["mnist-chief-0.ml.svc:2222"],"evaluator":["mnist-evaluator-0.ml.svc:2222"],)"
                 R"("ps":["mnist-ps-0.ml.svc:2222"],"worker":["mnist-worker-0.ml.svc:2222",)"
                 R"("mnist-worker-1.ml.svc:2222","mnist-worker-2.ml.svc:2222"]},)"
                 R"("task":{"type":"evaluator","index":0},"environment":"cloud"})"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(TfConfigTest, NotSetForOnePod) {
  const TrainingJobSpec spec = Parse(Job("tensorflow", {{"Worker", Replica(1)}}));
  EXPECT_EQ(TfConfig(spec, {ReplicaType::kWorker, 0}, {}), "");
  EXPECT_FALSE(EnvMap(spec, {ReplicaType::kWorker, 0}).count("TF_CONFIG"));
}

TEST(TfConfigTest, PortFromSpecFromTemplateAndClusterDomain) {
  Json chief = Replica(1);
  chief["template"]["spec"]["containers"][0]["ports"] = {{{"name", "tfjob-port"}, {"containerPort", 3333}}};
  const TrainingJobSpec spec = Parse(Job("tensorflow", {{"Chief", chief}, {"Worker", Replica(1)}}, {{"port", 4444}}));
  EXPECT_EQ(TfConfig(spec, {ReplicaType::kWorker, 0}, {.cluster_domain = "cluster.local"}),
            R"({"cluster":{"chief":["mnist-chief-0.ml.svc.cluster.local:3333"],)"
            R"("worker":["mnist-worker-0.ml.svc.cluster.local:4444"]},)"
            R"("task":{"type":"worker","index":0},"environment":"cloud"})");
}

TEST(TfConfigTest, DistinctPortsWhenPodsShareANetwork) {
  const TrainingJobSpec spec =
      Parse(Job("tensorflow", {{"Chief", Replica(1)}, {"PS", Replica(1)}, {"Worker", Replica(2)}}));
  EXPECT_EQ(TfConfig(spec, {ReplicaType::kWorker, 1}, {.distinct_ports = true}),
            R"({"cluster":{"chief":["mnist-chief-0.ml.svc:2222"],"ps":["mnist-ps-0.ml.svc:2223"],)"
            R"("worker":["mnist-worker-0.ml.svc:2224","mnist-worker-1.ml.svc:2225"]},)"
            R"("task":{"type":"worker","index":1},"environment":"cloud"})");
}

TEST(PyTorchEnvTest, MasterAndWorkers) {
  Json master = Replica(1), worker = Replica(2);
  master["template"]["spec"]["containers"][0]["name"] = "pytorch";
  const TrainingJobSpec spec = Parse(Job("pytorch", {{"Master", master}, {"Worker", worker}}, {{"port", 23456}}));
  const std::map<std::string, std::string> master_env = {{"PYTHONUNBUFFERED", "1"},
                                                         {"MASTER_ADDR", "mnist-master-0"},
                                                         {"PET_MASTER_ADDR", "mnist-master-0"},
                                                         {"MASTER_PORT", "23456"},
                                                         {"PET_MASTER_PORT", "23456"},
                                                         {"WORLD_SIZE", "3"},
                                                         {"RANK", "0"},
                                                         {"PET_NODE_RANK", "0"},
                                                         {"PET_NNODES", "3"}};
  EXPECT_EQ(EnvMap(spec, {ReplicaType::kMaster, 0}), master_env);
  auto worker1 = EnvMap(spec, {ReplicaType::kWorker, 1});
  EXPECT_EQ(worker1.at("RANK"), "2");
  EXPECT_EQ(worker1.at("PET_NODE_RANK"), "2");
  EXPECT_EQ(worker1.at("MASTER_ADDR"), "mnist-master-0");
  EXPECT_EQ(worker1.at("WORLD_SIZE"), "3");
  EXPECT_FALSE(worker1.count("TF_CONFIG"));
}

TEST(PyTorchEnvTest, WorkersOnlyRankFromZeroAndDistinctMasterPort) {
  const TrainingJobSpec spec = Parse(Job("pytorch", {{"Worker", Replica(3)}}));
  auto w0 = EnvMap(spec, {ReplicaType::kWorker, 0}), w2 = EnvMap(spec, {ReplicaType::kWorker, 2});
  EXPECT_EQ(w0.at("MASTER_ADDR"), "mnist-worker-0");
  EXPECT_EQ(w0.at("RANK"), "0");
  EXPECT_EQ(w2.at("RANK"), "2");
  EXPECT_EQ(EnvMap(spec, {ReplicaType::kWorker, 2}, {.distinct_ports = true}).at("MASTER_PORT"), "2222");
}

TEST(OutputEnvTest, ModelDirFromFileAndPvcUris) {
  const TrainingJobSpec file =
      Parse(Job("tensorflow", {{"Worker", Replica(1)}}, {{"output", {{"modelUri", "file:///models/digits/"}}}}));
  auto env = EnvMap(file, {ReplicaType::kWorker, 0}, {.model_version = 7});
  EXPECT_EQ(env.at("MODEL_DIR"), "/models/digits/7");
  EXPECT_EQ(env.at("AIP_MODEL_DIR"), "/models/digits/7");
  EXPECT_EQ(env.at("AIP_CHECKPOINT_DIR"), "/models/digits/checkpoints/mnist");
  EXPECT_EQ(env.at("AIP_TENSORBOARD_LOG_DIR"), "/models/digits/logs/mnist");

  const TrainingJobSpec pvc =
      Parse(Job("tensorflow", {{"Worker", Replica(1)}}, {{"output", {{"modelUri", "pvc://store/mnist"}}}}));
  EXPECT_EQ(EnvMap(pvc, {ReplicaType::kWorker, 0}).at("MODEL_DIR"), "/mnt/pvc/store/mnist/1");
  const Json pod = DesiredPod(pvc, {ReplicaType::kWorker, 0}, {});
  EXPECT_EQ(pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"], "store");
  EXPECT_EQ(pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"], "/mnt/pvc/store");

  const TrainingJobSpec none = Parse(Job("tensorflow", {{"Worker", Replica(1)}}));
  EXPECT_FALSE(EnvMap(none, {ReplicaType::kWorker, 0}).count("MODEL_DIR"));
}

TEST(DesiredTest, PodCarriesEnvLabelsOwnerAndPolicy) {
  Json worker = Replica(2, "ExitCode");
  worker["template"]["spec"]["containers"] = {
      {{"name", "sidecar"}, {"image", "busybox"}},
      {{"name", "tensorflow"},
       {"image", "python:3.11"},
       {"env", {{{"name", "TF_CONFIG"}, {"value", "stale"}}, {{"name", "KEEP"}, {"value", "1"}}}}}};
  worker["template"]["metadata"] = {{"labels", {{"team", "a"}}}};
  const TrainingJobSpec spec = Parse(Job("tensorflow", {{"Chief", Replica(1)}, {"Worker", worker}}));
  const Json pod = DesiredPod(spec, {ReplicaType::kWorker, 1}, {});
  EXPECT_EQ(pod["metadata"]["name"], "mnist-worker-1");
  EXPECT_EQ(pod["metadata"]["labels"]["team"], "a");
  EXPECT_EQ(pod["metadata"]["labels"][kJobNameLabel], "mnist");
  EXPECT_EQ(pod["metadata"]["labels"][kReplicaTypeLabel], "worker");
  EXPECT_EQ(pod["metadata"]["labels"][kReplicaIndexLabel], "1");
  EXPECT_FALSE(pod["metadata"]["labels"].contains(kJobRoleLabel));
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["uid"], "uid-1");
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["controller"], true);
  EXPECT_EQ(pod["spec"]["restartPolicy"], "Never");            // ExitCode: the operator decides
  EXPECT_FALSE(pod["spec"]["containers"][0].contains("env"));  // only the "tensorflow" container
  const Json& env = pod["spec"]["containers"][1]["env"];
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(env[0]["name"], "KEEP");
  EXPECT_EQ(env[1]["name"], "TF_CONFIG");
  EXPECT_NE(env[1]["value"], "stale");
  EXPECT_EQ(pod["spec"]["containers"][1]["ports"][0], Json({{"name", "tfjob-port"}, {"containerPort", 2222}}));

  const Json chief = DesiredPod(spec, {ReplicaType::kChief, 0}, {});
  EXPECT_EQ(chief["metadata"]["labels"][kJobRoleLabel], "master");
  EXPECT_EQ(chief["spec"]["restartPolicy"], "OnFailure");

  const Json svc = DesiredService(spec, {ReplicaType::kWorker, 1}, {});
  EXPECT_EQ(svc["metadata"]["name"], "mnist-worker-1");
  EXPECT_EQ(svc["spec"]["clusterIP"], "None");
  EXPECT_EQ(svc["spec"]["publishNotReadyAddresses"], true);
  EXPECT_EQ(svc["spec"]["selector"][kReplicaIndexLabel], "1");
  EXPECT_EQ(TaskOf(pod)->index, 1);
}

TEST(DesiredTest, PyTorchEnvInEveryContainer) {
  Json master = Replica(1);
  master["template"]["spec"]["containers"].push_back({{"name", "helper"}, {"image", "python:3.11"}});
  const TrainingJobSpec spec = Parse(Job("pytorch", {{"Master", master}, {"Worker", Replica(1)}}));
  const Json pod = DesiredPod(spec, {ReplicaType::kMaster, 0}, {});
  EXPECT_TRUE(pod["spec"]["containers"][0].contains("env"));
  EXPECT_TRUE(pod["spec"]["containers"][1].contains("env"));
}

struct BadJob {
  const char* name;
  Json object;
  const char* message;  // a part of the error
};

class BadJobTest : public ::testing::TestWithParam<BadJob> {};

TEST_P(BadJobTest, IsRefusedWithAClearMessage) {
  auto spec = ParseTrainingJob(GetParam().object);
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find(GetParam().message), std::string::npos) << spec.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Specs, BadJobTest,
    ::testing::Values(
        BadJob{"MasterForTensorFlow", Job("tensorflow", {{"Master", Replica(1)}, {"Worker", Replica(1)}}),
               "name the coordinating replica Chief"},
        BadJob{"PsForPyTorch", Job("pytorch", {{"Master", Replica(1)}, {"PS", Replica(1)}}),
               "Master and Worker replicas only"},
        BadJob{"TwoChiefs", Job("tensorflow", {{"Chief", Replica(2)}}), "at most one Chief"},
        BadJob{"TwoEvaluators", Job("tensorflow", {{"Worker", Replica(1)}, {"Evaluator", Replica(2)}}),
               "at most one Evaluator"},
        BadJob{"NoCoordinator", Job("tensorflow", {{"PS", Replica(1)}}), "a Chief or at least one Worker"},
        BadJob{"UnknownType", Job("tensorflow", {{"Boss", Replica(1)}}), "unknown replica type"},
        BadJob{"NoContainers", Job("tensorflow", {{"Worker", {{"template", {{"spec", Json::object()}}}}}}),
               "at least one container"},
        BadJob{"BadPolicy", Job("tensorflow", {{"Worker", Replica(1, "Sometimes")}}), "restartPolicy must be one of"},
        BadJob{"DeployWithoutUri",
               Job("tensorflow", {{"Worker", Replica(1)}}, {{"output", {{"deployTo", {{"modelDeployment", "m"}}}}}}),
               "needs spec.output.modelUri"},
        BadJob{"LongName",
               [] {
                 Json j = Job("tensorflow", {{"Evaluator", Replica(1)}, {"Worker", Replica(1)}});
                 j["metadata"]["name"] = std::string(60, 'a');
                 return j;
               }(),
               "choose a shorter name"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(SpecTest, ReplicaTypesInAnyCaseAndDefaults) {
  const TrainingJobSpec spec = Parse(Job("tensorflow", {{"worker", {{"template", Replica(1)["template"]}}}}));
  ASSERT_NE(spec.Find(ReplicaType::kWorker), nullptr);
  EXPECT_EQ(spec.Find(ReplicaType::kWorker)->replicas, 1);
  EXPECT_EQ(spec.Find(ReplicaType::kWorker)->restart_policy, RestartPolicy::kOnFailure);
  EXPECT_EQ(spec.run_policy.backoff_limit, 3);
  EXPECT_EQ(spec.run_policy.clean_pod_policy, CleanPodPolicy::kRunning);
  EXPECT_EQ(spec.run_policy.restart_scope, RestartScope::kPod);
  EXPECT_EQ(spec.port, 2222);
  EXPECT_FALSE(spec.IsStudy());
}

}  // namespace
}  // namespace mf::op::training
