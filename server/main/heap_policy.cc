#include "server/main/heap_policy.h"

#include <malloc.h>

#include <string>

namespace mf::server {

Status ApplyHeapPolicy(const HeapPolicy& policy) {
  if (policy.mmap_threshold_bytes == 0) return Status::Ok();
  constexpr size_t kGlibcMmapThresholdMax = size_t{32} << 20;  // HEAP_MAX_SIZE / 2 on 64-bit
  if (policy.mmap_threshold_bytes > kGlibcMmapThresholdMax ||
      mallopt(M_MMAP_THRESHOLD, static_cast<int>(policy.mmap_threshold_bytes)) != 1) {
    return InvalidArgument("--malloc_mmap_threshold_bytes must be between 1 and 33554432, got " +
                           std::to_string(policy.mmap_threshold_bytes));
  }
  return Status::Ok();
}

}  // namespace mf::server
