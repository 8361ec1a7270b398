// A progressive canary rollout as a pure function of time: the newest version (the last in
// spec.versions) walks through spec.rollout.steps' percentages against the one before it,
// pausing as told; at each analysis interval its error rate and p99 latency, as the routers
// measured them, are checked against spec.rollout.analysis. A failing check aborts (traffic back to
// the stable version, RolledBack); passing the last step promotes. Too little traffic to judge is
// inconclusive: the rollout waits and says so. With spec.mirror on the canary and
// analysis.maxDisagreement, mirrored answers are compared before any real traffic moves. A hand
// edit of spec.traffic pauses the automatic steps and is respected.
//
// The state lives in status.rollout, so a restarted operator carries on where the last one was.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "modeldeployment/spec.h"

namespace mf::op {

struct RolloutState {
  std::string canary;      // version name
  std::string canary_uri;  // its storageUri: a new one starts a new rollout
  std::string stable;
  int step = -1;      // index into steps; -1 while mirroring
  std::string phase;  // Progressing | Paused | Promoted | Aborted ("" = not started)
  std::string message;
  int64_t step_started_s = 0;
  int64_t analysis_passed_s = 0;  // last passing analysis in this step (0: none yet)
  std::string spec_traffic;       // spec.traffic when the rollout began, to notice hand edits
  std::string abort_reason;       // for RolledBack

  static RolloutState FromStatus(const Json& rollout);
  Json ToStatus() const;
};

// What the routers measured for the canary over the last analysis interval.
struct CanaryMetrics {
  bool known = false;
  int64_t requests = 0;
  int64_t errors = 0;  // 5xx answers
  double p99_ms = 0;
  int64_t mirrored = 0;
  int64_t disagreements = 0;
};

struct RolloutDecision {
  RolloutState state;
  std::map<std::string, int> weights;  // what the routers are told
  std::string event_reason;            // "" = nothing worth an Event
  std::string event_message;
  bool warning = false;
};

// `canary_problem`: why the canary's pods cannot serve (a failed sync, a model that does not load,
// a crash loop), "" when nothing is wrong; a failing canary is rolled back without waiting.
RolloutDecision StepRollout(const ModelDeploymentSpec& md, const RolloutState& previous, bool canary_ready,
                            const CanaryMetrics& metrics, int64_t now_s, const std::string& canary_problem = "");

}  // namespace mf::op
