#include "server/repository/deadline_timer.h"

namespace mf::server {

DeadlineTimer::DeadlineTimer() : thread_([this] { Loop(); }) {}

DeadlineTimer::~DeadlineTimer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

uint64_t DeadlineTimer::Schedule(Clock::time_point deadline, std::function<void()> fn) {
  uint64_t id;
  bool sooner_than_planned;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    pending_.emplace(std::make_pair(deadline, id), std::move(fn));
    deadlines_.emplace(id, deadline);
    // Wake the loop only when it would otherwise oversleep this deadline. Requests share one
    // timeout, so a new deadline is nearly always later than the wake-up already planned (often
    // that of a request since answered): no cross-thread wake-up per request.
    sooner_than_planned = deadline < wake_at_;
    if (sooner_than_planned) wake_at_ = deadline;
  }
  if (sooner_than_planned) cv_.notify_all();
  return id;
}

bool DeadlineTimer::Cancel(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = deadlines_.find(id);
  if (it == deadlines_.end()) return false;
  pending_.erase({it->second, id});
  deadlines_.erase(it);
  return true;
}

void DeadlineTimer::Loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (pending_.empty()) {
      wake_at_ = Clock::time_point::max();
      cv_.wait(lock);
      continue;
    }
    auto first = pending_.begin();
    if (Clock::now() < first->first.first) {
      wake_at_ = first->first.first;
      cv_.wait_until(lock, wake_at_);
      continue;
    }
    std::function<void()> fn = std::move(first->second);
    deadlines_.erase(first->first.second);
    pending_.erase(first);
    lock.unlock();
    fn();
    lock.lock();
  }
}

}  // namespace mf::server
