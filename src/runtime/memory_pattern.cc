#include "runtime/memory_pattern.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <unordered_map>
#include <utility>

#include "runtime/mapping_pool.h"
#include "runtime/tensor.h"

namespace mf::runtime {

// One mapping that replays carve their buffers from. A buffer's release function has no context,
// so the slab is found again from the buffer's address (Registry); a slab given up while one of its
// buffers is still alive (a replay that diverged and let one escape) is unmapped with the last.
struct Slab {
  char* base = nullptr;
  size_t bytes = 0;
  size_t outstanding = 0;  // buffers handed out and not yet freed
  bool retired = false;
};

namespace {

constexpr size_t kBufferAlignment = 64;

size_t RoundUpTo(size_t n, size_t to) { return (n + to - 1) / to * to; }

struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Slab*> by_base;
};

Registry& Slabs() {
  static Registry* registry = new Registry;  // never destroyed: buffers may die during static destruction
  return *registry;
}

// Mappings of their own, unmapped when released (the pool keeps nothing): the slabs, and the
// buffers of runs outside a slab.
MappingPool& OwnMappings() {
  static MappingPool* pool = new MappingPool;  // limit 0
  return *pool;
}

Slab* MapSlab(size_t bytes) {
  bytes = RoundUpTo(bytes, PageSize());
  void* p = OwnMappings().Map(bytes);
  if (!p) return nullptr;
  auto* slab = new Slab{static_cast<char*>(p), bytes};
  std::lock_guard lock(Slabs().mu);
  Slabs().by_base[reinterpret_cast<uintptr_t>(p)] = slab;
  return slab;
}

// Caller holds Slabs().mu.
void UnmapSlabLocked(Slab* slab) {
  Slabs().by_base.erase(reinterpret_cast<uintptr_t>(slab->base));
  MappingPool::Unmap(OwnMappings(), slab->base);
  delete slab;
}

// Gives the slab up: unmapped now, or when its last buffer is freed.
void RetireSlab(Slab* slab) {
  if (!slab) return;
  std::lock_guard lock(Slabs().mu);
  slab->retired = true;
  if (slab->outstanding == 0) UnmapSlabLocked(slab);
}

}  // namespace

// The run active on this thread: records, or replays a pattern into the slab.
//
// Every run records its events, so that a run that had no pattern, or left it, plans the next.
// Buffers outside the slab are mappings of their own: such a run's peak is what it holds, not
// what malloc's heap grows to, and what it frees goes back at once, so the slab comes on top of
// nothing.
class ActiveRun {
 public:
  using Pattern = MemoryPatterns::Pattern;

  static ActiveRun*& Current() {
    static thread_local ActiveRun* current = nullptr;
    return current;
  }

  // `replaying` null: no pattern yet, only record.
  ActiveRun(const Pattern* replaying, Slab* slab) : replaying_(replaying), slab_(slab), diverged_(!replaying) {}

  void* Allocate(size_t bytes, void (**release)(void*)) {
    const int32_t buffer = next_buffer_++;
    events_.push_back({buffer, false, bytes});
    void* p;
    if (!diverged_ && Expect({buffer, false, bytes})) {
      const int64_t offset = replaying_->offsets[static_cast<size_t>(buffer)];
      if (offset < 0) {  // outlived the recorded run (a graph output): from malloc's heap
        p = std::aligned_alloc(kBufferAlignment, RoundUpTo(bytes, kBufferAlignment));
        *release = &FreeFromHeap;
      } else {
        p = slab_->base + offset;
        *release = &FreeInSlab;
        std::lock_guard lock(Slabs().mu);
        ++slab_->outstanding;
      }
    } else {
      p = OwnMappings().Map(bytes);
      *release = &UnmapOwn;
    }
    if (p) live_[p] = buffer;
    return p;
  }

  // A buffer this run handed out is being freed (on this thread).
  void NoteFree(void* p) {
    auto it = live_.find(p);
    if (it == live_.end()) return;
    const int32_t buffer = it->second;
    live_.erase(it);
    events_.push_back({buffer, true, 0});
    // Freed out of order, later buffers may not take its place: the rest of the run leaves the slab.
    if (!diverged_) Expect({buffer, true, 0});
  }

  bool replaying() const { return replaying_ != nullptr; }
  int32_t buffers() const { return next_buffer_; }
  // True when the run did not repeat the pattern it replayed (or had none).
  bool diverged() const { return diverged_ || next_event_ != replaying_->events.size(); }
  std::vector<Pattern::Event> TakeEvents() { return std::move(events_); }

 private:
  // Whether the next recorded event is `event`; else the run has diverged from the pattern.
  bool Expect(const Pattern::Event& event) {
    const auto& events = replaying_->events;
    if (next_event_ < events.size() && events[next_event_].buffer == event.buffer &&
        events[next_event_].free == event.free && events[next_event_].bytes == event.bytes) {
      ++next_event_;
      return true;
    }
    diverged_ = true;
    return false;
  }

  static void FreeFromHeap(void* p) {
    if (ActiveRun* run = Current()) run->NoteFree(p);
    std::free(p);
  }
  static void UnmapOwn(void* p) {
    if (ActiveRun* run = Current()) run->NoteFree(p);
    MappingPool::Unmap(OwnMappings(), p);
  }
  static void FreeInSlab(void* p) {
    if (ActiveRun* run = Current()) run->NoteFree(p);
    std::lock_guard lock(Slabs().mu);
    auto it = Slabs().by_base.upper_bound(reinterpret_cast<uintptr_t>(p));
    if (it == Slabs().by_base.begin()) return;  // not a slab's: cannot happen
    Slab* slab = std::prev(it)->second;
    if (--slab->outstanding == 0 && slab->retired) UnmapSlabLocked(slab);
  }

  const Pattern* replaying_;
  Slab* slab_;
  int32_t next_buffer_ = 0;
  size_t next_event_ = 0;  // into replaying_->events
  bool diverged_;
  std::vector<Pattern::Event> events_;       // this run's
  std::unordered_map<void*, int32_t> live_;  // buffers handed out and not yet freed
};

void* AllocateForActiveRun(size_t bytes, void (**release)(void*)) {
  ActiveRun* run = ActiveRun::Current();
  return run ? run->Allocate(bytes, release) : nullptr;
}

std::string MemoryPatterns::Signature(const std::vector<const Tensor*>& inputs) {
  std::string out;
  for (const Tensor* t : inputs) {
    if (!t) {
      out += "-;";
      continue;
    }
    out += DataTypeName(t->dtype());
    out += ShapeToString(t->shape());
    out += ';';
  }
  return out;
}

std::vector<size_t> MemoryPatterns::PlanOffsets(const std::vector<Interval>& buffers, size_t* extent) {
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Largest first: the big buffers pack tightly, the small ones fill the gaps.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<size_t> offsets(buffers.size(), 0);
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of placed buffers alive at the same time
  *extent = 0;
  for (size_t i : order) {
    const Interval& b = buffers[i];
    const size_t bytes = RoundUpTo(b.bytes, kBufferAlignment);
    busy.clear();
    for (size_t j : placed) {
      if (buffers[j].start < b.end && b.start < buffers[j].end)
        busy.emplace_back(offsets[j], offsets[j] + RoundUpTo(buffers[j].bytes, kBufferAlignment));
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (begin >= offset + bytes) break;  // the gap before this one fits
      offset = std::max(offset, end);
    }
    offsets[i] = offset;
    placed.push_back(i);
    *extent = std::max(*extent, offset + bytes);
  }
  return offsets;
}

MemoryPatterns::Run::Run(MemoryPatterns& owner, std::string signature)
    : owner_(owner), signature_(std::move(signature)) {
  if (ActiveRun::Current()) return;  // a run inside a run (a subgraph): allocates as usual
  std::lock_guard lock(owner_.mu_);
  auto it = owner_.patterns_.find(signature_);
  if (it == owner_.patterns_.end()) {
    if (owner_.patterns_.size() >= kMaxSignatures) return;
    it = owner_.patterns_.emplace(signature_, Pattern{}).first;
  }
  Pattern& pattern = it->second;
  if (pattern.failures >= kMaxFailures) return;
  if (pattern.valid) {
    // One replay at a time: a concurrent run allocates as usual rather than mapping its own.
    if (owner_.slab_in_use_) return;
    if (!owner_.slab_ || owner_.slab_->bytes < pattern.slab_bytes) {
      RetireSlab(owner_.slab_);
      owner_.slab_ = MapSlab(pattern.slab_bytes);
      if (!owner_.slab_) return;
    }
    owner_.slab_in_use_ = true;
    ActiveRun::Current() = new ActiveRun(&pattern, owner_.slab_);
  } else {
    if (pattern.recording) return;  // another thread is recording these shapes
    pattern.recording = true;
    ActiveRun::Current() = new ActiveRun(nullptr, nullptr);
  }
  active_ = true;
}

MemoryPatterns::Run::~Run() {
  if (!active_) return;
  std::unique_ptr<ActiveRun> run(ActiveRun::Current());
  ActiveRun::Current() = nullptr;
  std::lock_guard lock(owner_.mu_);
  Pattern& pattern = owner_.patterns_[signature_];
  if (run->replaying()) {
    owner_.slab_in_use_ = false;
    bool escaped;
    {
      std::lock_guard slabs(Slabs().mu);
      escaped = owner_.slab_->outstanding > 0;
    }
    if (escaped) {  // a buffer of this run is still alive in the slab: the next replay needs another
      RetireSlab(owner_.slab_);
      owner_.slab_ = nullptr;
    }
  } else {
    pattern.recording = false;
  }
  if (!succeeded_) return;  // a failed run teaches nothing
  if (!run->diverged()) {
    pattern.failures = 0;
    return;
  }
  // The first run at these shapes, or one that allocated otherwise than the pattern (a kernel's
  // first run at them does one-time work): plan the next from this one. Shapes whose runs keep
  // changing allocate as usual.
  if (run->replaying() && ++pattern.failures >= kMaxFailures) {
    pattern.valid = false;
    return;
  }
  Plan(run->TakeEvents(), &pattern);
}

void MemoryPatterns::Plan(std::vector<Pattern::Event> events, Pattern* pattern) {
  // Buffers freed during the run go in the slab; the rest outlived it.
  constexpr size_t kNever = static_cast<size_t>(-1);
  std::vector<Interval> lives;
  for (size_t e = 0; e < events.size(); ++e) {
    const size_t buffer = static_cast<size_t>(events[e].buffer);
    if (buffer >= lives.size()) lives.resize(buffer + 1, Interval{0, kNever, 0});
    if (events[e].free) {
      lives[buffer].end = e;
    } else {
      lives[buffer].start = e;
      lives[buffer].bytes = events[e].bytes;
    }
  }
  std::vector<Interval> freed;
  std::vector<size_t> freed_buffer;
  for (size_t b = 0; b < lives.size(); ++b) {
    if (lives[b].end == kNever) continue;
    freed.push_back(lives[b]);
    freed_buffer.push_back(b);
  }
  const std::vector<size_t> offsets = PlanOffsets(freed, &pattern->slab_bytes);
  pattern->offsets.assign(lives.size(), -1);
  for (size_t i = 0; i < freed.size(); ++i) pattern->offsets[freed_buffer[i]] = static_cast<int64_t>(offsets[i]);
  pattern->events = std::move(events);
  pattern->valid = !freed.empty();
  if (!pattern->valid) pattern->failures = kMaxFailures;  // nothing to plan at these shapes
}

size_t MemoryPatterns::slab_bytes() const {
  std::lock_guard lock(mu_);
  return slab_ ? slab_->bytes : 0;
}

MemoryPatterns::~MemoryPatterns() { RetireSlab(slab_); }

}  // namespace mf::runtime
