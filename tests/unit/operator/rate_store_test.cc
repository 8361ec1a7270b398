#include "metrics_feed/rate_store.h"

#include <gtest/gtest.h>

namespace mf::op {
namespace {

std::string Report(const char* router, double requests, double errors = 0, double in_flight = 0, double fast = -1) {
  if (fast < 0) fast = requests;
  return Json{{"modeldeployment", "ml/mnist"},
              {"router", router},
              {"versions",
               {{"v1",
                 {{"requests", requests},
                  {"errors", errors},
                  {"inFlight", in_flight},
                  {"latencyBuckets", Json::array({Json::array({0.01, fast}), Json::array({0.1, requests}),
                                                  Json::array({"+Inf", requests})})}}}}}}
      .dump();
}

void Add(RateStore& store, const std::string& body, int64_t at_ms) {
  auto r = ParseRouterReport(body);
  ASSERT_TRUE(r.ok()) << r.status().message();
  store.Add(*r, at_ms);
}

TEST(RateStoreTest, SumsRoutersOverTheWindow) {
  RateStore store;
  for (int t = 0; t <= 5; ++t) {
    Add(store, Report("r1", 100.0 * t, 1.0 * t, 3), t * 1000);
    Add(store, Report("r2", 50.0 * t, 0, 1), t * 1000);
  }
  auto rates = store.Rates("ml/mnist", 2000, 5000);
  ASSERT_TRUE(rates);
  const auto& v1 = rates->at("v1");
  EXPECT_DOUBLE_EQ(v1.qps, 150);
  EXPECT_EQ(v1.requests, 300);
  EXPECT_EQ(v1.errors, 2);
  EXPECT_DOUBLE_EQ(v1.in_flight, 4);
  EXPECT_GT(v1.p99_ms, 0);
  EXPECT_LE(v1.p99_ms, 10);  // every request was under 10 ms
}

TEST(RateStoreTest, P99ComesFromTheBucketsOfTheWindow) {
  RateStore store;
  Add(store, Report("r1", 0, 0, 0, 0), 0);
  Add(store, Report("r1", 1000, 0, 0, /*fast=*/900), 1000);  // 10% between 10 and 100 ms
  const double p99 = store.Rates("ml/mnist", 5000, 1000)->at("v1").p99_ms;
  EXPECT_NEAR(p99, 10 + 90 * 0.9, 1);
}

TEST(RateStoreTest, StaleAndRestartedRouters) {
  RateStore store(/*stale_ms=*/5000);
  Add(store, Report("r1", 0), 0);
  Add(store, Report("r1", 100), 1000);
  EXPECT_FALSE(store.Rates("ml/mnist", 2000, 7000));  // silent for 6 s
  EXPECT_FALSE(store.Rates("ml/other", 2000, 1000));
  Add(store, Report("r1", 500), 8000);
  Add(store, Report("r1", 10), 9000);  // restarted: counters reset
  Add(store, Report("r1", 60), 10000);
  EXPECT_DOUBLE_EQ(store.Rates("ml/mnist", 2000, 10000)->at("v1").qps, 50);
  store.Forget("ml/mnist");
  EXPECT_FALSE(store.Rates("ml/mnist", 2000, 10000));
}

TEST(RateStoreTest, MalformedReportsAreRefused) {
  const char* bad[] = {
      "",
      "[]",
      "{}",
      R"({"modeldeployment": "x", "router": "r", "versions": {}})",
      R"({"modeldeployment": "ns/x", "router": "r", "versions": {"v1": {"requests": -1}}})",
      R"({"modeldeployment": "ns/x", "router": "r", "versions": {"v1": {"latencyBuckets": [[0.1, 5], [0.05, 6]]}}})",
      R"({"modeldeployment": "ns/x", "router": "r", "versions": {"v1": {"latencyBuckets": [["inf", 1]]}}})",
      R"({"modeldeployment": "ns/x", "router": "r", "versions": []})"};
  for (const char* body : bad) EXPECT_FALSE(ParseRouterReport(body).ok()) << body;
}

}  // namespace
}  // namespace mf::op
