#include "trainingjob/study/planner.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "trainingjob/study/suggest.h"

namespace mf::op::study {
namespace {

constexpr std::string_view kMarker = "modelfleet-metric";

std::optional<double> ParseFinite(std::string_view s) {
  if (s.empty()) return std::nullopt;
  const std::string copy(s);
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// Appends the value of `tag` among the whitespace-separated "tag=value" tokens of `rest`.
void TakeTokens(std::string_view rest, const std::string& tag, std::vector<double>* out) {
  size_t i = 0;
  while (i < rest.size()) {
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\t')) ++i;
    size_t j = i;
    while (j < rest.size() && rest[j] != ' ' && rest[j] != '\t') ++j;
    const std::string_view token = rest.substr(i, j - i);
    const size_t eq = token.find('=');
    if (eq != std::string_view::npos && token.substr(0, eq) == tag) {
      if (auto v = ParseFinite(token.substr(eq + 1))) out->push_back(*v);
    }
    i = j;
  }
}

// The sign that makes larger better.
double Oriented(const StudySpec& spec, double v) { return spec.maximize ? v : -v; }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::string_view TrialPhaseName(TrialPhase phase) {
  switch (phase) {
    case TrialPhase::kPending:
      return "Pending";
    case TrialPhase::kRunning:
      return "Running";
    case TrialPhase::kSucceeded:
      return "Succeeded";
    case TrialPhase::kFailed:
      return "Failed";
    case TrialPhase::kStopped:
      return "Stopped";
  }
  return "Failed";
}

Trial Trial::FromStatus(const Json& t) {
  Trial trial;
  if (!t.is_object()) {
    trial.phase = TrialPhase::kFailed;
    return trial;
  }
  auto str = [&](const char* key) {
    auto it = t.find(key);
    return it != t.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  trial.name = str("name");
  if (auto it = t.find("parameters"); it != t.end() && it->is_object()) trial.parameters = *it;
  const std::string phase = str("phase");
  trial.phase = phase == "Pending"     ? TrialPhase::kPending
                : phase == "Running"   ? TrialPhase::kRunning
                : phase == "Succeeded" ? TrialPhase::kSucceeded
                : phase == "Stopped"   ? TrialPhase::kStopped
                                       : TrialPhase::kFailed;
  if (auto it = t.find("metric"); it != t.end() && it->is_number()) trial.metric = it->get<double>();
  if (auto it = t.find("intermediateMetrics"); it != t.end() && it->is_array()) {
    for (const auto& v : *it) {
      if (v.is_number()) trial.intermediate.push_back(v.get<double>());
    }
  }
  trial.reason = str("reason");
  trial.message = str("message");
  trial.start_time = str("startTime");
  trial.completion_time = str("completionTime");
  return trial;
}

Json Trial::ToStatus() const {
  Json t = {{"name", name}, {"parameters", parameters}, {"phase", std::string(TrialPhaseName(phase))}};
  if (metric) t["metric"] = *metric;
  if (!intermediate.empty()) t["intermediateMetrics"] = intermediate;
  if (!reason.empty()) t["reason"] = reason;
  if (!message.empty()) t["message"] = message;
  if (!start_time.empty()) t["startTime"] = start_time;
  if (!completion_time.empty()) t["completionTime"] = completion_time;
  return t;
}

std::vector<double> ParseMetrics(std::string_view text, const std::string& tag, bool bare_lines) {
  std::vector<double> values;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = end + 1;
    const size_t at = line.find(kMarker);
    const bool marked =
        at != std::string_view::npos &&
        (at + kMarker.size() == line.size() || line[at + kMarker.size()] == ' ' || line[at + kMarker.size()] == '\t');
    if (marked) {
      TakeTokens(line.substr(at + kMarker.size()), tag, &values);
    } else if (bare_lines) {
      TakeTokens(line, tag, &values);
    }
  }
  return values;
}

Trial ObserveTrial(const StudySpec& spec, Trial trial, const TrialObservation& observed, const std::string& now) {
  if (!trial.Active()) return trial;
  if (!observed.exists) {
    if (trial.phase == TrialPhase::kRunning) {
      trial.phase = TrialPhase::kFailed;
      trial.reason = "TrialDeleted";
      trial.message = "TrainingJob " + trial.name + " was deleted before it finished";
      trial.completion_time = now;
    }
    return trial;  // Pending: the planner's child is about to be created
  }
  trial.phase = TrialPhase::kRunning;
  if (trial.start_time.empty()) trial.start_time = now;

  std::vector<double> from_log;
  if (observed.log) from_log = ParseMetrics(*observed.log, spec.metric_tag);
  if (spec.early_stopping && !from_log.empty()) {
    trial.intermediate.assign(from_log.begin(), from_log.begin() + static_cast<std::ptrdiff_t>(std::min(
                                                                       from_log.size(), kMaxIntermediateMetrics)));
  }
  if (!from_log.empty()) trial.metric = from_log.back();

  if (observed.state == "Failed") {
    trial.phase = TrialPhase::kFailed;
    trial.reason = "TrialFailed";
    trial.message = "TrainingJob " + trial.name + " failed" +
                    (observed.reason.empty() ? std::string() : " (" + observed.reason + ")") +
                    (observed.message.empty() ? std::string() : ": " + observed.message);
    trial.completion_time = now;
    return trial;
  }
  if (observed.state != "Succeeded") return trial;

  trial.completion_time = now;
  const std::string pod = observed.chief_pod.empty() ? "the chief" : "pod " + observed.chief_pod;
  if (observed.metrics_file) {
    auto from_file = ParseMetrics(*observed.metrics_file, spec.metric_tag, /*bare_lines=*/true);
    if (!from_file.empty()) {
      trial.phase = TrialPhase::kSucceeded;
      trial.metric = from_file.back();
      return trial;
    }
  }
  if (!from_log.empty()) {
    trial.phase = TrialPhase::kSucceeded;
    return trial;
  }
  trial.phase = TrialPhase::kFailed;
  trial.metric.reset();
  const std::string wanted = "'modelfleet-metric " + spec.metric_tag + "=<number>'";
  const std::string file_part = observed.metrics_file ? "; its MODELFLEET_METRICS_FILE (termination message) has no " +
                                                            spec.metric_tag + "=<number> line"
                                                      : "";
  if (!observed.log) {
    trial.reason = "MetricUnreadable";
    trial.message = "succeeded, but the log of " + pod + " could not be read (" + observed.log_error +
                    ") to find a line " + wanted + file_part;
  } else {
    trial.reason = "MetricNotReported";
    trial.message = "succeeded, but the log of " + pod + " has no line " + wanted + file_part;
  }
  return trial;
}

bool ShouldStopEarly(const StudySpec& spec, const Trial& trial, const std::vector<Trial>& trials) {
  if (!spec.early_stopping || trial.phase != TrialPhase::kRunning || trial.intermediate.empty()) return false;
  const size_t step = trial.intermediate.size();
  std::vector<double> averages;
  for (const auto& other : trials) {
    if (other.phase != TrialPhase::kSucceeded || other.intermediate.empty()) continue;
    const size_t n = std::min(step, other.intermediate.size());
    double sum = 0;
    for (size_t i = 0; i < n; ++i) sum += Oriented(spec, other.intermediate[i]);
    averages.push_back(sum / static_cast<double>(n));
  }
  if (averages.size() < kMinTrialsForEarlyStopping) return false;
  double best = Oriented(spec, trial.intermediate.front());
  for (double v : trial.intermediate) best = std::max(best, Oriented(spec, v));
  return best < Median(averages);
}

StudyPlan PlanStudy(const StudySpec& spec, std::vector<Trial> trials, uint64_t seed, const std::string& name_prefix,
                    const std::string& now) {
  StudyPlan plan;
  const ParamSpace space(spec.params);

  for (auto& trial : trials) {
    if (!ShouldStopEarly(spec, trial, trials)) continue;
    const size_t step = trial.intermediate.size();
    trial.phase = TrialPhase::kStopped;
    trial.reason = "EarlyStopped";
    trial.message = "its best " + spec.metric_tag + " after " + std::to_string(step) +
                    " reports is worse than the median of the finished trials' running averages at that step";
    trial.completion_time = now;
    plan.stopped.push_back(trial.name);
  }

  int64_t active = 0, failed = 0, measured = 0;
  std::vector<Observation> done;
  std::vector<std::vector<double>> pending;
  for (const auto& trial : trials) {
    if (trial.Active()) ++active;
    if (trial.phase == TrialPhase::kFailed) ++failed;
    auto unit = space.ToUnit(trial.parameters);  // fails for trials of an earlier, different space
    if (trial.Active() && unit.ok()) pending.push_back(*unit);
    if ((trial.phase == TrialPhase::kSucceeded || trial.phase == TrialPhase::kStopped) && trial.metric) {
      ++measured;
      if (unit.ok()) done.push_back({*unit, Oriented(spec, *trial.metric)});
    }
  }

  const int64_t grid_size = spec.algorithm == Algorithm::kGrid ? space.GridSize() : INT64_MAX;
  const int64_t budget = std::min(spec.max_trials, grid_size);
  const bool too_many_failures = spec.max_failed_trials > 0
                                     ? failed >= spec.max_failed_trials
                                     : measured == 0 && failed >= std::min<int64_t>(3, spec.max_trials);
  // Random points first, so the Gaussian process has something to fit.
  const int64_t initial_random = std::clamp<int64_t>(static_cast<int64_t>(spec.params.size()) + 1, 3, 10);

  while (!too_many_failures && static_cast<int64_t>(trials.size()) < budget && active < spec.max_parallel_trials) {
    const int64_t index = static_cast<int64_t>(trials.size());
    Rng rng(seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(index + 1)));
    Trial trial;
    trial.name = name_prefix + "-trial-" + std::to_string(index + 1);
    switch (spec.algorithm) {
      case Algorithm::kGrid:
        trial.parameters = space.GridPoint(index);
        break;
      case Algorithm::kRandom:
        trial.parameters = space.FromUnit(SampleRandom(space, rng));
        break;
      case Algorithm::kBayesian: {
        const auto unit =
            index < initial_random ? SampleRandom(space, rng) : SuggestBayesian(space, done, pending, rng);
        trial.parameters = space.FromUnit(unit);
        pending.push_back(unit);
        break;
      }
    }
    trials.push_back(std::move(trial));
    ++active;
  }

  for (size_t i = 0; i < trials.size(); ++i) {
    const auto& t = trials[i];
    if ((t.phase != TrialPhase::kSucceeded && t.phase != TrialPhase::kStopped) || !t.metric) continue;
    if (!plan.best || Oriented(spec, *t.metric) > Oriented(spec, *trials[*plan.best].metric)) plan.best = i;
  }

  const int64_t created = static_cast<int64_t>(trials.size());
  if (active == 0 && (too_many_failures || created >= budget)) {
    plan.finished = true;
    if (too_many_failures) {
      plan.finish_reason = "TooManyFailedTrials";
      plan.finish_message =
          std::to_string(failed) + " trials failed" +
          (spec.max_failed_trials > 0 ? " (maxFailedTrials " + std::to_string(spec.max_failed_trials) + ")"
                                      : " and none reported " + spec.metric_tag);
    } else if (created >= grid_size && grid_size < spec.max_trials) {
      plan.finish_reason = "GridExhausted";
      plan.finish_message = "all " + std::to_string(grid_size) + " points of the grid were tried";
    } else {
      plan.finish_reason = "MaxTrialsReached";
      plan.finish_message = std::to_string(created) + " of maxTrials " + std::to_string(spec.max_trials) + " ran";
    }
    plan.failed = !plan.best.has_value();
    if (plan.best) {
      plan.finish_message += "; best: " + trials[*plan.best].name + " with " + spec.metric_tag + "=" +
                             FormatValue(Json(*trials[*plan.best].metric));
    } else if (!too_many_failures) {
      plan.finish_message += "; no trial reported " + spec.metric_tag;
    }
  }

  const int64_t finished_trials = created - active;
  plan.summary = std::to_string(finished_trials) + "/" + std::to_string(budget) + " done";
  if (active > 0) plan.summary += ", " + std::to_string(active) + " running";
  if (plan.best) plan.summary += ", best " + spec.metric_tag + "=" + FormatValue(Json(*trials[*plan.best].metric));
  plan.trials = std::move(trials);
  return plan;
}

Json BestTrialStatus(const StudyPlan& plan) {
  if (!plan.best) return nullptr;
  const Trial& t = plan.trials[*plan.best];
  return {{"name", t.name}, {"parameters", t.parameters}, {"metric", *t.metric}};
}

}  // namespace mf::op::study
