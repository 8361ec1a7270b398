// RunTimeAverage: a lock-free moving average of a model's recent run times, weight 1/8: a few slow
// runs move it quickly, one outlier does not. Read by the io threads (is a run cheap enough to do
// inline?) and by the batch threads (will a queued request's run end before its deadline?).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

namespace mf::server {

class RunTimeAverage {
 public:
  void Observe(double seconds) {
    const auto ns = static_cast<int64_t>(seconds * 1e9);
    int64_t old = ns_.load(std::memory_order_relaxed);
    int64_t next = 0;
    do {
      next = old < 0 ? ns : old + (ns - old) / 8;
    } while (!ns_.compare_exchange_weak(old, next, std::memory_order_relaxed));
  }
  // Nothing before the first run.
  std::optional<std::chrono::nanoseconds> get() const {
    const int64_t ns = ns_.load(std::memory_order_relaxed);
    if (ns < 0) return std::nullopt;
    return std::chrono::nanoseconds(ns);
  }

 private:
  std::atomic<int64_t> ns_{-1};
};

}  // namespace mf::server
