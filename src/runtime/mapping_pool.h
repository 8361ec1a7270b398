// Anonymous mappings of their own for large buffers, and a pool that keeps released ones mapped,
// pages and all, so that the next buffer of about the same size takes them without a page fault.
// Two pools use it: model weights (runtime/weight_mappings.h) and activation buffers too large
// for malloc's heap (Tensor::AllocateUninitialized of 32 MiB or more, see tensor.h).
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace mf::runtime {

// The system's page size (sysconf), for the mappings here and the tensors' arenas.
size_t PageSize();

class MappingPool {
 public:
  // `bytes` of uninitialized memory in a mapping of its own (page-aligned plus one page; 64-byte
  // aligned at least): a kept mapping of the right size when there is one, else a new one. Null
  // when out of memory.
  void* Map(size_t bytes);

  // Releases what Map() returned: kept while the pool has room for it and some of its pages are
  // resident, else unmapped. Null is ignored. Any thread.
  static void Unmap(MappingPool& pool, void* data);

  // Keeps released mappings up to `max_bytes` in all (0: none, the default); unmaps what is kept
  // when lowered to 0.
  void SetLimit(size_t max_bytes);

  // Unmaps every kept mapping; returns their bytes. The limit stays as it was.
  size_t ReleaseAll();

  // Bytes of mappings kept right now (their length, resident or not).
  size_t kept_bytes();

 private:
  struct Kept {
    void* base;
    size_t length;
    size_t resident_pages;
  };
  void* Take(size_t length);
  bool Keep(void* base, size_t length);
  static size_t UnmapAll(std::vector<Kept> kept);

  std::mutex mu_;
  size_t limit_ = 0;
  size_t bytes_ = 0;
  std::vector<Kept> kept_;
};

}  // namespace mf::runtime
