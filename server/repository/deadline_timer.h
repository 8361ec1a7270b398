// DeadlineTimer: runs callbacks at deadlines on one thread of its own, and lets the caller
// cancel them (the usual case: the work finished in time). Used for --rest_api_timeout_in_ms (a
// prediction still running at its deadline is answered 504, as TF Serving does) and for gRPC
// deadlines (a call still queued or running at its grpc-timeout is answered DEADLINE_EXCEEDED
// then, not when its batch finishes). Callbacks must be short; they run without the timer's
// lock held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

namespace mf::server {

class DeadlineTimer {
 public:
  using Clock = std::chrono::steady_clock;

  DeadlineTimer();
  ~DeadlineTimer();  // pending callbacks are dropped, not run
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  // Schedules `fn` at `deadline`; returns an id for Cancel().
  uint64_t Schedule(Clock::time_point deadline, std::function<void()> fn);
  // True when the callback was removed before it ran.
  bool Cancel(uint64_t id);

 private:
  void Loop();

  std::mutex mu_;
  std::condition_variable cv_;
  // Keyed by (deadline, id): ordered by time, unique per entry.
  std::map<std::pair<Clock::time_point, uint64_t>, std::function<void()>> pending_;
  std::map<uint64_t, Clock::time_point> deadlines_;
  // When the loop's current wait ends (max: it waits for work). Cancel leaves it alone, so the
  // loop may wake once for a deadline already cancelled; that is cheaper than a wake-up per
  // Schedule.
  Clock::time_point wake_at_ = Clock::time_point::max();
  uint64_t next_id_ = 1;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mf::server
