// Rate limiting shared by the API client (client-side QPS/burst, as client-go's
// flowcontrol.NewTokenBucketRateLimiter) and the work queue (per-item exponential backoff
// combined with an overall token bucket, as workqueue.DefaultControllerRateLimiter).
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <stop_token>
#include <string>

namespace mf::k8s {

using Clock = std::chrono::steady_clock;

// Sleeps for `d` unless `stop` is requested first; false when stopped.
bool SleepFor(Clock::duration d, std::stop_token stop);

// A token bucket: `burst` tokens, refilled at `qps` per second. Reservations may drive the
// bucket negative, so callers that reserve are served in order and each learns its own delay.
class TokenBucket {
 public:
  // qps <= 0 disables limiting.
  TokenBucket(double qps, int burst);

  // Reserves one token and returns how long the caller must wait before using it.
  Clock::duration Reserve();
  // Blocks until a token is available; false when `stop` was requested first.
  bool Wait(std::stop_token stop = {});
  // Takes a token only if one is available now.
  bool TryAcquire();

 private:
  void RefillLocked(Clock::time_point now);

  const double qps_;
  const double burst_;
  std::mutex mu_;
  double tokens_;
  Clock::time_point last_;
};

// Exponential backoff: base * 2^attempt, capped. Deterministic (no jitter) so tests can assert it;
// callers that need spreading add jitter themselves.
Clock::duration ExponentialBackoff(Clock::duration base, Clock::duration cap, int attempt);

// Per-item exponential failure backoff (first retry after `base`, doubling up to `cap`), combined
// with an overall token bucket: the delay is the larger of the two, like client-go's
// MaxOfRateLimiter(ItemExponentialFailureRateLimiter, BucketRateLimiter).
class ItemRateLimiter {
 public:
  struct Options {
    Clock::duration base = std::chrono::milliseconds(5);
    Clock::duration cap = std::chrono::seconds(1000);
    double qps = 10;
    int burst = 100;
  };
  ItemRateLimiter();
  explicit ItemRateLimiter(Options options);

  // Delay before `item` should be retried; counts a failure of the item.
  Clock::duration When(const std::string& item);
  // Forgets the item's failures (call after it was processed successfully).
  void Forget(const std::string& item);
  int NumRequeues(const std::string& item);

 private:
  const Options options_;
  TokenBucket bucket_;
  std::mutex mu_;
  std::map<std::string, int> failures_;
};

}  // namespace mf::k8s
