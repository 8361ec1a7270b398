// DeadlineTimer: runs callbacks at deadlines on threads of its own, and lets the caller cancel
// them (the usual case: the work finished in time). Used for --rest_api_timeout_in_ms (a
// prediction still running at its deadline is answered 504, as TF Serving does) and for gRPC
// deadlines (a call still queued or running at its grpc-timeout is answered DEADLINE_EXCEEDED
// then, not when its batch finishes). Callbacks must be short; they run without a lock held.
//
// Every request schedules and cancels one deadline, from whichever io thread it arrived on, so a
// single queue's lock was contended by all of them (a futex sleep and wake-up per collision).
// The timer is sharded by the CPU the caller runs on: each shard has its own lock, queue and
// thread, and io threads on different cores do not meet. Cancel finds the shard from the ticket.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace mf::server {

class DeadlineTimer {
 public:
  using Clock = std::chrono::steady_clock;

  // What Schedule returns and Cancel takes.
  struct Ticket {
    Clock::time_point deadline;
    uint64_t id = 0;  // unique per timer; id % shards is the shard that holds it
  };

  // `shards`: 0 picks one per CPU, at most kMaxShards.
  explicit DeadlineTimer(int shards = 0);
  ~DeadlineTimer();  // pending callbacks are dropped, not run
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  // Schedules `fn` at `deadline`.
  Ticket Schedule(Clock::time_point deadline, std::function<void()> fn);
  // True when the callback was removed before it ran.
  bool Cancel(const Ticket& ticket);

  static constexpr int kMaxShards = 8;

 private:
  class Shard;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace mf::server
