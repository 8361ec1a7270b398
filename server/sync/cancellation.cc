#include "server/sync/cancellation.h"

#include <utility>

namespace mf::sync {

void Cancellation::Cancel(int signal) {
  {
    // The hook runs under the lock so that ClearHook() returns only once it has finished: the
    // step that set it may then destroy what the hook touches.
    std::lock_guard lock(mu_);
    if (cancelled_.load()) return;
    signal_.store(signal);
    cancelled_.store(true);
    if (hook_) std::exchange(hook_, nullptr)();
  }
  changed_.notify_all();
}

bool Cancellation::WaitFor(std::chrono::milliseconds duration) {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, duration, [this] { return cancelled_.load(); });
}

void Cancellation::Wait() {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [this] { return cancelled_.load(); });
}

void Cancellation::SetHook(std::function<void()> hook) {
  {
    std::lock_guard lock(mu_);
    if (!cancelled_.load()) {
      hook_ = std::move(hook);
      return;
    }
  }
  hook();
}

void Cancellation::ClearHook() {
  std::lock_guard lock(mu_);
  hook_ = nullptr;
}

}  // namespace mf::sync
