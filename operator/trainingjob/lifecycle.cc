#include "trainingjob/lifecycle.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "trainingjob/desired.h"
#include "trainingjob/status.h"

namespace mf::op::training {
namespace {

// Kubeflow's code for "the default container has not terminated": retryable.
constexpr int kNotTerminated = 0xbeef;

std::string Str(const Json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

int64_t Int(const Json& object, const char* key) {
  if (!object.is_object()) return 0;
  auto it = object.find(key);
  // Counts and times: anything beyond a trillion is nonsense someone wrote, and must not overflow sums.
  constexpr int64_t kLimit = 1'000'000'000'000;
  return it != object.end() && it->is_number_integer() ? std::clamp<int64_t>(it->get<int64_t>(), -kLimit, kLimit) : 0;
}

const Json& Field(const Json& object, const char* key) {
  static const Json null;
  if (!object.is_object()) return null;
  auto it = object.find(key);
  return it == object.end() ? null : *it;
}

// What the lifecycle reads of one pod.
struct PodView {
  std::string name;
  std::string uid;
  Task task;
  std::string phase;
  bool deleting = false;
  int64_t restarts = 0;  // every container's restartCount
  int exit_code = kNotTerminated;
  bool crashed = false;          // not Failed, but its container exited non-zero and waits for the kubelet's restart
  std::string termination;       // the default container's reason and message, if it terminated
  std::string last_termination;  // of its previous instance (an in-place restart)
  std::string pending_reason;    // why it is not scheduled or not started, if Pending
  int64_t created = 0;
};

std::string Describe(const Json& terminated) {
  std::string out = "exit code " + std::to_string(Int(terminated, "exitCode"));
  if (std::string reason = Str(terminated, "reason"); !reason.empty()) out += " (" + reason + ")";
  std::string message = Str(terminated, "message");
  if (message.size() > 300) message = "..." + message.substr(message.size() - 300);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  if (!message.empty()) out += ": " + message;
  return out;
}

PodView View(const TrainingJobSpec& spec, const Json& pod, Task task) {
  PodView v;
  v.task = task;
  const Json& meta = Field(pod, "metadata");
  v.name = Str(meta, "name");
  v.uid = Str(meta, "uid");
  v.deleting = meta.is_object() && meta.contains("deletionTimestamp") && !meta["deletionTimestamp"].is_null();
  v.created = ParseTime(Str(meta, "creationTimestamp"));
  const Json& st = Field(pod, "status");
  v.phase = Str(st, "phase");
  if (v.phase.empty()) v.phase = "Pending";
  const std::string wanted = spec.framework == Framework::kPyTorch ? "pytorch" : "tensorflow";
  const Json& statuses = Field(st, "containerStatuses");
  const Json* main = nullptr;
  if (statuses.is_array()) {
    for (const auto& cs : statuses) {
      v.restarts += Int(cs, "restartCount");
      if (!main || Str(cs, "name") == wanted) main = &cs;
    }
    // Kubeflow reads the container named tensorflow/pytorch, else the pod's first; statuses come
    // sorted by name, so find the template's first container by name.
    const ReplicaSpec* r = spec.Find(task.type);
    const Json& containers = r ? At(At(r->template_, "spec"), "containers") : Json::array();
    bool named = false;
    for (const auto& cs : statuses) named = named || Str(cs, "name") == wanted;
    if (!named && containers.is_array() && !containers.empty()) {
      const std::string first = Str(containers[0], "name");
      for (const auto& cs : statuses) {
        if (Str(cs, "name") == first) main = &cs;
      }
    }
  }
  if (main) {
    const Json& terminated = Field(Field(*main, "state"), "terminated");
    if (terminated.is_object()) {
      v.exit_code = static_cast<int>(Int(terminated, "exitCode"));
      v.termination = Describe(terminated);
      v.crashed = v.phase != "Failed" && v.phase != "Succeeded" && v.exit_code != 0;
    }
    const Json& last = Field(Field(*main, "lastState"), "terminated");
    if (last.is_object()) v.last_termination = Describe(last);
    const Json& waiting = Field(Field(*main, "state"), "waiting");
    if (v.phase == "Pending" && waiting.is_object()) {
      v.pending_reason = Str(waiting, "reason");
      if (std::string m = Str(waiting, "message"); !m.empty()) v.pending_reason += ": " + m;
    }
  }
  if (v.phase == "Pending" && v.pending_reason.empty()) {
    const Json& conditions = Field(st, "conditions");
    if (conditions.is_array()) {
      for (const auto& c : conditions) {
        if (Str(c, "type") == "PodScheduled" && Str(c, "status") == "False") {
          v.pending_reason = Str(c, "reason") + ": " + Str(c, "message");
        }
      }
    }
  }
  return v;
}

std::string Who(const PodView& p) {
  return std::string(ReplicaTypeName(p.task.type)) + " " + std::to_string(p.task.index) + " (pod " + p.name + ")";
}

bool Retryable(RestartPolicy policy, int exit_code) {
  switch (policy) {
    case RestartPolicy::kAlways:
    case RestartPolicy::kOnFailure:
      return true;
    case RestartPolicy::kExitCode:
      return IsRetryableExitCode(exit_code);
    case RestartPolicy::kNever:
      return false;
  }
  return false;
}

class Decider {
 public:
  explicit Decider(const LifecycleInput& in) : in_(in), spec_(*in.spec), now_(FormatTime(in.now)) {
    out_.status = in.old_status.is_object() ? in.old_status : Json::object();
    for (const Json& pod : in.pods) {
      const auto task = TaskOf(pod);
      const ReplicaSpec* r = task ? spec_.Find(task->type) : nullptr;
      if (!r || task->index >= r->replicas) {
        // A pod of a replica the spec no longer has (an edited spec): not the job's any more.
        PodView v = View(spec_, pod, task.value_or(Task{}));
        if (!v.deleting) out_.remove.push_back({v.name, v.uid});
        continue;
      }
      pods_.push_back(View(spec_, pod, *task));
    }
    past_restarts_ = Int(out_.status, "pastRestarts");
  }

  LifecycleDecision Run() {
    if (IsFinished(out_.status)) return Finish();
    Condition("Created", true, "TrainingJobCreated", "TrainingJob " + spec_.name + " is created.");
    if (spec_.run_policy.suspend) return Suspend();
    if (IsConditionTrue(out_.status, "Suspended")) {
      Condition("Suspended", false, "TrainingJobResumed", "TrainingJob " + spec_.name + " is resumed.");
      Event(false, "Resumed", "TrainingJob " + spec_.name + " is resumed");
    }
    if (const auto deadline = spec_.run_policy.active_deadline_seconds) {
      const int64_t started = ParseTime(Str(out_.status, "startTime"));
      if (started >= 0) {
        if (in_.now - started >= *deadline) {
          return Fail("DeadlineExceeded", "TrainingJob " + spec_.name +
                                              " has been active longer than specified "
                                              "deadline (activeDeadlineSeconds " +
                                              std::to_string(*deadline) + ")");
        }
        Requeue(started + *deadline - in_.now);
      }
    }
    if (std::optional<LifecycleDecision> done = HandleFailures()) return *done;
    if (Succeeded()) {
      Condition("Succeeded", true, "TrainingJobSucceeded", "TrainingJob " + spec_.name + " successfully completed.");
      Event(false, "Succeeded", "TrainingJob " + spec_.name + " successfully completed");
      return Finish();
    }
    CreateMissing();
    ReportProgress();
    return Done();
  }

 private:
  void Condition(const std::string& type, bool value, const std::string& reason, const std::string& message) {
    SetCondition(&out_.status, type, value, reason, message, now_);
  }
  void Event(bool warning, std::string reason, std::string message) {
    out_.events.push_back({warning, std::move(reason), std::move(message)});
  }
  void Requeue(int64_t seconds) {
    seconds = std::max<int64_t>(seconds, 1);
    if (!out_.requeue_after || seconds < out_.requeue_after) out_.requeue_after = seconds;
  }
  int64_t LiveRestarts() const {
    int64_t n = 0;
    for (const auto& p : pods_) n += p.deleting || removed_.count(p.name) ? 0 : p.restarts;
    return n;
  }
  void Delete(const PodView& p) {
    if (p.deleting || removed_.count(p.name)) return;
    out_.remove.push_back({p.name, p.uid});
    removed_.insert(p.name);
    past_restarts_ += p.restarts;  // still counted once the pod is gone
  }

  LifecycleDecision Done() {
    out_.status["pastRestarts"] = past_restarts_;
    out_.status["restarts"] = past_restarts_ + LiveRestarts();
    std::vector<Json> live;
    for (const Json& pod : in_.pods) live.push_back(pod);
    out_.status["replicaStatuses"] = ReplicaStatuses(spec_, live);
    out_.status["state"] = StateOf(out_.status);
    return std::move(out_);
  }

  LifecycleDecision Finish() {
    if (!out_.status.contains("completionTime")) out_.status["completionTime"] = now_;
    if (IsConditionTrue(out_.status, "Running")) {
      const bool ok = IsConditionTrue(out_.status, "Succeeded");
      Condition("Running", false, ok ? "TrainingJobSucceeded" : "TrainingJobFailed",
                "TrainingJob " + spec_.name + (ok ? " has completed." : " has failed."));
    }
    if (IsConditionTrue(out_.status, "Restarting")) {
      Condition("Restarting", false, "TrainingJobFinished", "TrainingJob " + spec_.name + " has finished.");
    }
    const CleanPodPolicy policy = spec_.run_policy.clean_pod_policy;
    for (const auto& p : pods_) {
      if (policy == CleanPodPolicy::kAll || (policy == CleanPodPolicy::kRunning &&
                                             (p.phase == "Running" || p.phase == "Pending" || p.phase == "Unknown"))) {
        Delete(p);
      }
    }
    out_.remove_services = policy == CleanPodPolicy::kAll;
    if (const auto ttl = spec_.run_policy.ttl_seconds_after_finished) {
      const int64_t completed = ParseTime(Str(out_.status, "completionTime"));
      const int64_t at = (completed >= 0 ? completed : in_.now) + *ttl;
      if (in_.now >= at) {
        out_.delete_job = true;
      } else {
        Requeue(at - in_.now);
      }
    }
    return Done();
  }

  LifecycleDecision Fail(const std::string& reason, const std::string& message) {
    Condition("Failed", true, reason, message);
    Event(true, reason, message);
    return Finish();
  }

  LifecycleDecision Suspend() {
    for (const auto& p : pods_) Delete(p);
    if (!IsConditionTrue(out_.status, "Suspended")) {
      Condition("Suspended", true, "TrainingJobSuspended", "TrainingJob " + spec_.name + " is suspended.");
      Event(false, "Suspended", "TrainingJob " + spec_.name + " is suspended: its pods are deleted");
    }
    if (IsConditionTrue(out_.status, "Running")) {
      Condition("Running", false, "TrainingJobSuspended", "TrainingJob " + spec_.name + " is suspended.");
    }
    if (IsConditionTrue(out_.status, "Restarting")) {
      Condition("Restarting", false, "TrainingJobSuspended", "TrainingJob " + spec_.name + " is suspended.");
    }
    // As a Job's: the deadline counts from the resume.
    out_.status.erase("startTime");
    return Done();
  }

  // Failed pods and restarts: a permanent failure or one past the backoff limit fails the job;
  // otherwise the pods to restart are deleted (all of them with restartScope Job).
  std::optional<LifecycleDecision> HandleFailures() {
    std::vector<const PodView*> to_restart;
    for (const auto& p : pods_) {
      if (p.deleting || p.phase != "Failed") continue;
      const RestartPolicy policy = spec_.Find(p.task.type)->restart_policy;
      if (!Retryable(policy, p.exit_code)) {
        std::string why = p.exit_code == kNotTerminated ? "its pod failed" : p.termination;
        return Fail("TrainingJobFailed",
                    "TrainingJob " + spec_.name + " has failed: " + Who(p) + " failed with " + why +
                        " and restartPolicy " + RestartPolicyName(policy) +
                        (policy == RestartPolicy::kExitCode ? " (exit codes 1-127 are permanent)" : ""));
      }
      to_restart.push_back(&p);
    }
    // With restartScope Job a crashed container restarts the cluster now, not after the kubelet's
    // back-off: its peers are stuck in a collective without it.
    if (spec_.run_policy.restart_scope == RestartScope::kJob && to_restart.empty()) {
      for (const auto& p : pods_) {
        if (!p.deleting && p.crashed) to_restart.push_back(&p);
      }
    }
    // Restarts the kubelet did in place since the last reconcile.
    const int64_t before = Int(in_.old_status, "restarts");
    const int64_t live = LiveRestarts();
    const PodView* restarted_in_place = nullptr;
    if (past_restarts_ + live > before) {
      for (const auto& p : pods_) {
        if (!p.deleting && p.restarts > 0 && (!restarted_in_place || p.restarts > restarted_in_place->restarts)) {
          restarted_in_place = &p;
        }
      }
    }
    if (to_restart.empty() && !restarted_in_place) return std::nullopt;

    const bool whole_job = spec_.run_policy.restart_scope == RestartScope::kJob;
    const int64_t new_restarts = whole_job ? (to_restart.empty() ? 0 : 1) : static_cast<int64_t>(to_restart.size());
    const int64_t total = past_restarts_ + live + new_restarts;
    std::string what;
    if (!to_restart.empty()) {
      what = Who(*to_restart.front()) + " failed with " +
             (to_restart.front()->exit_code == kNotTerminated ? std::string("its pod failed")
                                                              : to_restart.front()->termination);
    } else {
      what = Who(*restarted_in_place) + " was restarted" +
             (restarted_in_place->last_termination.empty() ? "" : " after " + restarted_in_place->last_termination);
    }
    if (total > spec_.run_policy.backoff_limit) {
      return Fail("BackoffLimitExceeded", "TrainingJob " + spec_.name +
                                              " has failed because it has reached the specified backoff limit (" +
                                              std::to_string(spec_.run_policy.backoff_limit) + " restarts): " + what);
    }
    if (whole_job) {
      for (const auto& p : pods_) Delete(p);
      past_restarts_ += new_restarts;
    } else {
      for (const PodView* p : to_restart) {
        Delete(*p);
        past_restarts_ += 1;
      }
    }
    const std::string message = "TrainingJob " + spec_.name + " is restarting" + (whole_job ? " every pod" : "") +
                                ": " + what + " (restart " + std::to_string(total) + " of at most " +
                                std::to_string(spec_.run_policy.backoff_limit) + ")";
    Condition("Restarting", true, "TrainingJobRestarting", message);
    if (IsConditionTrue(out_.status, "Running")) Condition("Running", false, "TrainingJobRestarting", message);
    Event(true, "Restarting", message);
    restarted_now_ = true;
    Requeue(5);  // Running again, if all is well, at the next look
    return std::nullopt;
  }

  bool Succeeded() const {
    std::map<std::pair<ReplicaType, int32_t>, const PodView*> by_task;
    for (const auto& p : pods_) {
      if (!p.deleting) by_task[{p.task.type, p.task.index}] = &p;
    }
    auto succeeded = [&](ReplicaType type, int32_t index) {
      auto it = by_task.find({type, index});
      return it != by_task.end() && it->second->phase == "Succeeded";
    };
    const Task master = MasterTask(spec_);
    if (master.type != ReplicaType::kWorker) return succeeded(master.type, 0);
    const int32_t workers = spec_.Find(ReplicaType::kWorker)->replicas;
    bool all = workers > 0;
    for (int32_t i = 0; i < workers; ++i) all = all && succeeded(ReplicaType::kWorker, i);
    if (spec_.success_policy == SuccessPolicy::kAllWorkers) return all;
    return all || succeeded(ReplicaType::kWorker, 0);
  }

  void CreateMissing() {
    bool any = false, deleting = false;
    std::map<std::string, bool> present;  // pod name -> being deleted
    for (const auto& p : pods_) {
      any = any || !p.deleting;
      deleting = deleting || p.deleting;
      present[p.name] = p.deleting;
    }
    for (const auto& r : out_.remove) {
      present[r.name] = true;
      deleting = true;
    }
    if (!any && !deleting) {
      // Gang start: all or nothing.
      if (!in_.gang_problem.empty()) {
        const std::string message = "none of the job's pods is created: " + in_.gang_problem;
        if (!IsConditionTrue(out_.status, "Running")) Condition("Running", false, "Unschedulable", message);
        Event(true, "Unschedulable", message);
        Requeue(10);
        return;
      }
      for (const Task& t : AllTasks(spec_)) out_.create.push_back(t);
      if (!out_.status.contains("startTime")) out_.status["startTime"] = now_;
      return;
    }
    // Restartscope Job waits for every old pod to go before the cluster starts again together.
    if (spec_.run_policy.restart_scope == RestartScope::kJob && deleting) {
      Requeue(1);
      return;
    }
    for (const Task& t : AllTasks(spec_)) {
      auto it = present.find(TaskName(spec_, t));
      if (it == present.end()) {
        out_.create.push_back(t);
      } else if (it->second) {
        Requeue(1);  // its predecessor is still going away
      }
    }
  }

  void ReportProgress() {
    if (!out_.create.empty()) return;
    std::vector<std::string> pending;
    bool stuck = false;
    int running = 0;
    for (const auto& p : pods_) {
      if (p.deleting) continue;
      if (p.phase == "Running" || p.phase == "Succeeded") ++running;
      if (p.phase != "Pending") continue;
      const int64_t age = p.created >= 0 ? in_.now - p.created : 0;
      pending.push_back(p.name + (p.pending_reason.empty() ? "" : " (" + p.pending_reason + ")"));
      if (age >= kStuckPendingSeconds) stuck = true;
      if (age < kStuckPendingSeconds) Requeue(kStuckPendingSeconds - age);
    }
    const size_t tasks = AllTasks(spec_).size();
    if (static_cast<size_t>(running) == tasks && out_.remove.empty() && !restarted_now_) {
      Condition("Running", true, "TrainingJobRunning", "TrainingJob " + spec_.name + " is running.");
      if (IsConditionTrue(out_.status, "Restarting")) {
        Condition("Restarting", false, "TrainingJobRunning", "TrainingJob " + spec_.name + " is running again.");
      }
      return;
    }
    if (pending.empty() || IsConditionTrue(out_.status, "Restarting")) return;
    std::string list;
    for (const auto& p : pending) list += (list.empty() ? "" : ", ") + p;
    const std::string message =
        std::string(stuck ? "pods stuck Pending for over " + std::to_string(kStuckPendingSeconds) + "s: "
                          : "waiting for pods to start: ") +
        list;
    Condition("Running", false, stuck ? "PodsStuckPending" : "PodsPending", message);
    if (stuck) Event(true, "PodsStuckPending", message);
  }

  const LifecycleInput& in_;
  const TrainingJobSpec& spec_;
  const std::string now_;
  std::vector<PodView> pods_;
  std::set<std::string> removed_;  // pods this decision deletes (their restarts are in past_restarts_)
  int64_t past_restarts_ = 0;
  bool restarted_now_ = false;
  LifecycleDecision out_;
};

}  // namespace

bool WantsGangStart(const TrainingJobSpec& spec, const Json& old_status, const std::vector<Json>& pods) {
  if (spec.run_policy.suspend || IsFinished(old_status) || spec.IsStudy()) return false;
  for (const Json& pod : pods) {
    if (TaskOf(pod)) return false;
  }
  return true;
}

LifecycleDecision Decide(const LifecycleInput& in) { return Decider(in).Run(); }

Json InvalidSpecStatus(const Json& old_status, const std::string& name, const std::string& error, int64_t now) {
  Json status = old_status.is_object() ? old_status : Json::object();
  SetCondition(&status, "Failed", true, "FailedValidation", "TrainingJob " + name + " is invalid: " + error,
               FormatTime(now));
  status["state"] = StateOf(status);
  return status;
}

}  // namespace mf::op::training
