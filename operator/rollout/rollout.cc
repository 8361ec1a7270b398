#include "rollout/rollout.h"

#include <cstdio>

namespace mf::op {
namespace {

std::string Summary(const std::map<std::string, int>& traffic) {
  std::string out;
  for (const auto& [k, v] : traffic) out += (out.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return out;
}

std::string Fmt(double v, const char* format = "%.3g") {
  char buf[32];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::map<std::string, int> Split(const ModelDeploymentSpec& md, const std::string& stable, const std::string& canary,
                                 int percent) {
  std::map<std::string, int> w;
  for (const auto& v : md.versions) w[v.name] = 0;
  w[canary] = percent;
  w[stable] = 100 - percent;
  return w;
}

}  // namespace

RolloutState RolloutState::FromStatus(const Json& r) {
  RolloutState s;
  if (!r.is_object()) return s;
  auto str = [&](const char* k) { return r.contains(k) && r[k].is_string() ? r[k].get<std::string>() : ""; };
  auto num = [&](const char* k) { return r.contains(k) && r[k].is_number_integer() ? r[k].get<int64_t>() : 0; };
  s.canary = str("canary");
  s.canary_uri = str("canaryUri");
  s.stable = str("stable");
  s.step = r.contains("step") && r["step"].is_number_integer() ? r["step"].get<int>() : -1;
  s.phase = str("phase");
  s.message = str("message");
  s.step_started_s = num("stepStartedAt");
  s.analysis_passed_s = num("analysisPassedAt");
  s.spec_traffic = str("specTraffic");
  s.abort_reason = str("abortReason");
  return s;
}

Json RolloutState::ToStatus() const {
  Json r = {{"canary", canary},
            {"canaryUri", canary_uri},
            {"stable", stable},
            {"step", step},
            {"phase", phase},
            {"message", message},
            {"stepStartedAt", step_started_s},
            {"analysisPassedAt", analysis_passed_s},
            {"specTraffic", spec_traffic}};
  if (!abort_reason.empty()) r["abortReason"] = abort_reason;
  return r;
}

RolloutDecision StepRollout(const ModelDeploymentSpec& md, const RolloutState& previous, bool canary_ready,
                            const CanaryMetrics& m, int64_t now_s, const std::string& canary_problem) {
  const RolloutSpec& spec = *md.rollout;
  const AnalysisSpec& a = spec.analysis;
  const VersionSpec& canary = md.versions.back();
  const std::string stable = md.versions[md.versions.size() - 2].name;
  const bool mirroring = md.mirror_version == canary.name && a.max_disagreement.has_value();
  RolloutDecision d;
  RolloutState& s = d.state;
  s = previous;

  if (s.canary != canary.name || s.canary_uri != canary.storage_uri || s.stable != stable) {
    s = RolloutState{.canary = canary.name,
                     .canary_uri = canary.storage_uri,
                     .stable = stable,
                     .step = mirroring ? -1 : 0,
                     .phase = "Progressing",
                     .step_started_s = now_s,
                     .spec_traffic = Summary(md.traffic)};
    d.event_reason = "RolloutStarted";
    d.event_message = "canary " + canary.name + " against " + stable +
                      (mirroring ? ": comparing mirrored answers first"
                                 : ": step 1 at " + std::to_string(spec.steps[0].percent) + "%");
  }
  auto weights_now = [&] {
    if (s.phase == "Aborted" || s.step < 0) return Split(md, stable, canary.name, 0);
    if (s.phase == "Promoted") return Split(md, stable, canary.name, spec.steps.back().percent);
    return Split(md, stable, canary.name, spec.steps[s.step].percent);
  };

  if (s.phase == "Promoted" || s.phase == "Aborted") {
    d.weights = weights_now();
    return d;
  }
  if (s.phase == "Paused" || Summary(md.traffic) != s.spec_traffic) {
    s.phase = "Paused";
    s.message = "spec.traffic was edited by hand: the automatic steps are paused and the edited weights apply";
    if (previous.phase != "Paused") {
      d.event_reason = "RolloutPaused";
      d.event_message = s.message;
    }
    d.weights = md.traffic;
    return d;
  }
  auto abort = [&](const std::string& reason, const std::string& message) {
    s.phase = "Aborted";
    s.abort_reason = reason;
    s.message = message + "; traffic is back on " + stable;
    d.event_reason = "RolledBack";
    d.event_message = s.message;
    d.warning = true;
    d.weights = weights_now();
    return d;
  };

  if (!canary_problem.empty())
    return abort("CanaryFailed", "canary " + canary.name + " cannot serve: " + canary_problem);
  if (!canary_ready) {
    // Nothing to judge and the routers send it nothing yet: the step's clock starts once it serves.
    s.step_started_s = now_s;
    s.message = "waiting for canary " + canary.name + " to have a ready pod";
    d.weights = weights_now();
    return d;
  }

  const bool has_analysis = a.max_error_rate || a.max_latency_p99_ms || mirroring;
  bool judged = !has_analysis;
  if (has_analysis) {
    if (!m.known) {
      s.message = "inconclusive: no measurements from the routers yet";
    } else if (s.step < 0) {
      if (m.mirrored < a.min_requests) {
        s.message = "inconclusive: " + std::to_string(m.mirrored) + " mirrored answers of the " +
                    std::to_string(a.min_requests) + " needed to judge";
      } else {
        const double share = static_cast<double>(m.disagreements) / static_cast<double>(m.mirrored);
        if (share > *a.max_disagreement) {
          return abort("Disagreement", "canary " + canary.name + " disagreed with " + stable + " on " +
                                           Fmt(share * 100) + "% of " + std::to_string(m.mirrored) +
                                           " mirrored requests (max " + Fmt(*a.max_disagreement * 100) + "%)");
        }
        judged = true;
      }
    } else if (m.requests < a.min_requests) {
      s.message = "inconclusive: " + std::to_string(m.requests) + " requests to " + canary.name + " in the last " +
                  std::to_string(a.interval_seconds) + "s, " + std::to_string(a.min_requests) + " needed to judge";
    } else {
      const double error_rate = static_cast<double>(m.errors) / static_cast<double>(m.requests);
      if (a.max_error_rate && error_rate > *a.max_error_rate) {
        return abort("ErrorRate", "canary " + canary.name + " error rate " + Fmt(error_rate) + " over " +
                                      std::to_string(m.requests) + " requests exceeds maxErrorRate " +
                                      Fmt(*a.max_error_rate));
      }
      if (a.max_latency_p99_ms && m.p99_ms > *a.max_latency_p99_ms) {
        return abort("LatencyP99", "canary " + canary.name + " p99 latency " + Fmt(m.p99_ms) +
                                       " ms exceeds maxLatencyP99Ms " + Fmt(*a.max_latency_p99_ms));
      }
      judged = true;
    }
    if (judged) s.analysis_passed_s = now_s;
  }

  const int64_t pause = s.step < 0 ? 0 : spec.steps[s.step].pause_seconds;
  const bool pause_over = now_s - s.step_started_s >= pause;
  // Each step needs a passing analysis of its own before the next one.
  const bool step_judged = !has_analysis || (s.analysis_passed_s >= s.step_started_s && s.analysis_passed_s > 0);
  if (pause_over && step_judged) {
    ++s.step;
    s.step_started_s = now_s;
    s.analysis_passed_s = 0;
    if (s.step >= static_cast<int>(spec.steps.size())) {
      s.step = static_cast<int>(spec.steps.size()) - 1;
      s.phase = "Promoted";
      s.message = "canary " + canary.name + " promoted at " + std::to_string(spec.steps.back().percent) + "%";
      d.event_reason = "RolloutPromoted";
      d.event_message = s.message;
    } else {
      s.message = "step " + std::to_string(s.step + 1) + " of " + std::to_string(spec.steps.size()) + ": " +
                  canary.name + " at " + std::to_string(spec.steps[s.step].percent) + "%";
      d.event_reason = "RolloutStep";
      d.event_message = s.message;
    }
  } else if (!has_analysis || judged) {
    s.message = (s.step < 0 ? std::string("mirrored answers agree")
                            : "step " + std::to_string(s.step + 1) + " of " + std::to_string(spec.steps.size()) + ": " +
                                  canary.name + " at " + std::to_string(spec.steps[s.step].percent) + "%") +
                (pause_over ? "" : ", pausing " + std::to_string(pause - (now_s - s.step_started_s)) + "s more");
  }
  d.weights = weights_now();
  return d;
}

}  // namespace mf::op
