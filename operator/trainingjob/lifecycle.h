// What a TrainingJob's controller does next, as a pure function of the spec, the status it wrote
// last time and the job's pods: which pods to create or delete, whether the job is done, and the
// new status. The rules are Kubeflow v1's (../shared/design/COMPAT.md, "Restart, success,
// cleanup"), with these choices of ours:
//   - Gang start: a job with no pod starts only when all its pods fit (the caller checks the
//     nodes, see gang.h); then all its pods are created at once.
//   - Restarts: OnFailure/Always pods are restarted in place by the kubelet; a Failed pod is
//     deleted and created again when its policy allows (ExitCode: only on exit codes 128-255).
//     Every restart counts against runPolicy.backoffLimit: the job fails at the first failure
//     after backoffLimit restarts. status.restarts is the count (pods deleted by the operator
//     are remembered in status.pastRestarts).
//   - restartScope Job: one failure or restart deletes every pod; they are created again together.
//   - Success: the Chief's (or Master's) pod succeeds; without one, worker 0's (Default) or every
//     worker's (AllWorkers). A permanent failure of any pod fails the job, a Chief's or PS's too.
//   - Finished: cleanPodPolicy deletes pods (All: all; Running: those still Pending or Running,
//     e.g. parameter servers; None: none), ttlSecondsAfterFinished deletes the job.
#pragma once

#include <string>
#include <vector>

#include "trainingjob/cluster_env.h"

namespace mf::op::training {

struct LifecycleInput {
  const TrainingJobSpec* spec = nullptr;
  Json old_status = Json::object();
  std::vector<Json> pods;  // the job's pods, as cached
  int64_t now = 0;         // seconds since the epoch
  // Asked only when WantsGangStart(): why the job's pods cannot all be placed now ("" = they fit).
  std::string gang_problem;
};

struct JobEvent {
  bool warning = false;
  std::string reason;
  std::string message;
};

struct PodToDelete {
  std::string name;
  std::string uid;
};

struct LifecycleDecision {
  std::vector<Task> create;         // pods (with their Services) to create
  std::vector<PodToDelete> remove;  // pods to delete
  bool remove_services = false;     // the job is finished with cleanPodPolicy All: its Services go too
  bool delete_job = false;          // ttlSecondsAfterFinished has passed
  Json status = Json::object();     // the new status
  std::vector<JobEvent> events;
  int64_t requeue_after = 0;  // seconds; 0 = only when something changes
};

// True when the job has no pod (none being deleted either) and should have some: the caller
// then checks whether they all fit before Decide() creates them.
bool WantsGangStart(const TrainingJobSpec& spec, const Json& old_status, const std::vector<Json>& pods);

LifecycleDecision Decide(const LifecycleInput& in);

// The status of a job whose spec is invalid: Failed with reason FailedValidation (as Kubeflow).
Json InvalidSpecStatus(const Json& old_status, const std::string& name, const std::string& error, int64_t now);

// How long (seconds) a pod may stay Pending before the job reports it as stuck.
inline constexpr int64_t kStuckPendingSeconds = 60;

}  // namespace mf::op::training
