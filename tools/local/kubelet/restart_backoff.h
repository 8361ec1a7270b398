// CrashLoopBackOff timing: a container that exits is restarted after 10 s, then 20 s, 40 s ...
// up to 5 minutes; a run that lasted 10 minutes resets the delay, as the kubelet does. Times are
// passed in, so tests drive it without sleeping.
#pragma once

#include <algorithm>
#include <chrono>

namespace mf::local {

struct BackoffPolicy {
  std::chrono::milliseconds initial{10'000};
  std::chrono::milliseconds max{300'000};
  std::chrono::milliseconds reset_after{600'000};
};

class RestartBackoff {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  explicit RestartBackoff(BackoffPolicy policy = {}) : policy_(policy) {}

  // Records an exit of a run that started at `started`; returns when the next start may happen.
  TimePoint OnExit(TimePoint started, TimePoint exited) {
    if (exited - started >= policy_.reset_after) delay_ = std::chrono::milliseconds(0);
    delay_ = delay_.count() == 0 ? policy_.initial : std::min(delay_ * 2, policy_.max);
    next_start_ = exited + delay_;
    return next_start_;
  }
  bool CanStart(TimePoint now) const { return now >= next_start_; }
  std::chrono::milliseconds current_delay() const { return delay_; }

 private:
  BackoffPolicy policy_;
  std::chrono::milliseconds delay_{0};
  TimePoint next_start_{};
};

}  // namespace mf::local
