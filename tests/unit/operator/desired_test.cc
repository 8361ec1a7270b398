#include "modeldeployment/desired.h"

#include <gtest/gtest.h>

#include "test_objects.h"

namespace mf::op {
namespace {

using testing::SampleModelDeployment;

ModelDeploymentSpec Parse(const Json& obj) {
  auto md = ParseModelDeployment(obj);
  EXPECT_TRUE(md.ok()) << md.status().message();
  return *md;
}

const Json& Find(const DesiredState& state, const std::string& resource, const std::string& name) {
  for (const auto& o : state.objects) {
    if (o.resource == resource && o.name == name) return o.object;
  }
  static const Json kNull;
  ADD_FAILURE() << "no " << resource << " " << name;
  return kNull;
}

const Json& Container(const Json& deployment, const std::string& name) {
  for (const auto& c : deployment["spec"]["template"]["spec"]["containers"]) {
    if (c["name"] == name) return c;
  }
  static const Json kNull;
  ADD_FAILURE() << "no container " << name;
  return kNull;
}

bool HasArg(const Json& container, const std::string& arg) {
  for (const auto& a : container["args"]) {
    if (a == arg) return true;
  }
  return false;
}

DesiredState Build(const Json& obj, const OperatorSettings& settings = {}) {
  auto md = Parse(obj);
  return BuildDesiredState(md, md.traffic, settings);
}

TEST(DesiredTest, OneDeploymentAndServicePerVersionPlusTheRouter) {
  const auto state = Build(SampleModelDeployment());
  std::vector<std::string> names;
  for (const auto& o : state.objects) names.push_back(o.resource + "/" + o.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"deployments/mnist-v1", "services/mnist-v1", "deployments/mnist-v2",
                                      "services/mnist-v2", "configmaps/mnist-router", "serviceaccounts/mnist-router",
                                      "rolebindings/mnist-router", "deployments/mnist-router", "services/mnist"}));
  for (const auto& o : state.objects) {
    const Json& meta = o.object["metadata"];
    EXPECT_EQ(meta["namespace"], "ml");
    ASSERT_EQ(meta["ownerReferences"].size(), 1u) << o.name;
    EXPECT_EQ(meta["ownerReferences"][0]["uid"], "uid-1");
    EXPECT_EQ(meta["ownerReferences"][0]["controller"], true);
    EXPECT_EQ(meta["labels"][kManagedByLabel], kFieldManager);
    EXPECT_EQ(meta["labels"][kModelDeploymentLabel], "mnist");
  }
}

TEST(DesiredTest, ServingPodsRunServerAndSyncOnASharedVolume) {
  const auto state = Build(SampleModelDeployment());
  const Json& d1 = Find(state, "deployments", "mnist-v1");
  EXPECT_EQ(d1["spec"]["replicas"], 2);
  EXPECT_EQ(Find(state, "deployments", "mnist-v2")["spec"]["replicas"], 1);
  EXPECT_EQ(d1["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"], 0);
  const Json& server = Container(d1, "server");
  EXPECT_EQ(server["image"], "modelfleet/server:0.1.0");
  EXPECT_TRUE(HasArg(server, "--model_name=my_mnist"));
  EXPECT_TRUE(HasArg(server, "--model_base_path=/models/my_mnist"));
  EXPECT_TRUE(HasArg(server, "--not_ready_grace_seconds=10"));
  EXPECT_TRUE(HasArg(server, "--rest_api_address=$(POD_IP)"));
  EXPECT_FALSE(HasArg(server, "--device=cuda"));
  EXPECT_EQ(server["readinessProbe"]["httpGet"]["path"], "/v2/models/my_mnist/ready");
  EXPECT_GT(d1["spec"]["template"]["spec"]["terminationGracePeriodSeconds"].get<int>(), 10);

  const Json& sync = Container(d1, "sync");
  EXPECT_TRUE(HasArg(sync, "--source=pvc://model-store/mnist/1"));
  EXPECT_TRUE(HasArg(sync, "--dest=/models/my_mnist/1"));
  EXPECT_TRUE(HasArg(sync, "--pvc-root=/mnt/pvc"));
  EXPECT_EQ(sync["terminationMessagePolicy"], "FallbackToLogsOnError");
  EXPECT_EQ(sync["volumeMounts"][1]["mountPath"], "/mnt/pvc/model-store");
  const Json& volumes = d1["spec"]["template"]["spec"]["volumes"];
  EXPECT_EQ(volumes[0]["name"], "models");
  EXPECT_EQ(volumes[1]["persistentVolumeClaim"]["claimName"], "model-store");

  const Json& sync2 = Container(Find(state, "deployments", "mnist-v2"), "sync");
  EXPECT_TRUE(HasArg(sync2, "--dest=/models/my_mnist/2"));
  EXPECT_EQ(sync2["volumeMounts"].size(), 1u);  // no claim for an https source
}

TEST(DesiredTest, OpenMpSpinDefaultYieldsToTheUsersChoice) {
  for (const char* users : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}) {
    auto obj = SampleModelDeployment();
    obj["spec"]["server"]["podTemplate"] = {
        {"spec", {{"containers", {{{"name", "server"}, {"env", {{{"name", users}, {"value", "1"}}}}}}}}}};
    const DesiredState state = Build(obj);
    const Json& env = Container(Find(state, "deployments", "mnist-v1"), "server")["env"];
    ASSERT_EQ(env.size(), 2u) << users;  // POD_IP and the user's, nothing of ours
    EXPECT_EQ(env[1]["name"], users);
  }
}

TEST(DesiredTest, GpuResourcesNodeSelectorsAndTolerationsPassThrough) {
  auto obj = SampleModelDeployment();
  obj["spec"]["server"] = Json::parse(R"({
    "image": "registry.example/server:gpu",
    "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "4Gi"}},
    "podTemplate": {
      "metadata": {"labels": {"team": "vision"}, "annotations": {"a": "b"}},
      "spec": {"nodeSelector": {"gpu": "a100"},
               "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
               "containers": [{"name": "server", "env": [{"name": "X", "value": "1"}]},
                              {"name": "logger", "image": "busybox"}]}}})");
  const auto state = Build(obj);
  const Json& d = Find(state, "deployments", "mnist-v1");
  const Json& pod = d["spec"]["template"];
  EXPECT_EQ(pod["metadata"]["labels"]["team"], "vision");
  EXPECT_EQ(pod["metadata"]["labels"][kVersionLabel], "v1");
  EXPECT_EQ(pod["metadata"]["annotations"]["a"], "b");
  EXPECT_EQ(pod["spec"]["nodeSelector"]["gpu"], "a100");
  EXPECT_EQ(pod["spec"]["tolerations"][0]["key"], "nvidia.com/gpu");
  const Json& server = Container(d, "server");
  EXPECT_EQ(server["image"], "registry.example/server:gpu");
  EXPECT_EQ(server["resources"]["limits"]["nvidia.com/gpu"], 1);
  EXPECT_TRUE(HasArg(server, "--device=cuda"));
  ASSERT_EQ(server["env"].size(), 3u);  // POD_IP, then the user's, then the OpenMP default
  EXPECT_EQ(server["env"][2], (Json{{"name", "GOMP_SPINCOUNT"}, {"value", "10000"}}));
  EXPECT_EQ(Container(d, "logger")["image"], "busybox");
  EXPECT_EQ(pod["spec"]["containers"].size(), 3u);
}

TEST(DesiredTest, BatchingBecomesServerFlagsAndAConfigMapThatRollsPodsWhenItChanges) {
  auto obj = SampleModelDeployment();
  obj["spec"]["server"] = {{"batching", {{"maxBatchSize", 16}, {"batchTimeoutMicros", 500}}}};
  const auto a = Build(obj);
  const Json& cm = Find(a, "configmaps", "mnist-server");
  const std::string text = cm["data"]["batching_parameters.txt"];
  EXPECT_NE(text.find("max_batch_size { value: 16 }"), std::string::npos);
  EXPECT_NE(text.find("batch_timeout_micros { value: 500 }"), std::string::npos);
  const Json& server = Container(Find(a, "deployments", "mnist-v1"), "server");
  EXPECT_TRUE(HasArg(server, "--enable_batching"));
  EXPECT_TRUE(HasArg(server, "--batching_parameters_file=/etc/modelfleet/server/batching_parameters.txt"));

  obj["spec"]["server"]["batching"]["maxBatchSize"] = 8;
  const auto b = Build(obj);
  const auto hash = [](const DesiredState& s) {
    return Find(s, "deployments",
                "mnist-v1")["spec"]["template"]["metadata"]["annotations"]["modelfleet.io/server-config"];
  };
  EXPECT_NE(hash(a), hash(b));
  for (const auto& o : Build(SampleModelDeployment()).objects) EXPECT_NE(o.name, "mnist-server");
}

TEST(DesiredTest, ChangingOneStorageUriChangesOnlyThatVersionsDeployment) {
  auto obj = SampleModelDeployment();
  const auto before = Build(obj);
  obj["spec"]["versions"][1]["storageUri"] = "https://models.example/mnist/3/model.onnx";
  const auto after = Build(obj);
  ASSERT_EQ(before.objects.size(), after.objects.size());
  for (size_t i = 0; i < before.objects.size(); ++i) {
    const bool same = before.objects[i].object == after.objects[i].object;
    EXPECT_EQ(same, before.objects[i].name != "mnist-v2" || before.objects[i].resource != "deployments")
        << before.objects[i].resource << "/" << before.objects[i].name;
  }
}

TEST(DesiredTest, RemovingAVersionDropsItsObjectsAndItsRoute) {
  auto obj = SampleModelDeployment();
  obj["spec"]["versions"].erase(1);
  obj["spec"]["traffic"] = {{"v1", 100}};
  const auto state = Build(obj);
  for (const auto& o : state.objects) EXPECT_EQ(o.name.find("v2"), std::string::npos) << o.name;
  ASSERT_EQ(state.router_config["versions"].size(), 1u);
  EXPECT_EQ(state.router_config["versions"][0]["weight"], 100);
}

TEST(DesiredTest, RouterConfigCarriesWeightsRoutesStickinessAndMirror) {
  auto obj = SampleModelDeployment();
  obj["spec"]["routes"] = Json::parse(R"([{"match": {"header": "x-experiment", "value": "b"}, "version": "v2"}])");
  obj["spec"]["stickyBy"] = {{"cookie", "user"}};
  obj["spec"]["mirror"] = {{"version", "v2"}, {"percent", 20}};
  obj["spec"]["router"] = {{"replicas", 3}, {"serviceType", "LoadBalancer"}};
  auto md = Parse(obj);
  const auto state = BuildDesiredState(md, {{"v1", 70}, {"v2", 30}}, {});
  const Json& config = state.router_config;
  EXPECT_EQ(config["model"], "my_mnist");
  EXPECT_EQ(config["versions"][0], Json::parse(R"({"name": "v1", "service": "mnist-v1", "weight": 70})"));
  EXPECT_EQ(config["versions"][1]["weight"], 30);
  EXPECT_EQ(config["routes"][0]["header"], "x-experiment");
  EXPECT_EQ(config["stickyBy"]["cookie"], "user");
  EXPECT_EQ(config["mirror"]["percent"], 20);
  EXPECT_EQ(Json::parse(Find(state, "configmaps", "mnist-router")["data"]["router.yaml"].get<std::string>()), config);
  const Json& router = Find(state, "deployments", "mnist-router");
  EXPECT_EQ(router["spec"]["replicas"], 3);
  EXPECT_EQ(router["spec"]["template"]["spec"]["serviceAccountName"], "mnist-router");
  EXPECT_TRUE(HasArg(Container(router, "router"), "--configmap=ml/mnist-router"));
  // Not ready first, so the router Service stops sending before the router drains.
  EXPECT_TRUE(HasArg(Container(router, "router"), "--not-ready-grace-seconds=10"));
  EXPECT_EQ(Find(state, "services", "mnist")["spec"]["type"], "LoadBalancer");
  EXPECT_EQ(Find(state, "rolebindings", "mnist-router")["roleRef"]["name"], "modelfleet-router");
}

TEST(DesiredTest, NoRoleBindingWithoutARouterRole) {
  OperatorSettings settings;
  settings.router_cluster_role = "";
  for (const auto& o : Build(SampleModelDeployment(), settings).objects) EXPECT_NE(o.resource, "rolebindings");
}

TEST(DesiredTest, OwnedObjectChangedIgnoresOtherManagersLabelsAndBookkeeping) {
  const Json base = Json::parse(R"({"metadata": {"name": "d", "resourceVersion": "1", "generation": 1,
      "labels": {"modelfleet.io/modeldeployment": "mnist"}, "annotations": {}}, "spec": {"replicas": 1},
      "status": {"readyReplicas": 0}})");
  auto with = [&](const char* patch) {
    Json o = base;
    o.merge_patch(Json::parse(patch));
    return o;
  };
  EXPECT_FALSE(OwnedObjectChanged(base, with(R"({"metadata": {"resourceVersion": "2", "labels": {"team": "x"}}})")));
  EXPECT_FALSE(
      OwnedObjectChanged(base, with(R"({"metadata": {"annotations": {"example.com/a": "b"}, "managedFields": []}})")));
  EXPECT_TRUE(OwnedObjectChanged(base, with(R"({"status": {"readyReplicas": 1}})")));
  EXPECT_TRUE(OwnedObjectChanged(base, with(R"({"metadata": {"generation": 2}})")));
  EXPECT_TRUE(OwnedObjectChanged(base, with(R"({"metadata": {"labels": {"modelfleet.io/modeldeployment": null}}})")));
  EXPECT_TRUE(
      OwnedObjectChanged(base, with(R"({"metadata": {"annotations": {"modelfleet.io/retiring-since": "1"}}})")));
  EXPECT_TRUE(OwnedObjectChanged(base, with(R"({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})")));
}

}  // namespace
}  // namespace mf::op
