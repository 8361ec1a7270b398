// Scheduling priority of model loads. A load parses, rewrites and reorders weights and runs a
// warm-up inference with oneDNN's OpenMP team; on a small pod that competes head-on with the
// requests of the models already serving. So a load runs as SCHED_IDLE: the kernel gives it a
// core only when no normal thread wants one, and a request thread that wakes up preempts it at
// once (with a raised nice value alone it still takes its CFS share, and a waking request may
// wait for it). The OpenMP threads the load thread creates inherit its policy and nice value
// (Linux copies both into new threads); the request threads' OpenMP teams are other threads.
//
// SCHED_IDLE alone starves a load for as long as the cores stay busy: a saturated pod (exactly
// when an autoscaler adds replicas and a canary rolls out) would never load its new version, and
// a SIGTERM would wait on that load. So the starvation is bounded: a watchdog thread at normal
// priority samples the load's threads (/proc/self/task/<tid>/schedstat and stat) every `window`;
// when they got less than `min_share` of one core while runnable, they are moved to SCHED_OTHER at
// the nice value the server itself runs at (an equal share with the requests and whatever else
// they compete with) for the rest of the load,
// and lowered again when it ends. With idle CPU (requests at any rate short of saturation) a
// load gets more than that share and is never raised, so requests keep SCHED_IDLE's protection.
//
// Threads a raised load creates (an OpenMP team made for the first time while raised) keep the
// raised priority: nothing tells them apart from request threads afterwards. The loop thread's
// team is normally made by the first load, at start-up, when nothing starves it.
//
// Leaving SCHED_IDLE needs CAP_SYS_NICE or an RLIMIT_NICE that allows that nice value
// (sched(7)). A process that has neither could never raise a load again, so it does not use
// SCHED_IDLE: its loads run as SCHED_OTHER at the nice value, which guarantees them a share of
// weight(nice) / (weight(nice) + weight(0)) of each contended core (nice 5: ~25%, 10: ~10%).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "server/repository/loader.h"

namespace mf::server {

struct LoadPriorityOptions {
  int nice = 10;  // --load_thread_nice, 0..19; 0: loads run at the priority of requests
  std::chrono::milliseconds window{250};
  double min_share = 0.25;  // of one core, over `window`
  // The nice value a starved load is raised to; unset: that of the thread calling Create() (the
  // server's own).
  std::optional<int> raised_nice;
};

// Whether a load's threads starved over one window: they ran less than `min_share` of it while
// wanting a CPU (`runnable`: in state R at both ends of it; a load waiting on I/O is not
// starving). Pure.
bool LoadStarved(std::chrono::nanoseconds ran, bool runnable, std::chrono::nanoseconds window, double min_share);

class LoadPriority {
 public:
  enum class Mode {
    kNormal,      // nice 0: loads as requests
    kIdleRaised,  // SCHED_IDLE, raised when starved
    kNice,        // SCHED_OTHER at the nice value (SCHED_IDLE could not be left again)
  };

  // INVALID_ARGUMENT for a nice value outside 0..19 or a window / share out of range.
  static StatusOr<std::unique_ptr<LoadPriority>> Create(LoadPriorityOptions options);
  ~LoadPriority();  // stops the watchdog
  LoadPriority(const LoadPriority&) = delete;
  LoadPriority& operator=(const LoadPriority&) = delete;

  Mode mode() const { return mode_; }
  static std::string_view ModeName(Mode mode);

  // On the thread that loads, before its first load: lowers it (and every thread it creates).
  void LowerCurrentThread();
  // Around each load, on the thread that loads.
  void LoadStarted();
  void LoadFinished();
  // Raises the load in progress, if any, now (shutdown: it must end within the grace period).
  void RaiseNow();

 private:
  LoadPriority(LoadPriorityOptions options, Mode mode, int raised_nice);
  void Watch();
  // Raises the load `sequence` if it is still the one running and not raised yet.
  void Raise(uint64_t sequence, std::string_view why);
  // Moves every SCHED_IDLE thread of the process (the load's) to SCHED_OTHER at raised_nice.
  void RaiseThreadsLocked(std::string_view why);
  // Lowers the threads RaiseThreadsLocked raised back to the load priority.
  void LowerRaisedThreadsLocked();

  const LoadPriorityOptions options_;
  const Mode mode_;
  const int raised_nice_;

  // A thread at SCHED_IDLE may be preempted for as long as the cores stay busy: whatever it holds
  // then, a raise would wait on. So the load thread signals through atomics only, and takes mu_
  // only once it runs raised.
  std::atomic<uint64_t> sequence_{0};  // one more as each load starts, and at destruction
  std::atomic<bool> loading_{false};
  std::atomic<bool> raised_{false};
  std::atomic<bool> shutting_down_{false};  // RaiseNow() ran: every load from now on runs raised
  std::atomic<bool> stopping_{false};       // the watchdog ends
  std::atomic<int> lowered_nice_{0};        // the load thread's nice value once lowered

  std::mutex mu_;  // raised_tids_
  std::vector<pid_t> raised_tids_;
  std::thread watchdog_;
};

// Runs each load inside LoadStarted / LoadFinished of `priority`.
class PrioritizedLoader final : public Loader {
 public:
  PrioritizedLoader(std::shared_ptr<Loader> inner, std::shared_ptr<LoadPriority> priority)
      : inner_(std::move(inner)), priority_(std::move(priority)) {}
  using Loader::Load;
  StatusOr<std::shared_ptr<const Servable>> Load(const LoadRequest& request) override;

 private:
  std::shared_ptr<Loader> inner_;
  std::shared_ptr<LoadPriority> priority_;
};

}  // namespace mf::server
