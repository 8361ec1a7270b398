#include "runtime/weight_mappings.h"

#include <limits>

#include "runtime/mapping_pool.h"

namespace mf::runtime::weight_mappings {
namespace {

MappingPool& ThePool() {
  static MappingPool* pool = new MappingPool;  // never destroyed: weights may be released during static destruction
  return *pool;
}

}  // namespace

void* Map(size_t bytes) { return ThePool().Map(bytes); }

void Unmap(void* data) { MappingPool::Unmap(ThePool(), data); }

void SetRetention(bool on) { ThePool().SetLimit(on ? std::numeric_limits<size_t>::max() / 2 : 0); }

size_t ReleaseRetained() { return ThePool().ReleaseAll(); }

size_t RetainedBytes() { return ThePool().kept_bytes(); }

}  // namespace mf::runtime::weight_mappings
