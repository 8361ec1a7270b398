// Snapshots from configs and EndpointSlices: ready endpoints only, named ports, Endpoint state
// shared across snapshots; and the mirror comparison.
#include "server/router/snapshot.h"

#include <gtest/gtest.h>

#include "server/router/mirror_compare.h"

namespace mf::router {
namespace {

std::shared_ptr<const nlohmann::json> Slice(const std::string& service, nlohmann::json endpoints,
                                            nlohmann::json ports = nlohmann::json::array()) {
  nlohmann::json slice = {{"metadata", {{"name", service + "-abc"}, {"labels", nlohmann::json::object()}}},
                          {"addressType", "IPv4"},
                          {"endpoints", std::move(endpoints)},
                          {"ports", std::move(ports)}};
  if (!service.empty()) slice["metadata"]["labels"]["kubernetes.io/service-name"] = service;
  return std::make_shared<const nlohmann::json>(std::move(slice));
}

nlohmann::json Ep(const std::string& ip, nlohmann::json conditions) {
  return {{"addresses", {ip}}, {"conditions", std::move(conditions)}};
}

TEST(SnapshotTest, ReadsEndpointSlices) {
  ServiceEndpoints got = ServiceEndpointsFromSlices({
      Slice("mnist-v1",
            {Ep("10.0.0.2", {{"ready", true}}), Ep("10.0.0.1", {{"ready", true}}), Ep("10.0.0.3", {{"ready", false}}),
             Ep("10.0.0.4", {{"ready", true}, {"terminating", true}}), Ep("10.0.0.5", nlohmann::json::object())},
            {{{"name", "http"}, {"port", 9001}}, {{"name", "grpc"}, {"port", 9000}}}),
      Slice("mnist-v1", {Ep("10.0.1.1", {{"ready", true}})}),  // a second slice, default ports
      Slice("", {Ep("10.9.9.9", {{"ready", true}})}),          // no service label: skipped
      std::make_shared<const nlohmann::json>(nlohmann::json{{"endpoints", 5}}),
      Slice("broken", {"not-an-object", {{"addresses", "x"}}, Ep("", {{"ready", true}})}),
  });
  ASSERT_EQ(got.size(), 2u);
  const auto& v1 = got.at("mnist-v1");
  ASSERT_EQ(v1.size(), 6u);
  EXPECT_EQ(v1[0], (DiscoveredEndpoint{"10.0.0.1", 9001, 9000, true}));
  EXPECT_EQ(v1[1], (DiscoveredEndpoint{"10.0.0.2", 9001, 9000, true}));
  EXPECT_FALSE(v1[2].ready);  // ready: false
  EXPECT_FALSE(v1[3].ready);  // terminating
  EXPECT_FALSE(v1[4].ready);  // no ready condition
  EXPECT_EQ(v1[5], (DiscoveredEndpoint{"10.0.1.1", 8501, 8500, true}));
  EXPECT_TRUE(got.at("broken").empty());
}

TEST(SnapshotTest, BuildsFromDiscoveredEndpointsAndSharesEndpointState) {
  auto config = ParseRouterConfig(R"(
model: m
versions:
- {name: v1, service: s1, weight: 90}
- {name: v2, service: s2, weight: 10}
- {name: v3, service: gone, weight: 0}
mirror: {version: v2, percent: 5}
)",
                                  "t");
  ASSERT_TRUE(config.ok());
  ServiceEndpoints discovered = {
      {"s1", {{"10.0.0.1", 8501, 8500, true}, {"10.0.0.2", 8501, 8500, false}}},
      {"s2", {{"fd00::1", 8501, 8500, true}}},
  };
  EndpointRegistry registry;
  auto first = BuildSnapshot(*config, &discovered, 1, registry, nullptr);
  ASSERT_EQ(first->versions.size(), 3u);
  EXPECT_EQ(first->rest_ready, (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(first->rest_total, (std::vector<int>{2, 1, 0}));
  EXPECT_EQ(first->versions[0].rest[0]->address(), "10.0.0.1:8501");
  EXPECT_EQ(first->versions[0].grpc[0]->address(), "10.0.0.1:8500");
  EXPECT_EQ(first->versions[1].rest[0]->address(), "[fd00::1]:8501");
  EXPECT_EQ(first->mirror_version, 1);

  first->versions[0].rest[0]->Begin();
  discovered["s1"][1].ready = true;
  auto second = BuildSnapshot(*config, &discovered, 2, registry, nullptr);
  EXPECT_EQ(second->rest_ready, (std::vector<int>{2, 1, 0}));
  // The same address is the same Endpoint: in-flight counts and ejection carry over.
  EXPECT_EQ(second->versions[0].rest[0].get(), first->versions[0].rest[0].get());
  EXPECT_EQ(second->versions[0].rest[0]->outstanding(), 1);
}

TEST(SnapshotTest, StaticEndpointsComeFromTheConfig) {
  auto config = ParseRouterConfig(
      "versions: [{name: a, weight: 100, endpoints: ['127.0.0.1:1', '127.0.0.1:2'], grpcEndpoints: ['h:3']}]", "t");
  ASSERT_TRUE(config.ok());
  EndpointRegistry registry;
  auto snapshot = BuildSnapshot(*config, nullptr, 1, registry, nullptr);
  EXPECT_EQ(snapshot->rest_ready, (std::vector<int>{2}));
  EXPECT_EQ(snapshot->grpc_ready, (std::vector<int>{1}));
  EXPECT_EQ(snapshot->mirror_version, -1);
}

TEST(EndpointTest, EjectsAfterConsecutiveFailures) {
  Endpoint endpoint("h:1");
  OutlierPolicy policy{.consecutive_failures = 3, .ejection = std::chrono::seconds(30)};
  const Clock::time_point t0 = Clock::now();
  EXPECT_FALSE(endpoint.RecordFailure(t0, policy));
  EXPECT_FALSE(endpoint.RecordFailure(t0, policy));
  endpoint.RecordSuccess();  // the run is broken
  EXPECT_FALSE(endpoint.RecordFailure(t0, policy));
  EXPECT_FALSE(endpoint.RecordFailure(t0, policy));
  EXPECT_FALSE(endpoint.Ejected(t0));
  EXPECT_TRUE(endpoint.RecordFailure(t0, policy));
  EXPECT_TRUE(endpoint.Ejected(t0 + std::chrono::seconds(29)));
  EXPECT_FALSE(endpoint.Ejected(t0 + std::chrono::seconds(31)));
}

TEST(MirrorCompareTest, Table) {
  struct Case {
    const char* name;
    int status_a;
    const char* a;
    int status_b;
    const char* b;
    bool agree;
  };
  for (
      const Case& c : {
          Case{"identical", 200, R"({"predictions":[[0.1,0.9]]})", 200, R"({"predictions":[[0.1,0.9]]})", true},
          Case{"within_tolerance", 200, R"({"predictions":[[0.1,0.9]]})", 200,
               R"({"predictions": [[0.10005, 0.89995]]})", true},
          Case{"beyond_tolerance", 200, R"({"predictions":[[0.1,0.9]]})", 200, R"({"predictions":[[0.1003,0.8997]]})",
               false},
          Case{"relative_for_large", 200, R"({"predictions":[12345.6]})", 200, R"({"predictions":[12345.9]})", true},
          Case{"int_vs_float", 200, R"({"predictions":[1]})", 200, R"({"predictions":[1.00001]})", true},
          Case{"shape_differs", 200, R"({"predictions":[[1,2]]})", 200, R"({"predictions":[[1,2,3]]})", false},
          Case{"status_differs", 200, R"({"predictions":[1]})", 500, R"({"predictions":[1]})", false},
          Case{
              "outputs_kserve_ignore_model_version", 200,
              R"({"model_name":"m","model_version":"1","outputs":[{"name":"y","shape":[1],"datatype":"FP32","data":[0.5]}]})",
              200,
              R"({"model_name":"m","model_version":"2","outputs":[{"name":"y","shape":[1],"datatype":"FP32","data":[0.50001]}]})",
              true},
          Case{"predictions_missing_on_one_side", 200, R"({"predictions":[1]})", 200, R"({"error":"x"})", false},
          Case{"plain_text_same", 200, "ok", 200, "ok", true},
          Case{"plain_text_differs", 200, "ok", 200, "ko", false},
          Case{"invalid_json", 200, R"({"predictions":[1]})", 200, R"({"predictions":[1)", false},
          Case{"strings_exact", 200, R"({"predictions":["cat"]})", 200, R"({"predictions":["dog"]})", false},
      }) {
    EXPECT_EQ(ResponsesAgree(c.status_a, c.a, c.status_b, c.b), c.agree) << c.name;
  }
}

}  // namespace
}  // namespace mf::router
