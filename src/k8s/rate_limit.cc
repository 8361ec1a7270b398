#include "k8s/rate_limit.h"

#include <algorithm>
#include <condition_variable>
#include <thread>

namespace mf::k8s {

bool SleepFor(Clock::duration d, std::stop_token stop) {
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  cv.wait_for(lock, stop, d, [] { return false; });
  return !stop.stop_requested();
}

TokenBucket::TokenBucket(double qps, int burst)
    : qps_(qps), burst_(std::max(1, burst)), tokens_(std::max(1, burst)), last_(Clock::now()) {}

void TokenBucket::RefillLocked(Clock::time_point now) {
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  tokens_ = std::min(burst_, tokens_ + elapsed * qps_);
}

Clock::duration TokenBucket::Reserve() {
  if (qps_ <= 0) return Clock::duration::zero();
  std::lock_guard lock(mu_);
  RefillLocked(Clock::now());
  tokens_ -= 1;
  if (tokens_ >= 0) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(-tokens_ / qps_));
}

bool TokenBucket::Wait(std::stop_token stop) {
  const Clock::duration delay = Reserve();
  if (delay <= Clock::duration::zero()) return !stop.stop_requested();
  std::mutex m;
  std::condition_variable_any cv;
  std::unique_lock lock(m);
  // wait_for with a stop_token returns early (false) when stop is requested.
  cv.wait_for(lock, stop, delay, [] { return false; });
  return !stop.stop_requested();
}

bool TokenBucket::TryAcquire() {
  if (qps_ <= 0) return true;
  std::lock_guard lock(mu_);
  RefillLocked(Clock::now());
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

Clock::duration ExponentialBackoff(Clock::duration base, Clock::duration cap, int attempt) {
  Clock::duration delay = base;
  for (int i = 0; i < attempt && delay < cap; ++i) delay *= 2;
  return std::min(delay, cap);
}

ItemRateLimiter::ItemRateLimiter() : ItemRateLimiter(Options()) {}

ItemRateLimiter::ItemRateLimiter(Options options) : options_(options), bucket_(options.qps, options.burst) {}

Clock::duration ItemRateLimiter::When(const std::string& item) {
  int attempt;
  {
    std::lock_guard lock(mu_);
    attempt = failures_[item]++;
  }
  return std::max(ExponentialBackoff(options_.base, options_.cap, attempt), bucket_.Reserve());
}

void ItemRateLimiter::Forget(const std::string& item) {
  std::lock_guard lock(mu_);
  failures_.erase(item);
}

int ItemRateLimiter::NumRequeues(const std::string& item) {
  std::lock_guard lock(mu_);
  auto it = failures_.find(item);
  return it == failures_.end() ? 0 : it->second;
}

}  // namespace mf::k8s
