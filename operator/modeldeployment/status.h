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

// Why a version's pods cannot serve. Empty when nothing is wrong.
struct PodProblem {
  std::string reason;  // ModelSyncFailed | ServerFailed | Unschedulable | ModelLoadFailed
  std::string message;
};

struct ObservedVersion {
  Json deployment;           // our Deployment for the version (null: not created yet)
  std::vector<Json> pods;    // its serving pods
  PodProblem model_problem;  // from a stuck pod's server (DiagnoseModelStatus), if one was asked
};

struct ObservedState {
  std::map<std::string, ObservedVersion> versions;  // by version name
  Json router_deployment;                           // null when not created yet
  std::set<std::string> retiring;                   // removed from the spec, objects still draining
};

// From the pod object alone: a failed model sync (the sidecar's termination message), a
// crash-looping server, or a pod the scheduler cannot place.
PodProblem DiagnosePod(const Json& pod);

// A serving pod whose server runs but stays not ready: the server's TF Serving model status
// (GET /v1/models/<name>) says why a version failed to load (e.g. --device=cuda on a machine
// without a GPU). ModelLoadFailed with the server's message, or empty while it is still loading.
PodProblem DiagnoseModelStatus(const std::string& body);

// How long `pod`'s server container has been running without being ready (`now` in seconds
// since the epoch), or -1 when it is ready or not running: long enough, and the server is asked why.
int64_t ServerNotReadySeconds(const Json& pod, int64_t now);

// The percent per version the routers apply: a version with no ready pod gets nothing and its
// share goes to the others in proportion to their weights (largest remainder, so the result
// still sums to 100). With no ready version at all the weights are returned unchanged.
std::map<std::string, int> EffectiveTraffic(const std::map<std::string, int>& weights,
                                            const std::set<std::string>& ready_versions);

// "v1=90,v2=10" in the spec's version order.
std::string TrafficSummary(const ModelDeploymentSpec& md, const std::map<std::string, int>& traffic);

// What the routers measured for a version, for status.versions[] and the QPS column.
struct VersionLoad {
  double qps = 0;
  double error_rate = 0;
  double latency_p99_ms = 0;
};

struct StatusInput {
  const Json* object = nullptr;               // the ModelDeployment as stored (previous status included)
  const ModelDeploymentSpec* spec = nullptr;  // null when the spec is invalid
  Status spec_error;                          // why, when spec is null
  const ObservedState* observed = nullptr;
  std::map<std::string, int> weights;       // what the operator told the routers
  std::string now;                          // RFC 3339, for lastTransitionTime
  std::map<std::string, int32_t> replicas;  // the autoscaler's sizes (else the spec's)
  std::map<std::string, VersionLoad> load;  // measured by the routers, when they reported
  Json rollout;                             // status.rollout, when spec.rollout is set
};

Json BuildStatus(const StatusInput& in);

// The condition of `type` in a status, or null.
Json FindCondition(const Json& status, const std::string& type);

}  // namespace mf::op
