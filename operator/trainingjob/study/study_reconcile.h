// The hook between the TrainingJob controller and hyperparameter studies. When a TrainingJob has
// spec.hyperparameters, the controller creates no pods for it: it calls ReconcileStudy() and
// writes back the status it returns. Trials are child TrainingJobs that the study creates (an
// ownerReference with controller: true to the study's job, so deleting the study deletes them);
// the controller runs them like any other job, and a change to a child enqueues its parent, so
// the study is reconciled whenever one of its trials moves.
//
// The controller owns this signature; the study's code (this folder) owns its implementation.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>

#include "common/status.h"
#include "k8s/client.h"
#include "k8s/event_recorder.h"
#include "k8s/store.h"
#include "trainingjob/spec.h"

namespace mf::op::study {

struct StudyContext {
  k8s::Client& client;
  k8s::EventRecorder& events;
  // The controller's caches: every TrainingJob it watches (trials included), and the training
  // pods (labels in trainingjob/desired.h: modelfleet.io/job-name, replica-type, replica-index,
  // job-role=master on the pod whose log holds the metric).
  const k8s::Store& training_jobs;
  const k8s::Store& pods;
  int64_t now = 0;  // seconds since the epoch
};

struct StudyOutcome {
  nlohmann::json status = nlohmann::json::object();  // the job's whole new status
  Status error;                                      // an API call failed: retried with back-off
  std::chrono::seconds requeue_after{0};             // 0: only when something changes
};

// `job` is the TrainingJob as cached (its previous status included); `spec` its parsed spec, with
// spec.IsStudy() true.
StudyOutcome ReconcileStudy(const StudyContext& context, const nlohmann::json& job,
                            const training::TrainingJobSpec& spec);

}  // namespace mf::op::study
