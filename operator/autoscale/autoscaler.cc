#include "autoscale/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace mf::op {
namespace {

std::string Format(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

}  // namespace

ScaleDecision DecideReplicas(const ScaleInput& in, std::deque<Recommendation>* history) {
  const AutoscalingSpec& s = in.spec;
  const int64_t window_ms = s.scale_down_stabilization_seconds * 1000;
  if (history->empty()) history->push_back({in.now_ms, in.current});
  while (!history->empty() && history->front().at_ms < in.now_ms - window_ms) history->pop_front();

  const std::string what = s.metric == "concurrency" ? "in-flight requests" : "qps";
  const auto clamp = [&](int64_t n) {
    return static_cast<int32_t>(std::clamp<int64_t>(n, s.min_replicas, s.max_replicas));
  };
  int32_t raw;
  std::string why;
  if (!in.load_known) {
    raw = clamp(in.current);
    why = "no load measured yet: holding " + std::to_string(raw);
  } else {
    const double needed = in.load / s.target_per_replica;
    const bool within_tolerance =
        in.current > 0 && std::abs(in.load / (in.current * s.target_per_replica) - 1) <= s.tolerance;
    raw = clamp(within_tolerance ? in.current : static_cast<int64_t>(std::ceil(needed - 1e-9)));
    why = what + " " + Format(in.load) + " over target " + Format(s.target_per_replica) + "/replica";
  }
  history->push_back({in.now_ms, raw});

  if (raw >= in.current) return {raw, why + ": " + std::to_string(raw)};
  // Scaling down: to the highest recommendation of the window, so a dip does not shed pods that
  // the next burst needs (and the size never flaps).
  int32_t highest = raw;
  for (const auto& r : *history) highest = std::max(highest, r.replicas);
  const int32_t desired = std::min(highest, in.current);
  if (desired > raw) {
    return {desired, why + ": " + std::to_string(raw) + ", held at " + std::to_string(desired) + " by the " +
                         std::to_string(s.scale_down_stabilization_seconds) + "s stabilization window"};
  }
  return {desired, why + ": " + std::to_string(desired)};
}

}  // namespace mf::op
