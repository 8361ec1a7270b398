#include "server/main/thread_priority.h"

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>

#include "common/logging.h"

namespace mf::server {
namespace {

constexpr int kCapSysNice = 23;  // linux/capability.h

pid_t CurrentTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

bool HasCapSysNice() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    unsigned long long effective = 0;
    if (std::sscanf(line.c_str(), "CapEff: %llx", &effective) == 1) return (effective >> kCapSysNice) & 1u;
  }
  return false;
}

// Whether this process may move a thread from SCHED_IDLE (or a raised nice value) to nice
// `target`: CAP_SYS_NICE, or an RLIMIT_NICE whose hard limit allows it (the soft limit is raised
// to match; sched(7), setrlimit(2)).
bool MayRaiseTo(int target) {
  if (HasCapSysNice()) return true;
  rlimit limit{};
  if (getrlimit(RLIMIT_NICE, &limit) != 0) return false;
  const rlim_t needed = static_cast<rlim_t>(20 - target);
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) return false;
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= needed) return true;
  limit.rlim_cur = needed;
  return setrlimit(RLIMIT_NICE, &limit) == 0;
}

std::vector<pid_t> ThreadsOfProcess() {
  std::vector<pid_t> tids;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return tids;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    tids.push_back(static_cast<pid_t>(std::strtol(entry->d_name, nullptr, 10)));
  }
  closedir(dir);
  return tids;
}

// The process's SCHED_IDLE threads: the load thread and the OpenMP threads it created.
std::vector<pid_t> IdleThreads() {
  std::vector<pid_t> idle;
  for (pid_t tid : ThreadsOfProcess()) {
    if (sched_getscheduler(tid) == SCHED_IDLE) idle.push_back(tid);
  }
  return idle;
}

struct ThreadSample {
  int64_t ran_ns = 0;     // on a CPU (/proc/<pid>/task/<tid>/schedstat)
  bool runnable = false;  // state R: running or waiting for a CPU (/proc/<pid>/task/<tid>/stat)
};

// The kernel adds to schedstat's run-queue wait only once a thread gets a CPU, so a thread
// starved outright shows no waiting at all: starvation is read from its state instead.
std::map<pid_t, ThreadSample> SampleIdleThreads() {
  std::map<pid_t, ThreadSample> sample;
  for (pid_t tid : IdleThreads()) {
    const std::string dir = "/proc/self/task/" + std::to_string(tid);
    ThreadSample thread;
    std::ifstream schedstat(dir + "/schedstat");
    if (!(schedstat >> thread.ran_ns)) continue;
    std::ifstream stat(dir + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t name_end = line.rfind(')');  // the name may hold spaces and parentheses
    thread.runnable = name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'R';
    sample[tid] = thread;
  }
  return sample;
}

int NiceOf(pid_t tid) {
  errno = 0;
  const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  return errno == 0 ? nice : 0;
}

}  // namespace

bool LoadStarved(std::chrono::nanoseconds ran, bool runnable, std::chrono::nanoseconds window, double min_share) {
  const double share = static_cast<double>(ran.count()) / static_cast<double>(std::max<int64_t>(window.count(), 1));
  return runnable && share < min_share;
}

StatusOr<std::unique_ptr<LoadPriority>> LoadPriority::Create(LoadPriorityOptions options) {
  if (options.nice < 0 || options.nice > 19) {
    return InvalidArgument("--load_thread_nice must be in 0..19, got " + std::to_string(options.nice));
  }
  const int raised_nice = options.raised_nice.value_or(NiceOf(CurrentTid()));
  if (options.window.count() <= 0 || !(options.min_share > 0 && options.min_share <= 1) || raised_nice < -20 ||
      raised_nice > 19) {
    return InvalidArgument("load priority: window must be positive, min_share in (0, 1], raised_nice in -20..19");
  }
  Mode mode = Mode::kNormal;
  if (options.nice > 0) mode = MayRaiseTo(raised_nice) ? Mode::kIdleRaised : Mode::kNice;
  return std::unique_ptr<LoadPriority>(new LoadPriority(options, mode, raised_nice));
}

LoadPriority::LoadPriority(LoadPriorityOptions options, Mode mode, int raised_nice)
    : options_(options), mode_(mode), raised_nice_(raised_nice) {
  // Created by the caller (main, at normal priority), so the watchdog keeps that priority.
  if (mode_ == Mode::kIdleRaised) watchdog_ = std::thread([this] { Watch(); });
}

LoadPriority::~LoadPriority() {
  stopping_ = true;
  sequence_.fetch_add(1);
  sequence_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

std::string_view LoadPriority::ModeName(Mode mode) {
  switch (mode) {
    case Mode::kNormal:
      return "normal";
    case Mode::kIdleRaised:
      return "sched_idle, raised when starved";
    case Mode::kNice:
      return "nice";
  }
  return "unknown";
}

void LoadPriority::LowerCurrentThread() {
  if (mode_ == Mode::kNormal) return;
  // The nice value first: it is what remains if SCHED_IDLE is refused. On Linux PRIO_PROCESS
  // with a thread id addresses that one thread.
  const pid_t tid = CurrentTid();
  const int target = std::min(19, NiceOf(tid) + options_.nice);
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(tid), target) != 0) {
    log::Warning("cannot lower the model load thread's nice value", {{"error", std::strerror(errno)}});
  }
  lowered_nice_ = NiceOf(tid);
  if (mode_ == Mode::kNice) {
    log::Info(
        "model loads run at a raised nice value: SCHED_IDLE is not used, as this process could not raise "
        "a starved load again (it has neither CAP_SYS_NICE nor an RLIMIT_NICE that allows it)",
        {{"nice", std::to_string(target)}});
    return;
  }
  // Lowering a thread to SCHED_IDLE needs no privilege, but a seccomp profile or an old kernel
  // may still refuse it; the nice value alone then has to do.
  sched_param param{};
  if (int err = pthread_setschedparam(pthread_self(), SCHED_IDLE, &param); err != 0) {
    log::Warning("cannot move the model load thread to SCHED_IDLE; it keeps its raised nice value",
                 {{"error", std::strerror(err)}});
  }
}

void LoadPriority::LoadStarted() {
  if (mode_ != Mode::kIdleRaised) return;
  raised_ = false;
  loading_ = true;
  sequence_.fetch_add(1);
  sequence_.notify_all();
}

void LoadPriority::LoadFinished() {
  if (mode_ != Mode::kIdleRaised) return;
  loading_ = false;
  // Raised, this thread runs at normal priority and may take the lock. Whoever clears raised_
  // lowers the threads: this thread, or the watchdog when it raised them just as the load ended.
  if (raised_.exchange(false)) {
    std::lock_guard lock(mu_);
    LowerRaisedThreadsLocked();
  }
}

void LoadPriority::RaiseNow() {
  if (mode_ != Mode::kIdleRaised) return;
  shutting_down_ = true;
  Raise(sequence_.load(), "the server is shutting down");
}

void LoadPriority::Watch() {
  uint64_t seen = 0;
  while (!stopping_) {
    sequence_.wait(seen);  // until a load starts (or the destructor bumps it)
    seen = sequence_.load();
    auto current = [&] { return !stopping_ && loading_ && !raised_ && sequence_.load() == seen; };
    while (current()) {
      if (shutting_down_) {
        Raise(seen, "the server is shutting down");
        break;
      }
      const std::map<pid_t, ThreadSample> before = SampleIdleThreads();
      std::this_thread::sleep_for(options_.window);
      if (!current()) break;
      int64_t ran = 0;
      bool runnable = false;
      for (const auto& [tid, now] : SampleIdleThreads()) {
        auto earlier = before.find(tid);
        ran += std::max<int64_t>(now.ran_ns - (earlier == before.end() ? 0 : earlier->second.ran_ns), 0);
        // Wanting a CPU at both ends of the window, not waiting on I/O or a lock.
        runnable = runnable || (now.runnable && earlier != before.end() && earlier->second.runnable);
      }
      if (LoadStarved(std::chrono::nanoseconds(ran), runnable, options_.window, options_.min_share)) {
        Raise(seen, "starved: " + std::to_string(ran / 1000000) + " ms on a CPU in " +
                        std::to_string(options_.window.count()) + " ms while runnable");
      }
    }
  }
}

void LoadPriority::Raise(uint64_t sequence, std::string_view why) {
  std::lock_guard lock(mu_);
  if (!loading_ || raised_ || sequence_.load() != sequence) return;
  // Set before the threads move, so a load that ends from here on lowers them itself: its
  // LoadFinished waits on mu_ until they are raised, and returns with them lowered.
  raised_ = true;
  RaiseThreadsLocked(why);
  // The load may have ended before raised_ was set, its thread seeing it false: then lower here.
  if ((!loading_ || sequence_.load() != sequence) && raised_.exchange(false)) LowerRaisedThreadsLocked();
}

void LoadPriority::RaiseThreadsLocked(std::string_view why) {
  int moved = 0;
  for (pid_t tid : IdleThreads()) {
    sched_param param{};
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(tid), raised_nice_) != 0 ||
        sched_setscheduler(tid, SCHED_OTHER, &param) != 0) {
      if (errno != ESRCH) {
        log::Warning("cannot raise a model load thread",
                     {{"tid", std::to_string(tid)}, {"error", std::strerror(errno)}});
      }
      continue;
    }
    raised_tids_.push_back(tid);
    ++moved;
  }
  log::Info("model load raised to normal priority until it ends",
            {{"reason", std::string(why)}, {"threads", std::to_string(moved)}, {"nice", std::to_string(raised_nice_)}});
}

void LoadPriority::LowerRaisedThreadsLocked() {
  for (pid_t tid : raised_tids_) {
    sched_param param{};
    // Lowering needs no privilege; a thread that has exited since (ESRCH) is skipped.
    if (sched_setscheduler(tid, SCHED_IDLE, &param) == 0) {
      (void)setpriority(PRIO_PROCESS, static_cast<id_t>(tid), lowered_nice_.load());
    }
  }
  raised_tids_.clear();
}

StatusOr<std::shared_ptr<const Servable>> PrioritizedLoader::Load(const LoadRequest& request) {
  priority_->LoadStarted();
  auto loaded = inner_->Load(request);
  priority_->LoadFinished();
  return loaded;
}

}  // namespace mf::server
