#include "controller/operator_metrics.h"

#include "metrics/metrics.h"

namespace mf::op {

OperatorMetrics::OperatorMetrics(prometheus::Registry& registry)
    : reconciles_(prometheus::BuildCounter()
                      .Name("modelfleet_operator_reconcile_total")
                      .Help("Reconciles by controller and result (success, error, requeue)")
                      .Register(registry)),
      errors_(prometheus::BuildCounter()
                  .Name("modelfleet_operator_reconcile_errors_total")
                  .Help("Reconciles that failed and were requeued with backoff")
                  .Register(registry)),
      duration_(prometheus::BuildHistogram()
                    .Name("modelfleet_operator_reconcile_duration_seconds")
                    .Help("Time one reconcile took")
                    .Register(registry)),
      queue_depth_(prometheus::BuildGauge()
                       .Name("modelfleet_operator_queue_depth")
                       .Help("Keys waiting in the work queue")
                       .Register(registry)),
      leader_(prometheus::BuildGauge()
                  .Name("modelfleet_operator_leader")
                  .Help("1 while this replica holds the leader lease")
                  .Register(registry)
                  .Add({})),
      replicas_(prometheus::BuildGauge()
                    .Name("modelfleet_operator_version_replicas")
                    .Help("Serving pods per model version")
                    .Register(registry)),
      ready_replicas_(prometheus::BuildGauge()
                          .Name("modelfleet_operator_version_ready_replicas")
                          .Help("Ready serving pods per model version")
                          .Register(registry)) {
  // Series that exist from the start read 0 instead of being absent until the first error.
  errors_.Add({{"controller", "modeldeployment"}});
  reconciles_.Add({{"controller", "modeldeployment"}, {"result", "error"}});
}

void OperatorMetrics::ObserveReconcile(const std::string& controller, const std::string& result,
                                       std::chrono::duration<double> took) {
  reconciles_.Add({{"controller", controller}, {"result", result}}).Increment();
  if (result == "error") errors_.Add({{"controller", controller}}).Increment();
  duration_.Add({{"controller", controller}}, metrics::LatencySecondsBuckets()).Observe(took.count());
}

void OperatorMetrics::SetQueueDepth(const std::string& controller, double depth) {
  queue_depth_.Add({{"controller", controller}}).Set(depth);
}

void OperatorMetrics::SetLeader(bool leading) { leader_.Set(leading ? 1 : 0); }

void OperatorMetrics::SetVersionReplicas(const std::string& ns, const std::string& md, const std::string& version,
                                         int64_t replicas, int64_t ready) {
  std::lock_guard lock(mu_);
  auto& slot = versions_[{ns, md}][version];
  if (!slot.first) {
    const std::map<std::string, std::string> labels = {
        {"namespace", ns}, {"modeldeployment", md}, {"version", version}};
    slot = {&replicas_.Add(labels), &ready_replicas_.Add(labels)};
  }
  slot.first->Set(static_cast<double>(replicas));
  slot.second->Set(static_cast<double>(ready));
}

void OperatorMetrics::ForgetVersions(const std::string& ns, const std::string& md, const std::set<std::string>& keep) {
  std::lock_guard lock(mu_);
  auto it = versions_.find({ns, md});
  if (it == versions_.end()) return;
  for (auto v = it->second.begin(); v != it->second.end();) {
    if (keep.count(v->first)) {
      ++v;
      continue;
    }
    replicas_.Remove(v->second.first);
    ready_replicas_.Remove(v->second.second);
    v = it->second.erase(v);
  }
  if (it->second.empty()) versions_.erase(it);
}

}  // namespace mf::op
