// Activation memory planned from an earlier run at the same input shapes: ONNX Runtime's
// "memory pattern". One run at given shapes records the order in which its thread allocates and
// frees host buffers; the next runs at those shapes carve the same buffers, in the same order,
// from one mapping (the slab) at offsets planned so that buffers alive at once never overlap.
//
// Why: malloc's heap could not reuse the freed activations of one layer for the slightly larger
// ones of the next (MobileNetV2 at batch 8: 46 MiB alive at most, the heap grew by 120 MiB), and
// kept what it grew resident. The slab is as large as the widest cut of the planned buffers, and
// stays resident, so steady-state runs fault no page in either.
//
// Safety: a replay hands out a slab buffer only while the run's allocations and frees repeat the
// recording exactly; at the first difference (a data-dependent shape, a kernel that allocates on
// its first run only) the rest of the run allocates as usual, so the live buffers never overlap.
// Buffers that outlived the recorded run (the graph's outputs) always allocate as usual.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace mf::runtime {

class Tensor;

// Buffers below this size are not worth planning: malloc serves them from its bins.
inline constexpr size_t kPatternMinBytes = size_t{64} << 10;

// For AllocateBytes (tensor.cc): a host buffer of `bytes` (kPatternMinBytes or more) for the run
// active on this thread, if any, setting `*release` to what frees it. Null when no run is active
// or it does not take this buffer: the caller then allocates as usual.
void* AllocateForActiveRun(size_t bytes, void (**release)(void*));

class MemoryPatterns {
 public:
  MemoryPatterns() = default;
  ~MemoryPatterns();
  MemoryPatterns(const MemoryPatterns&) = delete;
  MemoryPatterns& operator=(const MemoryPatterns&) = delete;

  // One run of the owner's graph on this thread, at input shapes summed up by `signature`
  // (Signature()). While it lives, the thread's host allocations of kPatternMinBytes or more go
  // through it. Call Succeeded() when the run completed; a failed run teaches nothing.
  class Run {
   public:
    Run(MemoryPatterns& owner, std::string signature);
    ~Run();
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;
    void Succeeded() { succeeded_ = true; }

   private:
    MemoryPatterns& owner_;
    std::string signature_;
    bool succeeded_ = false;
    bool active_ = false;  // this object set the thread's active run
  };

  // The key of a pattern: each input's type and shape.
  static std::string Signature(const std::vector<const Tensor*>& inputs);

  // Bytes of the slab mapped now (0 before the first replay).
  size_t slab_bytes() const;

  // Offsets for buffers alive over [start, end) (event indices) of `bytes` each, no two alive at
  // once overlapping; the total extent goes to `*extent`. Exposed for tests.
  struct Interval {
    size_t start, end, bytes;
  };
  static std::vector<size_t> PlanOffsets(const std::vector<Interval>& buffers, size_t* extent);

 private:
  friend class ActiveRun;
  struct Pattern {
    struct Event {
      int32_t buffer;  // index of the buffer in allocation order
      bool free;       // a free of `buffer`, else its allocation
      size_t bytes;    // allocations only
    };
    std::vector<Event> events;
    std::vector<int64_t> offsets;  // per buffer: its offset in the slab, or -1 (outlived the run)
    size_t slab_bytes = 0;
    bool valid = false;
    bool recording = false;
    int failures = 0;  // replays in a row that diverged; at kMaxFailures the shapes give up
  };
  // Plans `pattern` from a run's events.
  static void Plan(std::vector<Pattern::Event> events, Pattern* pattern);
  static constexpr int kMaxFailures = 3;
  static constexpr size_t kMaxSignatures = 16;

  mutable std::mutex mu_;
  std::map<std::string, Pattern> patterns_;
  struct Slab* slab_ = nullptr;  // shared by every signature; one replay at a time
  bool slab_in_use_ = false;
};

}  // namespace mf::runtime
