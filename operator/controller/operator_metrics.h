// The operator's Prometheus metrics: reconciles by result, their latency, the work queue's
// depth, leadership, and each version's replicas (the dashboards' "replicas per version").
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace mf::op {

class OperatorMetrics {
 public:
  explicit OperatorMetrics(prometheus::Registry& registry);

  // result: "success" | "error" | "requeue".
  void ObserveReconcile(const std::string& controller, const std::string& result, std::chrono::duration<double> took);
  void SetQueueDepth(const std::string& controller, double depth);
  void SetLeader(bool leading);
  void SetVersionReplicas(const std::string& ns, const std::string& md, const std::string& version, int64_t replicas,
                          int64_t ready);
  // Drops the series of versions of `md` not in `keep` (all of them when `keep` is empty).
  void ForgetVersions(const std::string& ns, const std::string& md, const std::set<std::string>& keep = {});

 private:
  prometheus::Family<prometheus::Counter>& reconciles_;
  prometheus::Family<prometheus::Counter>& errors_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Gauge>& queue_depth_;
  prometheus::Gauge& leader_;
  prometheus::Family<prometheus::Gauge>& replicas_;
  prometheus::Family<prometheus::Gauge>& ready_replicas_;
  std::mutex mu_;
  // (ns, md) -> version -> its two gauges, so a removed version's series can be dropped.
  std::map<std::pair<std::string, std::string>,
           std::map<std::string, std::pair<prometheus::Gauge*, prometheus::Gauge*>>>
      versions_;
};

}  // namespace mf::op
