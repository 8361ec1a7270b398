// The snapshot sources: the ConfigMap + EndpointSlice watch against the in-memory API server
// (ready endpoints only, rebuilds on every change, a bad config or a missing ConfigMap keeps the
// previous snapshot and is counted), and the polled config file.
#include "server/router/config_watcher.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "tests/unit/k8s/fake_api_server.h"

namespace mf::router {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

constexpr char kConfigMaps[] = "/api/v1/configmaps";
constexpr char kSlices[] = "/apis/discovery.k8s.io/v1/endpointslices";

json ConfigMap(const std::string& name, const std::string& router_yaml) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"data", {{"router.yaml", router_yaml}}}};
}

json Slice(const std::string& name, const std::string& service, std::vector<std::pair<std::string, bool>> ips) {
  json endpoints = json::array();
  for (auto& [ip, ready] : ips) endpoints.push_back({{"addresses", {ip}}, {"conditions", {{"ready", ready}}}});
  return {{"apiVersion", "discovery.k8s.io/v1"},
          {"kind", "EndpointSlice"},
          {"metadata", {{"name", name}, {"namespace", "ml"}, {"labels", {{"kubernetes.io/service-name", service}}}}},
          {"addressType", "IPv4"},
          {"ports", {{{"name", "http"}, {"port", 8501}}, {{"name", "grpc"}, {"port", 8500}}}},
          {"endpoints", endpoints}};
}

constexpr char kTwoVersions[] = R"(
model: mnist
versions:
- {name: v1, service: mnist-v1, weight: 90}
- {name: v2, service: mnist-v2, weight: 10}
)";

template <class Predicate>
bool Eventually(Predicate predicate, std::chrono::milliseconds timeout = 5s) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    if (predicate()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return predicate();
}

class ClusterWatcherTest : public testing::Test {
 protected:
  std::shared_ptr<k8s::testing::FakeApiServer> server_ = std::make_shared<k8s::testing::FakeApiServer>();
  k8s::Client client_{server_, k8s::ClusterConfig{},
                      k8s::ClientOptions{.qps = 0, .backoff_base = 1ms, .backoff_cap = 10ms}};
  SnapshotStore store_;
  SnapshotPublisher publisher_{store_, /*cluster_mode=*/true, nullptr};
};

TEST_F(ClusterWatcherTest, BuildsSnapshotsFromTheConfigMapAndEndpointSlices) {
  server_->Put(kConfigMaps, ConfigMap("mnist-router", kTwoVersions));
  server_->Put(kConfigMaps, ConfigMap("other", "not: [valid"));  // another ConfigMap: ignored
  server_->Put(kSlices, Slice("mnist-v1-a", "mnist-v1", {{"10.0.0.1", true}, {"10.0.0.2", false}}));
  server_->Put(kSlices, Slice("unrelated", "other-service", {{"10.9.0.1", true}}));
  ClusterWatcher watcher(client_, "ml", "mnist-router", publisher_, 5ms);
  ASSERT_TRUE(watcher.Start().ok());
  ASSERT_TRUE(watcher.WaitForSync(5s));
  ASSERT_TRUE(publisher_.ready());
  auto first = store_.Load();
  EXPECT_EQ(first->rest_ready, (std::vector<int>{1, 0}));
  EXPECT_EQ(first->rest_total, (std::vector<int>{2, 0}));
  EXPECT_EQ(first->versions[0].rest[0]->address(), "10.0.0.1:8501");

  // A pod becomes ready, v2 gets a slice: each change rebuilds.
  server_->Put(kSlices, Slice("mnist-v1-a", "mnist-v1", {{"10.0.0.1", true}, {"10.0.0.2", true}}));
  server_->Put(kSlices, Slice("mnist-v2-a", "mnist-v2", {{"10.0.1.1", true}}));
  ASSERT_TRUE(Eventually([&] { return store_.Load()->rest_ready == std::vector<int>{2, 1}; }));

  // A weight change in the ConfigMap.
  server_->Put(kConfigMaps, ConfigMap("mnist-router", R"(
model: mnist
versions:
- {name: v1, service: mnist-v1, weight: 70}
- {name: v2, service: mnist-v2, weight: 30}
)"));
  ASSERT_TRUE(Eventually([&] { return store_.Load()->config.versions[1].weight == 30; }));
  const uint64_t generation = store_.Load()->generation;

  // A bad edit keeps the previous snapshot.
  server_->Put(kConfigMaps, ConfigMap("mnist-router", "versions: [{name: v1, weight: 50}]"));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(store_.Load()->generation, generation);
  EXPECT_EQ(store_.Load()->config.versions[1].weight, 30);

  // So does deleting the ConfigMap; the endpoints still update.
  server_->Remove(kConfigMaps, "ml", "mnist-router");
  server_->Remove(kSlices, "ml", "mnist-v2-a");
  ASSERT_TRUE(Eventually([&] { return store_.Load()->rest_ready == std::vector<int>{2, 0}; }));
  EXPECT_EQ(store_.Load()->config.versions[1].weight, 30);
  watcher.Stop();
}

TEST_F(ClusterWatcherTest, NotReadyWithoutTheConfigMapUntilItAppears) {
  ClusterWatcher watcher(client_, "ml", "mnist-router", publisher_, 5ms);
  ASSERT_TRUE(watcher.Start().ok());
  ASSERT_TRUE(watcher.WaitForSync(5s));
  EXPECT_FALSE(publisher_.ready());
  EXPECT_EQ(store_.Load(), nullptr);
  server_->Put(kConfigMaps, ConfigMap("mnist-router", kTwoVersions));
  ASSERT_TRUE(Eventually([&] { return publisher_.ready(); }));
}

TEST_F(ClusterWatcherTest, AConfigMapWithoutTheKeyIsAnError) {
  json configmap = ConfigMap("mnist-router", kTwoVersions);
  configmap["data"] = {{"router.yml", kTwoVersions}};
  server_->Put(kConfigMaps, configmap);
  ClusterWatcher watcher(client_, "ml", "mnist-router", publisher_, 5ms);
  ASSERT_TRUE(watcher.Start().ok());
  ASSERT_TRUE(watcher.WaitForSync(5s));
  EXPECT_FALSE(publisher_.ready());
}

TEST(FileConfigWatcherTest, ReloadsWhenTheFileChanges) {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("router_watch_" + std::to_string(::getpid()) + ".yaml");
  auto write = [&](const std::string& text) {
    std::ofstream(path.string() + ".tmp") << text;
    std::filesystem::rename(path.string() + ".tmp", path);
  };
  write("versions: [{name: a, weight: 100, endpoints: ['127.0.0.1:1']}]");
  SnapshotStore store;
  SnapshotPublisher publisher(store, /*cluster_mode=*/false, nullptr);
  FileConfigWatcher watcher(path, publisher, 20ms);
  ASSERT_TRUE(watcher.Start().ok());
  EXPECT_EQ(store.Load()->rest_ready, (std::vector<int>{1}));
  write("versions: [{name: a, weight: 100, endpoints: ['127.0.0.1:1', '127.0.0.1:2']}]");
  ASSERT_TRUE(Eventually([&] { return store.Load()->rest_ready == std::vector<int>{2}; }));
  write("versions: [{name: a, weight: 99}]");  // refused: the previous one stays
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(store.Load()->rest_ready, (std::vector<int>{2}));
  EXPECT_EQ(publisher.generation(), 2u);
  watcher.Stop();
  std::filesystem::remove(path);
}

TEST(FileConfigWatcherTest, ABadFileAtStartIsAnError) {
  SnapshotStore store;
  SnapshotPublisher publisher(store, false, nullptr);
  FileConfigWatcher missing("/nonexistent/router.yaml", publisher);
  Status s = missing.Start();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/router.yaml"), std::string::npos);
}

}  // namespace
}  // namespace mf::router
