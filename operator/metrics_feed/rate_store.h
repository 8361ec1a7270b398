// What the routers measured, pushed to the operator every second (POST /v1/reports on the metrics
// port), kept per ModelDeployment and router as a short history of cumulative counters, and read
// back as rates over a window: requests/s, requests in flight, errors, p99 latency and mirrored
// disagreements per version. Sums over a ModelDeployment's routers; a router silent for longer
// than `stale` is left out (it died or was scaled away); a counter that went down (a restarted
// router) starts a new series instead of producing a negative rate. Thread-safe; time is passed
// in, so tests simulate it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "modeldeployment/spec.h"

namespace mf::op {

struct VersionCounters {
  double requests = 0;  // cumulative
  double errors = 0;    // cumulative 5xx
  double in_flight = 0;
  double mirrored = 0;
  double disagreements = 0;
  std::vector<std::pair<double, double>> latency_buckets;  // cumulative (upper bound s, count), +Inf last
};

struct RouterReport {
  std::string modeldeployment;  // "namespace/name"
  std::string router;           // pod name
  std::map<std::string, VersionCounters> versions;
};

// Parses a report body; INVALID_ARGUMENT naming what is wrong (bodies come from the network).
StatusOr<RouterReport> ParseRouterReport(const std::string& body);

struct VersionRates {
  double qps = 0;
  double in_flight = 0;
  int64_t requests = 0;  // in the window
  int64_t errors = 0;
  double p99_ms = 0;  // 0 without requests
  int64_t mirrored = 0;
  int64_t disagreements = 0;
};

class RateStore {
 public:
  explicit RateStore(int64_t stale_ms = 5000, int64_t keep_ms = 10 * 60 * 1000)
      : stale_ms_(stale_ms), keep_ms_(keep_ms) {}

  void Add(RouterReport report, int64_t now_ms);
  // Rates per version over the last `window_ms` (at least two samples apart in time);
  // nullopt when no live router reported for the ModelDeployment.
  std::optional<std::map<std::string, VersionRates>> Rates(const std::string& modeldeployment, int64_t window_ms,
                                                           int64_t now_ms) const;
  void Forget(const std::string& modeldeployment);

 private:
  struct Sample {
    int64_t at_ms;
    std::map<std::string, VersionCounters> versions;
  };
  const int64_t stale_ms_;
  const int64_t keep_ms_;
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, std::deque<Sample>>> samples_;  // md -> router -> samples
};

}  // namespace mf::op
