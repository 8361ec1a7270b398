// Runs the control plane's processes and keeps them running: each is started with its output
// appended to its log file and a parent-death signal (so none outlives `up`, even after a
// kill -9 of `up`), and one that exits is started again after a back-off (1 s doubling to 30 s,
// reset after a minute of running), as a kubelet does for static pods. Stop() ends them in
// reverse order: SIGTERM, then SIGKILL after the grace period.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "tools/local/cluster/components.h"

namespace mf::local {

class Supervisor {
 public:
  Supervisor() = default;
  ~Supervisor();  // Stop()
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts one component now; the monitor thread restarts it whenever it exits.
  Status Start(ComponentSpec spec);
  // The running pid of a component (0 while it is restarting or unknown).
  pid_t PidOf(const std::string& name) const;
  void Stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

 private:
  struct Child {
    ComponentSpec spec;
    pid_t pid = 0;
    std::chrono::steady_clock::time_point started;
    std::chrono::steady_clock::time_point restart_at;
    std::chrono::milliseconds backoff{1000};
    int restarts = 0;
  };
  static StatusOr<pid_t> Spawn(const ComponentSpec& spec);
  void Monitor();
  void TerminateAll();

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Child> children_;
  bool stopping_ = false;
  std::chrono::milliseconds grace_{10'000};
  std::thread monitor_;
};

}  // namespace mf::local
