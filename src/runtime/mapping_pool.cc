#include "runtime/mapping_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace mf::runtime {

size_t PageSize() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

namespace {

// Whole mapping length for `bytes` of data: one page in front holds the length, for Unmap().
size_t MappingLength(size_t bytes) {
  const size_t page = PageSize();
  return page + (bytes + page - 1) / page * page;
}

}  // namespace

void* MappingPool::Map(size_t bytes) {
  const size_t length = MappingLength(bytes);
  void* base = Take(length);
  if (base == nullptr) {
    base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return nullptr;
    *static_cast<size_t*>(base) = length;
  }
  return static_cast<char*>(base) + PageSize();
}

void MappingPool::Unmap(MappingPool& pool, void* data) {
  if (data == nullptr) return;
  void* base = static_cast<char*>(data) - PageSize();
  const size_t length = *static_cast<size_t*>(base);
  if (!pool.Keep(base, length)) (void)::munmap(base, length);
}

void MappingPool::SetLimit(size_t max_bytes) {
  std::vector<Kept> dropped;
  {
    std::lock_guard lock(mu_);
    limit_ = max_bytes;
    if (limit_ == 0) {
      bytes_ = 0;
      dropped = std::exchange(kept_, {});
    }
  }
  UnmapAll(std::move(dropped));
}

size_t MappingPool::ReleaseAll() {
  std::vector<Kept> dropped;
  {
    std::lock_guard lock(mu_);
    bytes_ = 0;
    dropped = std::exchange(kept_, {});
  }
  return UnmapAll(std::move(dropped));
}

size_t MappingPool::kept_bytes() {
  std::lock_guard lock(mu_);
  return bytes_;
}

void* MappingPool::Take(size_t length) {
  std::lock_guard lock(mu_);
  // A longer mapping serves too, up to 1/8 more, so that buffers a few pages apart in size
  // (packed layouts pad) still reuse each other's pages without keeping much unused.
  auto best = kept_.end();
  for (auto it = kept_.begin(); it != kept_.end(); ++it) {
    if (it->length < length || it->length - length > length / 8) continue;
    if (best == kept_.end() || it->resident_pages > best->resident_pages) best = it;
  }
  if (best == kept_.end()) return nullptr;
  void* base = best->base;
  bytes_ -= best->length;
  *best = kept_.back();
  kept_.pop_back();
  return base;
}

bool MappingPool::Keep(void* base, size_t length) {
  {
    std::lock_guard lock(mu_);
    if (bytes_ + length > limit_) return false;
  }
  // Pages already handed back (MADV_DONTNEED as a load consumed them) would fault in anew
  // anyway: a mapping with none resident is not worth its address space.
  const size_t pages = length / PageSize();
  std::vector<unsigned char> residency(pages);
  if (::mincore(base, length, residency.data()) != 0) return false;
  const size_t resident = static_cast<size_t>(
      std::count_if(residency.begin(), residency.end(), [](unsigned char r) { return (r & 1) != 0; }));
  if (resident <= 1) return false;  // the header page alone
  std::lock_guard lock(mu_);
  if (bytes_ + length > limit_) return false;
  kept_.push_back({base, length, resident});
  bytes_ += length;
  return true;
}

size_t MappingPool::UnmapAll(std::vector<Kept> kept) {
  size_t bytes = 0;
  for (const Kept& k : kept) {
    (void)::munmap(k.base, k.length);
    bytes += k.length;
  }
  return bytes;
}

}  // namespace mf::runtime
