// A ModelDeployment's status as a pure function of its spec and what exists: per-version
// replicas and model state, the traffic the routers apply, the summaries the printer columns
// show, and the Ready / Progressing / Degraded conditions with reasons users can act on.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "modeldeployment/spec.h"

namespace mf::op {

struct ObservedVersion {
  Json deployment;         // our Deployment for the version (null: not created yet)
  std::vector<Json> pods;  // its serving pods
};

struct ObservedState {
  std::map<std::string, ObservedVersion> versions;  // by version name
  Json router_deployment;                           // null when not created yet
  std::set<std::string> retiring;                   // removed from the spec, objects still draining
};

// Why one pod cannot serve: a failed model sync (the sidecar's termination message), a
// crash-looping server, or a pod the scheduler cannot place. Empty when none of these.
struct PodProblem {
  std::string reason;  // ModelSyncFailed | ServerFailed | Unschedulable
  std::string message;
};
PodProblem DiagnosePod(const Json& pod);

// The percent per version the routers apply: a version with no ready pod gets nothing and its
// share goes to the others in proportion to their weights (largest remainder, so the result
// still sums to 100). With no ready version at all the weights are returned unchanged.
std::map<std::string, int> EffectiveTraffic(const std::map<std::string, int>& weights,
                                            const std::set<std::string>& ready_versions);

// "v1=90,v2=10" in the spec's version order.
std::string TrafficSummary(const ModelDeploymentSpec& md, const std::map<std::string, int>& traffic);

struct StatusInput {
  const Json* object = nullptr;               // the ModelDeployment as stored (previous status included)
  const ModelDeploymentSpec* spec = nullptr;  // null when the spec is invalid
  Status spec_error;                          // why, when spec is null
  const ObservedState* observed = nullptr;
  std::map<std::string, int> weights;  // what the operator told the routers
  std::string now;                     // RFC 3339, for lastTransitionTime
};

Json BuildStatus(const StatusInput& in);

// The condition of `type` in a status, or null.
Json FindCondition(const Json& status, const std::string& type);

}  // namespace mf::op
