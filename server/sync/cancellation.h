// How SIGTERM reaches a running sync: the signal thread calls Cancel(), which ends any backoff
// wait at once and runs the hook of the step in progress (a download cancels its HTTP call);
// file copies poll cancelled() between chunks. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace mf::sync {

class Cancellation {
 public:
  // `signal` is kept for messages (0 when not cancelled by a signal). Idempotent.
  void Cancel(int signal = 0);
  bool cancelled() const { return cancelled_.load(); }
  int signal() const { return signal_.load(); }

  // Sleeps up to `duration`; true when cancelled before or during the wait.
  bool WaitFor(std::chrono::milliseconds duration);
  // Blocks until Cancel().
  void Wait();

  // Runs `hook` on Cancel() (at once when already cancelled) until ClearHook(). One at a time.
  void SetHook(std::function<void()> hook);
  void ClearHook();

 private:
  std::atomic<bool> cancelled_{false};
  std::atomic<int> signal_{0};
  std::mutex mu_;
  std::condition_variable changed_;
  std::function<void()> hook_;
};

}  // namespace mf::sync
