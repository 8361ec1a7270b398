// A hyperparameter study as a pure function of its spec and its trials. The trials live in the
// TrainingJob's status.trials, each recorded (name and parameters, phase Pending) before its child
// TrainingJob is created, so an operator that restarts between the two creates the same child and
// nothing else: the study resumes from status alone, with no database and no sidecar.
//
// Each reconcile: ObserveTrial() folds what the cluster shows about a trial (its child job's state,
// the metrics in the chief's log or termination message) into its record; PlanStudy() then applies
// the median stopping rule to running trials, proposes new trials up to maxParallelTrials and
// maxTrials (grid order, uniformly random, or Gaussian-process expected improvement), picks the best,
// and says whether the study is finished. Raising maxTrials of a finished study makes it unfinished.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "trainingjob/study/param_space.h"

namespace mf::op::study {

enum class TrialPhase { kPending, kRunning, kSucceeded, kFailed, kStopped };

std::string_view TrialPhaseName(TrialPhase phase);

// The intermediate metrics kept per trial in status (the first ones reported): enough for the
// median rule over typical epoch counts while status stays far below etcd's object size limit.
inline constexpr size_t kMaxIntermediateMetrics = 50;
// The median stopping rule judges a trial only against this many finished trials or more.
inline constexpr size_t kMinTrialsForEarlyStopping = 3;

struct Trial {
  std::string name;  // the child TrainingJob
  Json parameters = Json::object();
  TrialPhase phase = TrialPhase::kPending;
  std::optional<double> metric;      // the last value reported (final for Succeeded and Stopped)
  std::vector<double> intermediate;  // every value reported so far, in order (only with early stopping)
  // Failed: MetricNotReported | MetricUnreadable | TrialFailed | TrialDeleted | TrialRejected;
  // Stopped: EarlyStopped.
  std::string reason;
  std::string message;
  std::string start_time;  // RFC 3339
  std::string completion_time;

  bool Active() const { return phase == TrialPhase::kPending || phase == TrialPhase::kRunning; }
  // Tolerant of what a hand edit may have left: unknown phases read as Failed.
  static Trial FromStatus(const Json& trial);
  Json ToStatus() const;
};

// The values reported for `tag`, in order, from text holding lines such as
// "modelfleet-metric accuracy=0.97" (other text around them is ignored; several tag=value pairs
// may follow the marker). With `bare_lines`, lines "accuracy=0.97" count too (a metrics file).
std::vector<double> ParseMetrics(std::string_view text, const std::string& tag, bool bare_lines = false);

// What the cluster shows about one trial's child TrainingJob.
struct TrialObservation {
  bool exists = false;
  // The child's state: "Succeeded", "Failed", or anything else for still going.
  std::string state;
  std::string reason;  // of a Failed child
  std::string message;
  // The chief's pod name, for messages ("" when it has none yet).
  std::string chief_pod;
  // The chief's log, when it could be read; else why not.
  std::optional<std::string> log;
  std::string log_error;
  // The chief container's termination message, where MODELFLEET_METRICS_FILE's content lands.
  std::optional<std::string> metrics_file;
};

// The trial's record after this observation. Terminal records (Succeeded, Failed, Stopped) never
// change. A finished child's metric comes from the metrics file if it names the tag, else from the
// log's last line for it; with neither the trial fails, saying what was missing.
Trial ObserveTrial(const StudySpec& spec, Trial trial, const TrialObservation& observed, const std::string& now);

// True when the median stopping rule stops `trial`: its best intermediate value is worse than the
// median of the finished trials' running averages at the same step (Vizier / AI Platform).
bool ShouldStopEarly(const StudySpec& spec, const Trial& trial, const std::vector<Trial>& trials);

struct StudyPlan {
  std::vector<Trial> trials;         // the new status.trials: the old ones updated, then the new ones
  std::vector<std::string> stopped;  // trials stopped early by this plan
  std::optional<size_t> best;        // index into trials
  bool finished = false;
  bool failed = false;        // finished without any trial reporting a metric
  std::string finish_reason;  // MaxTrialsReached | GridExhausted | TooManyFailedTrials
  std::string finish_message;
  std::string summary;  // for the printer column: "4/6 done, 2 running, best trial-3"
};

// `seed` makes random and Bayesian choices repeatable (the glue passes a hash of the study's uid);
// `name_prefix` + "-trial-<n>" names new trials; `now` stamps them.
StudyPlan PlanStudy(const StudySpec& spec, std::vector<Trial> trials, uint64_t seed, const std::string& name_prefix,
                    const std::string& now);

// The best trial's {name, parameters, metric} for status.bestTrial, or null.
Json BestTrialStatus(const StudyPlan& plan);

}  // namespace mf::op::study
