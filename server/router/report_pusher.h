// Pushes this router's per-version counters to the operator every second (POST --report-url), so
// the operator sees a step in load within about a second for autoscaling and judges a canary's
// error rate and p99 for rollouts without a metrics pipeline in between. Cumulative counters: a
// lost push costs nothing, the next one carries everything.
#pragma once

#include <prometheus/metric_family.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace mf::router {

// The report body (the operator's ParseRouterReport reads it) from the process's metric families:
// requests and errors (5xx, or gRPC codes that mean the server failed) summed over protocols and
// codes, in-flight, mirrored, disagreements and the latency histogram's cumulative buckets.
nlohmann::json BuildReport(const std::vector<prometheus::MetricFamily>& families, const std::string& modeldeployment,
                           const std::string& router);

class ReportPusher {
 public:
  ReportPusher(std::string url, std::string modeldeployment, std::string router,
               std::chrono::milliseconds interval = std::chrono::seconds(1));
  ~ReportPusher();  // stops and joins

 private:
  void Run(std::stop_token stop);
  const std::string url_, modeldeployment_, router_;
  const std::chrono::milliseconds interval_;
  std::jthread thread_;
};

}  // namespace mf::router
