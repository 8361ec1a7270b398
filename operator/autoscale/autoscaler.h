// Replicas per model version from measured load, as a pure function of time: the Horizontal Pod
// Autoscaler's algorithm (desired = ceil(load / targetPerReplica) within [min, max], a tolerance
// band around the current size, scale-up at once, scale-down to the highest recommendation of the
// stabilization window) without a metrics adapter. The caller keeps the recommendation history.
#pragma once

#include <cstdint>
#include <deque>
#include <string>

#include "modeldeployment/spec.h"

namespace mf::op {

struct Recommendation {
  int64_t at_ms = 0;
  int32_t replicas = 0;
};

struct ScaleInput {
  AutoscalingSpec spec;
  int32_t current = 0;      // replicas the version's Deployment asks for now
  double load = 0;          // requests/s (metric qps) or requests in flight (concurrency) for this version
  bool load_known = false;  // no report yet: hold the current size
  int64_t now_ms = 0;
};

struct ScaleDecision {
  int32_t desired = 0;
  std::string reason;  // for status and Events, e.g. "qps 250.0 over target 100/replica: 3"
};

// `history` holds this version's recent recommendations; the call appends today's and drops the
// ones older than the stabilization window. An empty history (a new version, a restarted operator)
// is seeded with the current size, so a restart never scales down at once.
ScaleDecision DecideReplicas(const ScaleInput& in, std::deque<Recommendation>* history);

}  // namespace mf::op
