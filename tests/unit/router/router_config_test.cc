// Parsing and validation of router.yaml: the contract the operator writes, and every way a
// config can be wrong (each refused with a message that names the problem and where it is).
#include "server/router/router_config.h"

#include <gtest/gtest.h>

namespace mf::router {
namespace {

constexpr const char* kFull = R"(
model: my_mnist_model
versions:
- name: v1
  service: mnist-v1
  weight: 90
  endpoints: ["127.0.0.1:8501", "localhost:9000"]
  grpcEndpoints: ["127.0.0.1:8500"]
- name: v2
  service: mnist-v2
  weight: 10
routes:
- {header: X-Experiment, value: b, version: v2}
stickyBy: {header: X-User-Id}
mirror: {version: v2, percent: 20}
)";

TEST(RouterConfigTest, ParsesTheOperatorsContract) {
  auto config = ParseRouterConfig(kFull, "router.yaml");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->model, "my_mnist_model");
  ASSERT_EQ(config->versions.size(), 2u);
  EXPECT_EQ(config->versions[0].name, "v1");
  EXPECT_EQ(config->versions[0].service, "mnist-v1");
  EXPECT_EQ(config->versions[0].weight, 90);
  EXPECT_EQ(config->versions[0].endpoints, (std::vector<std::string>{"127.0.0.1:8501", "localhost:9000"}));
  EXPECT_EQ(config->versions[0].grpc_endpoints, (std::vector<std::string>{"127.0.0.1:8500"}));
  EXPECT_EQ(config->versions[1].weight, 10);
  ASSERT_EQ(config->routes.size(), 1u);
  EXPECT_EQ(config->routes[0].header, "x-experiment");  // lowercased: matched case-insensitively
  EXPECT_EQ(config->routes[0].value, "b");
  EXPECT_EQ(config->routes[0].version, "v2");
  EXPECT_EQ(config->sticky.source, StickyBy::Source::kHeader);
  EXPECT_EQ(config->sticky.name, "x-user-id");
  ASSERT_TRUE(config->mirror.has_value());
  EXPECT_EQ(config->mirror->version, "v2");
  EXPECT_EQ(config->mirror->percent, 20);
  EXPECT_EQ(config->VersionIndex("v2"), 1);
  EXPECT_EQ(config->VersionIndex("v3"), -1);
}

TEST(RouterConfigTest, JsonIsAccepted) {
  auto config = ParseRouterConfig(
      R"({"model":"m","versions":[{"name":"a","service":"s","weight":100}],"stickyBy":{"cookie":"Session"}})",
      "router.json");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->sticky.source, StickyBy::Source::kCookie);
  EXPECT_EQ(config->sticky.name, "Session");  // cookie names are case-sensitive: kept
  EXPECT_FALSE(config->mirror.has_value());
}

TEST(RouterConfigTest, OptionalSectionsMayBeNull) {
  auto config = ParseRouterConfig("versions: [{name: a, weight: 100}]\nroutes:\nstickyBy:\nmirror:\n", "r");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_TRUE(config->routes.empty());
  EXPECT_EQ(config->sticky.source, StickyBy::Source::kNone);
}

struct BadConfig {
  const char* name;
  const char* text;
  const char* expected;  // a substring of the error
};

class RouterConfigRefusalTest : public testing::TestWithParam<BadConfig> {};

TEST_P(RouterConfigRefusalTest, IsRefusedWithAClearMessage) {
  auto config = ParseRouterConfig(GetParam().text, "router.yaml");
  ASSERT_FALSE(config.ok()) << GetParam().name;
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find(GetParam().expected), std::string::npos)
      << GetParam().name << ": " << config.status().message();
  EXPECT_EQ(config.status().message().rfind("router.yaml", 0), 0u) << config.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, RouterConfigRefusalTest,
    testing::Values(
        BadConfig{"empty", "", "empty"}, BadConfig{"not_a_map", "[1, 2]", "must be a map"},
        BadConfig{"invalid_yaml", "versions: [", "not valid YAML"},
        BadConfig{"no_versions", "model: m", "at least one version"},
        BadConfig{"empty_versions", "versions: []", "at least one version"},
        BadConfig{"versions_not_list", "versions: {a: 1}", "versions must be a list"},
        BadConfig{"weights_not_100", "versions: [{name: a, weight: 60}, {name: b, weight: 30}]",
                  "must sum to 100, got 60 (a) + 30 (b) = 90"},
        BadConfig{"weight_over_100", "versions: [{name: a, weight: 101}]", "between 0 and 100, got 101"},
        BadConfig{"negative_weight", "versions: [{name: a, weight: -10}, {name: b, weight: 110}]", "between 0 and 100"},
        BadConfig{"fractional_weight", "versions: [{name: a, weight: 99.5}, {name: b, weight: 0.5}]",
                  "must be an integer, got '99.5'"},
        BadConfig{"weight_missing", "versions: [{name: a}]", "needs a weight"},
        BadConfig{"name_missing", "versions: [{weight: 100}]", "needs a name"},
        BadConfig{"bad_name", "versions: [{name: 'a b', weight: 100}]", "must be 1-63 of"},
        BadConfig{"duplicate_version", "versions: [{name: a, weight: 50}, {name: a, weight: 50}]", "listed twice"},
        BadConfig{"typo_key", "versions: [{name: a, wieght: 100}]", "unknown key 'wieght' in a version"},
        BadConfig{"unknown_top_key", "versions: [{name: a, weight: 100}]\ntraffic: {a: 100}", "unknown key 'traffic'"},
        BadConfig{"duplicate_key", "versions: [{name: a, weight: 100, weight: 100}]", "given twice"},
        BadConfig{"route_unknown_version",
                  "versions: [{name: a, weight: 100}]\nroutes: [{header: h, value: x, version: b}]",
                  "route to unknown version 'b' (versions: a)"},
        BadConfig{"route_incomplete", "versions: [{name: a, weight: 100}]\nroutes: [{header: h, version: a}]",
                  "needs header, value and version"},
        BadConfig{"route_bad_header",
                  "versions: [{name: a, weight: 100}]\nroutes: [{header: 'a b', value: x, version: a}]",
                  "not a valid header name"},
        BadConfig{"sticky_both", "versions: [{name: a, weight: 100}]\nstickyBy: {header: h, cookie: c}",
                  "either header or cookie"},
        BadConfig{"sticky_empty", "versions: [{name: a, weight: 100}]\nstickyBy: {}", "needs header or cookie"},
        BadConfig{"mirror_unknown", "versions: [{name: a, weight: 100}]\nmirror: {version: z, percent: 5}",
                  "mirror names unknown version 'z'"},
        BadConfig{"mirror_percent", "versions: [{name: a, weight: 100}]\nmirror: {version: a, percent: 200}",
                  "mirror.percent must be between 0 and 100"},
        BadConfig{"endpoint_no_port", "versions: [{name: a, weight: 100, endpoints: [localhost]}]", "not host:port"},
        BadConfig{"endpoint_bad_port", "versions: [{name: a, weight: 100, endpoints: ['h:70000']}]", "not host:port"},
        BadConfig{"endpoints_not_list", "versions: [{name: a, weight: 100, endpoints: 'h:1'}]", "must be a list"}),
    [](const testing::TestParamInfo<BadConfig>& info) { return info.param.name; });

TEST(RouterConfigTest, ErrorsPointAtTheLine) {
  auto config = ParseRouterConfig("model: m\nversions:\n- name: a\n  weight: 100\n  bogus: 1\n", "cm/router.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().message().rfind("cm/router.yaml:5:", 0), 0u) << config.status().message();
}

TEST(RouterConfigTest, SplitHostPort) {
  struct Case {
    const char* in;
    bool ok;
    const char* host;
    int port;
  };
  for (const Case& c : {Case{"10.0.0.1:8501", true, "10.0.0.1", 8501}, Case{"svc.ns:80", true, "svc.ns", 80},
                        Case{"[::1]:8500", true, "::1", 8500}, Case{"::1:8500", false, "", 0},
                        Case{":80", false, "", 0}, Case{"h:", false, "", 0}, Case{"h:0", false, "", 0},
                        Case{"h:65536", false, "", 0}, Case{"h:8a", false, "", 0}, Case{"a/b:1", false, "", 0}}) {
    std::string host;
    int port = 0;
    EXPECT_EQ(SplitHostPort(c.in, &host, &port), c.ok) << c.in;
    if (c.ok) {
      EXPECT_EQ(host, c.host) << c.in;
      EXPECT_EQ(port, c.port) << c.in;
    }
  }
}

TEST(RouterConfigTest, DescribesChanges) {
  auto a = ParseRouterConfig("versions: [{name: v1, weight: 90}, {name: v2, weight: 10}]", "a");
  auto b = ParseRouterConfig(
      "versions: [{name: v1, weight: 70}, {name: v2, weight: 30}]\nmirror: {version: v2, percent: 5}", "b");
  ASSERT_TRUE(a.ok() && b.ok());
  auto changes = DescribeConfigChanges(*a, *b);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0], "weights v1 90 -> 70, v2 10 -> 30");
  EXPECT_EQ(changes[1], "mirror -> v2 5%");
  EXPECT_TRUE(DescribeConfigChanges(*a, *a).empty());
}

}  // namespace
}  // namespace mf::router
