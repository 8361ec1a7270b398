// steady_clock's time as of the last timer tick (CLOCK_MONOTONIC_COARSE: at most a few
// milliseconds old, and read without touching the TSC). For timestamps that only deadlines of
// seconds and TTLs are compared against: a proxied request took a dozen precise clock reads,
// 6 % of the router's user time, most of them for such deadlines.
#pragma once

#include <time.h>

#include <chrono>

namespace mf {

inline std::chrono::steady_clock::time_point CoarseNow() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // steady_clock is CLOCK_MONOTONIC: same time base
  return std::chrono::steady_clock::time_point(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec)));
}

}  // namespace mf
