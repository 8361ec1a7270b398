#include "common/malloc_tuning.h"

#include <condition_variable>
#include <mutex>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace mf {

void TuneMallocForManySmallObjects(int arenas) {
#if defined(__GLIBC__)
  mallopt(M_ARENA_MAX, arenas);
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
#else
  (void)arenas;
#endif
}

void TuneMallocForReusedBuffers() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

void ReturnFreedHeapToOs() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

std::jthread StartHeapTrimmer(std::chrono::seconds period) {
  return std::jthread([period](std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    while (true) {
      cv.wait_for(lock, stop, period, [] { return false; });
      if (stop.stop_requested()) return;
#if defined(__GLIBC__)
      malloc_trim(0);
#endif
    }
  });
}

}  // namespace mf
