// The study's reconcile: the thin layer between PlanStudy() and the API server. It reads each
// trial's child from the controller's cache, the chief's log through the API server (pods/log)
// when a metric is due, and the chief's termination message (MODELFLEET_METRICS_FILE) from the
// cached pod; plans; and acts only on what the stored status already records: a child is created
// for a trial that an earlier reconcile wrote as Pending, and deleted for one it wrote as Stopped.
// New decisions go into the returned status first and are acted on at the next reconcile (asked
// for with a short requeue), so an operator that dies between the two repeats nothing and loses
// nothing.
#include "trainingjob/study/study_reconcile.h"

#include <map>
#include <set>

#include "k8s/resource.h"
#include "trainingjob/desired.h"
#include "trainingjob/status.h"
#include "trainingjob/study/suggest.h"
#include "trainingjob/study/trial_job.h"

namespace mf::op::study {
namespace {

// A running trial's log is read this often for the median stopping rule.
constexpr std::chrono::seconds kEarlyStoppingPoll{3};
// Decisions written to status are acted on this soon (the status update may enqueue nothing).
constexpr std::chrono::seconds kActSoon{1};
constexpr std::chrono::seconds kRetryLog{5};
// Enough of a chief's log for its metric lines; trainers that print more put metrics in the file.
constexpr int64_t kLogTailLines = 20000;

bool ControlledBy(const Json& object, const std::string& uid) {
  auto refs = k8s::MetadataOf(object).find("ownerReferences");
  if (refs == k8s::MetadataOf(object).end() || !refs->is_array()) return false;
  for (const auto& r : *refs) {
    if (k8s::StringAt(r, "uid") == uid && r.contains("controller") && r["controller"] == true) return true;
  }
  return false;
}

// The child's Succeeded or Failed condition that is True, as (state, reason, message).
void ChildState(const Json& child, TrialObservation* seen) {
  const Json status = child.contains("status") ? child["status"] : Json::object();
  for (const char* type : {"Failed", "Succeeded"}) {
    if (!training::IsConditionTrue(status, type)) continue;
    const Json c = training::FindCondition(status, type);
    seen->state = type;
    seen->reason = k8s::StringAt(c, "reason");
    seen->message = k8s::StringAt(c, "message");
    return;
  }
}

// The pod of the child's metric task (label job-role=master), or null.
k8s::ObjectPtr MetricPod(const StudyContext& ctx, const std::string& ns, const std::string& child) {
  for (const auto& pod : ctx.pods.ByIndex("namespace", ns)) {
    const Json& labels = k8s::MetadataOf(*pod).contains("labels") ? k8s::MetadataOf(*pod)["labels"] : Json::object();
    if (k8s::StringAt(labels, training::kJobNameLabel) == child &&
        k8s::StringAt(labels, training::kJobRoleLabel) == "master")
      return pod;
  }
  return nullptr;
}

std::string ParamSummary(const StudySpec& spec, const Trial& trial) {
  std::string out;
  for (const auto& a : TrialArgs(spec.params, trial.parameters)) out += (out.empty() ? "" : " ") + a;
  return out;
}

}  // namespace

StudyOutcome ReconcileStudy(const StudyContext& ctx, const nlohmann::json& job,
                            const training::TrainingJobSpec& job_spec) {
  StudyOutcome out;
  const std::string now = training::FormatTime(ctx.now);
  Json status = job.contains("status") && job["status"].is_object() ? job["status"] : Json::object();
  if (!status.contains("startTime")) status["startTime"] = now;

  std::vector<Trial> recorded;
  if (auto it = status.find("trials"); it != status.end() && it->is_array()) {
    for (const auto& t : *it) recorded.push_back(Trial::FromStatus(t));
  }

  auto parsed = ParseStudySpec(job_spec.hyperparameters);
  if (parsed.ok()) {
    // The last trial's job must be valid too (its pods' names are the longest): refuse the study
    // now rather than fail every trial later.
    Trial last;
    last.name = job_spec.name + "-trial-" + std::to_string(parsed->max_trials);
    last.parameters = ParamSpace(parsed->params).GridPoint(0);
    if (auto child = training::ParseTrainingJob(BuildTrialJob(job, *parsed, last)); !child.ok()) {
      parsed = InvalidArgument("its trials' TrainingJobs would be refused: " + child.status().message());
    }
  }
  if (!parsed.ok()) {
    // Nothing is touched: trials, children and their pods stay as they are until the spec is fixed.
    training::SetCondition(&status, "Failed", true, "InvalidSpec", parsed.status().message(), now);
    status["state"] = training::StateOf(status);
    out.status = std::move(status);
    return out;
  }
  const StudySpec& spec = *parsed;
  const std::string& ns = job_spec.ns;
  const Json involved = {{"apiVersion", "modelfleet.io/v1alpha1"},
                         {"kind", "TrainingJob"},
                         {"metadata", {{"name", job_spec.name}, {"namespace", ns}, {"uid", job_spec.uid}}}};

  // Act on what the stored status records, then observe.
  std::vector<Trial> observed;
  for (Trial trial : recorded) {
    const k8s::ObjectPtr child = ctx.training_jobs.Get(ns + "/" + trial.name);
    const bool ours = child && ControlledBy(*child, job_spec.uid);
    if (trial.phase == TrialPhase::kPending && !child) {
      auto created = ctx.client.Create({k8s::resources::TrainingJobs(), ns, ""}, BuildTrialJob(job, spec, trial));
      if (!created.ok() && created.status().code() == StatusCode::kInvalidArgument) {
        // The API server refused the child (e.g. a name too long for its pods): retrying cannot
        // help, so the trial fails with the server's words and the study moves on.
        trial.phase = TrialPhase::kFailed;
        trial.reason = "TrialRejected";
        trial.message = "the API server refused TrainingJob " + trial.name + ": " + created.status().message();
        trial.completion_time = now;
        (void)ctx.events.Record(involved, k8s::EventType::kWarning, trial.reason, trial.message);
      } else if (!created.ok() && created.status().code() != StatusCode::kAlreadyExists) {
        out.error = created.status().WithContext("creating trial " + trial.name);
      } else if (created.ok()) {
        (void)ctx.events.Record(involved, k8s::EventType::kNormal, "TrialCreated",
                                "TrainingJob " + trial.name + " with " + ParamSummary(spec, trial));
      }
      observed.push_back(std::move(trial));
      continue;
    }
    if (trial.phase == TrialPhase::kStopped && ours) {
      TrialObservation seen;
      ChildState(*child, &seen);
      if (seen.state.empty() && !k8s::MetadataOf(*child).contains("deletionTimestamp")) {
        Status deleted = ctx.client.Delete({k8s::resources::TrainingJobs(), ns, trial.name},
                                           k8s::StringAt(k8s::MetadataOf(*child), "uid"));
        if (!deleted.ok() && deleted.code() != StatusCode::kNotFound)
          out.error = deleted.WithContext("stopping trial " + trial.name);
      }
    }
    if (!trial.Active()) {
      observed.push_back(std::move(trial));
      continue;
    }

    TrialObservation seen;
    seen.exists = child != nullptr;
    if (child && !ours) {
      seen.state = "Failed";
      seen.reason = "NameTaken";
      seen.message = "a TrainingJob of that name exists and is not this study's; delete it or rename the study";
    } else if (child) {
      ChildState(*child, &seen);
      const bool want_log = seen.state == "Succeeded" || (spec.early_stopping && seen.state.empty());
      if (const k8s::ObjectPtr pod = MetricPod(ctx, ns, trial.name)) {
        seen.chief_pod = k8s::StringAt(k8s::MetadataOf(*pod), "name");
        const std::string container = child->contains("spec") ? MetricContainerName((*child)["spec"]) : std::string();
        if (seen.state == "Succeeded") seen.metrics_file = TerminationMessage(*pod, container);
        if (want_log) {
          auto log = ctx.client.Logs(ns, seen.chief_pod, {.container = container, .tail_lines = kLogTailLines});
          if (log.ok()) {
            seen.log = std::move(*log);
          } else if (log.status().code() == StatusCode::kNotFound) {
            seen.log_error = log.status().message();
          } else {
            // The API server or the node may be briefly away: decide nothing on this trial yet.
            out.requeue_after = kRetryLog;
            observed.push_back(std::move(trial));
            continue;
          }
        }
      } else if (seen.state == "Succeeded") {
        seen.log_error = "TrainingJob " + trial.name + " has no pod labelled " + training::kJobRoleLabel +
                         "=master (its chief, master or worker 0) any more";
      }
    }
    Trial after = ObserveTrial(spec, trial, seen, now);
    if (after.phase == TrialPhase::kFailed) {
      (void)ctx.events.Record(involved, k8s::EventType::kWarning, after.reason, after.name + ": " + after.message);
    } else if (after.phase == TrialPhase::kSucceeded) {
      (void)ctx.events.Record(involved, k8s::EventType::kNormal, "TrialSucceeded",
                              after.name + ": " + spec.metric_tag + "=" + FormatValue(Json(*after.metric)));
    }
    observed.push_back(std::move(after));
  }

  const size_t before = observed.size();
  // Seeded by the study's uid: a re-plan after a lost status write proposes the same trials.
  StudyPlan plan = PlanStudy(spec, std::move(observed), Rng::Hash(job_spec.uid), job_spec.name, now);
  for (const auto& name : plan.stopped) {
    (void)ctx.events.Record(involved, k8s::EventType::kNormal, "TrialStopped",
                            name + " stopped early by the median rule");
  }
  if (plan.trials.size() > before || !plan.stopped.empty()) out.requeue_after = kActSoon;
  bool running = false;
  for (const auto& t : plan.trials) running |= t.phase == TrialPhase::kRunning;
  if (spec.early_stopping && running && (out.requeue_after.count() == 0 || out.requeue_after > kEarlyStoppingPoll))
    out.requeue_after = kEarlyStoppingPoll;

  Json trials = Json::array();
  for (const auto& t : plan.trials) trials.push_back(t.ToStatus());
  status["trials"] = std::move(trials);
  status["trialSummary"] = plan.summary;
  if (Json best = BestTrialStatus(plan); !best.is_null()) {
    status["bestTrial"] = std::move(best);
  } else {
    status.erase("bestTrial");
  }

  const bool was_finished = training::IsFinished(status);
  training::SetCondition(&status, "Created", true, "StudyCreated",
                         "up to " + std::to_string(spec.max_trials) + " trials, " +
                             std::to_string(spec.max_parallel_trials) + " at a time",
                         now);
  training::SetCondition(&status, "Running", !plan.finished, plan.finished ? plan.finish_reason : "TrialsRunning",
                         plan.finished ? plan.finish_message : plan.summary, now);
  auto set_if_present_or = [&](const char* type, bool value, const std::string& reason, const std::string& message) {
    if (value || !training::FindCondition(status, type).is_null())
      training::SetCondition(&status, type, value, reason, message, now);
  };
  set_if_present_or("Succeeded", plan.finished && !plan.failed, plan.finished ? plan.finish_reason : "StudyExtended",
                    plan.finished ? plan.finish_message : "maxTrials was raised; more trials run");
  set_if_present_or("Failed", plan.finished && plan.failed, plan.finished ? plan.finish_reason : "TrialsRunning",
                    plan.finished ? plan.finish_message : plan.summary);
  if (plan.finished) {
    if (!status.contains("completionTime")) status["completionTime"] = now;
    if (!was_finished) {
      (void)ctx.events.Record(involved, plan.failed ? k8s::EventType::kWarning : k8s::EventType::kNormal,
                              plan.failed ? "StudyFailed" : "StudySucceeded", plan.finish_message);
    }
  } else {
    status.erase("completionTime");
  }
  status["state"] = training::StateOf(status);
  out.status = std::move(status);
  return out;
}

}  // namespace mf::op::study
