#include "server/router/report_pusher.h"

#include <gtest/gtest.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace mf::router {
namespace {

TEST(ReportPusherTest, BuildsTheOperatorsReportFromTheRoutersSeries) {
  prometheus::Registry registry;
  auto& requests = prometheus::BuildCounter().Name("modelfleet_router_requests_total").Register(registry);
  requests.Add({{"version", "v1"}, {"protocol", "rest"}, {"code", "200"}}).Increment(90);
  requests.Add({{"version", "v1"}, {"protocol", "rest"}, {"code", "503"}}).Increment(4);
  requests.Add({{"version", "v1"}, {"protocol", "grpc"}, {"code", "UNAVAILABLE"}}).Increment(1);
  requests.Add({{"version", "v1"}, {"protocol", "grpc"}, {"code", "INVALID_ARGUMENT"}}).Increment(5);
  requests.Add({{"version", "none"}, {"protocol", "rest"}, {"code", "503"}}).Increment(7);
  prometheus::BuildGauge().Name("modelfleet_router_in_flight").Register(registry).Add({{"version", "v1"}}).Set(3);
  prometheus::BuildCounter()
      .Name("modelfleet_router_mirrored_total")
      .Register(registry)
      .Add({{"version", "v2"}})
      .Increment(8);
  auto& duration = prometheus::BuildHistogram().Name("modelfleet_router_request_duration_seconds").Register(registry);
  duration.Add({{"version", "v1"}, {"protocol", "rest"}}, prometheus::Histogram::BucketBoundaries{0.01, 0.1})
      .Observe(0.005);
  duration.Add({{"version", "v1"}, {"protocol", "grpc"}}, prometheus::Histogram::BucketBoundaries{0.01, 0.1})
      .Observe(0.05);

  const auto report = BuildReport(registry.Collect(), "ml/mnist", "mnist-router-abc");
  EXPECT_EQ(report["modeldeployment"], "ml/mnist");
  EXPECT_EQ(report["router"], "mnist-router-abc");
  const auto& v1 = report["versions"]["v1"];
  EXPECT_EQ(v1["requests"], 100);
  EXPECT_EQ(v1["errors"], 5);  // 503 and UNAVAILABLE; a client's INVALID_ARGUMENT is not the server failing
  EXPECT_EQ(v1["inFlight"], 3);
  EXPECT_EQ(v1["latencyBuckets"], nlohmann::json::parse(R"([[0.01, 1], [0.1, 2], ["+Inf", 2]])"));
  EXPECT_EQ(report["versions"]["v2"]["mirrored"], 8);
  EXPECT_FALSE(report["versions"].contains("none"));
}

}  // namespace
}  // namespace mf::router
