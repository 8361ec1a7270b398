#include "server/rest/deadline_timer.h"

namespace mf::server::rest {

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
  bool earliest;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    pending_.emplace(std::make_pair(deadline, id), std::move(fn));
    deadlines_.emplace(id, deadline);
    earliest = pending_.begin()->first.second == id;
  }
  if (earliest) cv_.notify_all();
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
      cv_.wait(lock);
      continue;
    }
    auto first = pending_.begin();
    if (Clock::now() < first->first.first) {
      cv_.wait_until(lock, first->first.first);
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

}  // namespace mf::server::rest
