#include "server/repository/deadline_timer.h"

#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace mf::server {

// One queue, ordered by deadline, with the thread that runs its callbacks.
class DeadlineTimer::Shard {
 public:
  Shard(uint64_t first_id, uint64_t id_step) : next_id_(first_id), id_step_(id_step), thread_([this] { Loop(); }) {}

  ~Shard() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  Ticket Schedule(Clock::time_point deadline, std::function<void()> fn) {
    Ticket ticket{deadline, 0};
    bool sooner_than_planned;
    {
      std::lock_guard lock(mu_);
      ticket.id = next_id_;
      next_id_ += id_step_;
      pending_.emplace(std::make_pair(deadline, ticket.id), std::move(fn));
      // Wake the loop only when it would otherwise oversleep this deadline. Requests share one
      // timeout, so a new deadline is nearly always later than the wake-up already planned
      // (often that of a request since answered): no cross-thread wake-up per request.
      sooner_than_planned = deadline < wake_at_;
      if (sooner_than_planned) wake_at_ = deadline;
    }
    if (sooner_than_planned) cv_.notify_all();
    return ticket;
  }

  bool Cancel(const Ticket& ticket) {
    std::lock_guard lock(mu_);
    return pending_.erase({ticket.deadline, ticket.id}) > 0;
  }

 private:
  void Loop() {
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
      pending_.erase(first);
      lock.unlock();
      fn();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  // Keyed by (deadline, id): ordered by time, unique per entry, found again from a Ticket.
  std::map<std::pair<Clock::time_point, uint64_t>, std::function<void()>> pending_;
  // When the loop's current wait ends (max: it waits for work). Cancel leaves it alone, so the
  // loop may wake once for a deadline already cancelled; that is cheaper than a wake-up per
  // Schedule.
  Clock::time_point wake_at_ = Clock::time_point::max();
  uint64_t next_id_;
  const uint64_t id_step_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the members above exist
};

DeadlineTimer::DeadlineTimer(int shards) {
  if (shards <= 0) shards = static_cast<int>(std::thread::hardware_concurrency());
  shards = std::clamp(shards, 1, kMaxShards);
  for (int i = 0; i < shards; ++i) {
    shards_.push_back(std::make_unique<Shard>(static_cast<uint64_t>(i), static_cast<uint64_t>(shards)));
  }
}

DeadlineTimer::~DeadlineTimer() = default;

DeadlineTimer::Ticket DeadlineTimer::Schedule(Clock::time_point deadline, std::function<void()> fn) {
  const int cpu = sched_getcpu();
  const size_t shard = cpu < 0 ? 0 : static_cast<size_t>(cpu) % shards_.size();
  return shards_[shard]->Schedule(deadline, std::move(fn));
}

bool DeadlineTimer::Cancel(const Ticket& ticket) { return shards_[ticket.id % shards_.size()]->Cancel(ticket); }

}  // namespace mf::server
