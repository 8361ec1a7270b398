#include "runtime/tensor.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "runtime/mapping_pool.h"
#include "runtime/memory_pattern.h"
#include "runtime/weight_mappings.h"

namespace mf::runtime {
namespace {

// Weights at least this large get a mapping of their own (Tensor::AllocateForWeights).
constexpr size_t kOwnMappingMinBytes = size_t{1} << 20;

void FreeAligned(void* data) { std::free(data); }

constexpr size_t kMinReleaseBytes = size_t{1} << 20;  // below this the syscalls are not worth it

// Releases the whole pages within [begin, end).
void ReleaseRange(uintptr_t begin, uintptr_t end) {
  const uintptr_t page = static_cast<uintptr_t>(PageSize());
  begin = (begin + page - 1) & ~(page - 1);
  end &= ~(page - 1);
  if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

struct TypeInfo {
  DataType dtype;
  size_t size;
  std::string_view name;
};

constexpr TypeInfo kTypes[] = {
    {DataType::kFloat32, 4, "FP32"},  {DataType::kFloat16, 2, "FP16"},  {DataType::kBFloat16, 2, "BF16"},
    {DataType::kFloat64, 8, "FP64"},  {DataType::kInt8, 1, "INT8"},     {DataType::kInt16, 2, "INT16"},
    {DataType::kInt32, 4, "INT32"},   {DataType::kInt64, 8, "INT64"},   {DataType::kUInt8, 1, "UINT8"},
    {DataType::kUInt16, 2, "UINT16"}, {DataType::kUInt32, 4, "UINT32"}, {DataType::kUInt64, 8, "UINT64"},
    {DataType::kBool, 1, "BOOL"},     {DataType::kString, 0, "BYTES"},
};

const TypeInfo& Info(DataType dtype) { return kTypes[static_cast<size_t>(dtype)]; }

constexpr size_t kAlignment = 64;

// Buffers at least this large come from LargeBuffers(): glibc maps them afresh on every malloc
// whatever its mmap threshold (32 MiB is the highest it takes), so without the pool each run of a
// model with such an activation faults in every page of it anew.
constexpr size_t kLargeBufferMinBytes = size_t{32} << 20;

MappingPool& LargeBuffers() {
  static MappingPool* pool = new MappingPool;  // never destroyed: tensors may die during static destruction
  return *pool;
}

void UnmapLargeBuffer(void* data) { MappingPool::Unmap(LargeBuffers(), data); }

// `bytes` of uninitialized host memory, 64-byte aligned: a mapping of its own when `own_mapping`
// and large enough (AllocateWeightBuffer says why), one from LargeBuffers() when larger than
// malloc would keep in its heap, else aligned_alloc. Sets `release` to what
// frees it; null when out of memory.
void* AllocateBytes(size_t bytes, bool own_mapping, void (**release)(void*)) {
  if (own_mapping && bytes >= kOwnMappingMinBytes) {
    *release = &weight_mappings::Unmap;
    return weight_mappings::Map(bytes);
  }
  if (bytes >= kPatternMinBytes) {
    if (void* p = AllocateForActiveRun(bytes, release)) return p;
  }
  if (bytes >= kLargeBufferMinBytes) {
    *release = &UnmapLargeBuffer;
    return LargeBuffers().Map(bytes);
  }
  *release = &FreeAligned;
  const size_t rounded = std::max(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  return std::aligned_alloc(kAlignment, rounded);
}

}  // namespace

size_t ElementSize(DataType dtype) { return Info(dtype).size; }
std::string_view DataTypeName(DataType dtype) { return Info(dtype).name; }

bool DataTypeFromName(std::string_view name, DataType* dtype) {
  for (const auto& t : kTypes) {
    if (t.name == name) {
      *dtype = t.dtype;
      return true;
    }
  }
  return false;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

void Tensor::Releaser::operator()(void* p) const {
  if (release)
    release(p);
  else
    std::free(p);
}

Tensor Tensor::Adopt(DataType dtype, Shape shape, void* data, Location location, void (*release)(void*)) {
  Tensor t;
  t.dtype_ = dtype;
  t.num_elements_ = NumElements(shape);
  t.shape_ = std::move(shape);
  t.location_ = location;
  t.data_ = std::unique_ptr<void, Releaser>(data, Releaser{release});
  return t;
}

Tensor Tensor::ShapeOnly(DataType dtype, Shape shape) {
  return Adopt(dtype, std::move(shape), nullptr, Location::kHost, nullptr);
}

StatusOr<Tensor> Tensor::Allocate(DataType dtype, Shape shape) { return AllocateImpl(dtype, std::move(shape), true); }

StatusOr<Tensor> Tensor::AllocateUninitialized(DataType dtype, Shape shape) {
  return AllocateImpl(dtype, std::move(shape), false);
}

StatusOr<Tensor> Tensor::AllocateForWeights(DataType dtype, Shape shape) {
  return AllocateImpl(dtype, std::move(shape), false, /*own_mapping=*/true);
}

StatusOr<Tensor> Tensor::AllocateImpl(DataType dtype, Shape shape, bool zero, bool own_mapping) {
  int64_t n = NumElements(shape);
  if (n < 0) return InvalidArgument("invalid tensor shape " + ShapeToString(shape));
  size_t elem = ElementSize(dtype);
  if (elem != 0 && static_cast<uint64_t>(n) > kMaxTensorBytes / elem) {
    return ResourceExhausted("tensor of shape " + ShapeToString(shape) + " exceeds the " +
                             std::to_string(kMaxTensorBytes >> 20) + " MiB limit");
  }
  if (dtype == DataType::kString && static_cast<uint64_t>(n) > kMaxTensorBytes / sizeof(std::string)) {
    return ResourceExhausted("string tensor of shape " + ShapeToString(shape) + " is too large");
  }
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.num_elements_ = n;
  if (dtype == DataType::kString) {
    t.strings_.resize(static_cast<size_t>(n));
  } else {
    size_t bytes = static_cast<size_t>(n) * elem;
    void (*release)(void*) = nullptr;
    void* p = AllocateBytes(bytes, own_mapping, &release);
    if (!p) return ResourceExhausted("out of memory allocating " + std::to_string(bytes) + " bytes");
    if (zero) std::memset(p, 0, bytes);
    t.data_ = std::unique_ptr<void, Releaser>(p, Releaser{release});
  }
  return t;
}

StatusOr<Tensor> Tensor::FromBytes(DataType dtype, Shape shape, std::string_view bytes) {
  if (dtype == DataType::kString) return InvalidArgument("FromBytes cannot build a string tensor");
  MF_ASSIGN_OR_RETURN(Tensor t, AllocateUninitialized(dtype, std::move(shape)));
  if (bytes.size() != t.byte_size()) {
    return InvalidArgument("expected " + std::to_string(t.byte_size()) + " bytes for a " +
                           std::string(DataTypeName(dtype)) + " tensor of shape " + ShapeToString(t.shape()) +
                           ", got " + std::to_string(bytes.size()));
  }
  if (!bytes.empty()) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return t;
}

Tensor Tensor::Clone() const {
  assert(location_ == Location::kHost && "device tensors are copied by their backend");
  StatusOr<Tensor> copy = Allocate(dtype_, shape_);
  assert(copy.ok() && "cloning a tensor that was allocated before cannot exceed the limits");
  Tensor out = std::move(copy).value();
  if (byte_size()) std::memcpy(out.raw_data(), raw_data(), byte_size());
  out.strings_ = strings_;
  return out;
}

Status Tensor::Reshape(Shape shape) {
  if (NumElements(shape) != num_elements_) {
    return InvalidArgument("cannot reshape " + ShapeToString(shape_) + " to " + ShapeToString(shape));
  }
  shape_ = std::move(shape);
  return Status::Ok();
}

std::shared_ptr<void> AllocateWeightBuffer(size_t bytes) {
  void (*release)(void*) = nullptr;
  void* p = AllocateBytes(bytes, /*own_mapping=*/true, &release);
  return p ? std::shared_ptr<void>(p, release) : nullptr;
}

void KeepLargeBuffersForReuse(size_t max_bytes) { LargeBuffers().SetLimit(max_bytes); }

size_t KeptLargeBufferBytes() { return LargeBuffers().kept_bytes(); }

void ReleaseResidentPages(const void* data, size_t bytes) {
  if (data == nullptr || bytes < kMinReleaseBytes) return;
  const auto start = reinterpret_cast<uintptr_t>(data);
  ReleaseRange(start, start + bytes);
}

ConsumedPages::ConsumedPages(const void* data, size_t bytes)
    : next_(reinterpret_cast<uintptr_t>(data)), start_(reinterpret_cast<uintptr_t>(data)), bytes_(bytes) {}

void ConsumedPages::Consumed(size_t bytes) {
  if (bytes_ < kMinReleaseBytes) return;
  const uintptr_t end = start_ + std::min(bytes, bytes_);
  if (end < next_ + kMinReleaseBytes && bytes < bytes_) return;  // release in steps of at least 1 MiB
  ReleaseRange(next_, end);
  next_ = end & ~(static_cast<uintptr_t>(PageSize()) - 1);  // the page holding `end` is only partly consumed
}

void CopyReleasingSource(void* dst, const void* src, size_t bytes) {
  constexpr size_t kSlice = size_t{1} << 20;
  ConsumedPages source(src, bytes);
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kSlice, bytes - done);
    std::memcpy(static_cast<char*>(dst) + done, static_cast<const char*>(src) + done, n);
    done += n;
    source.Consumed(done);
  }
}

}  // namespace mf::runtime
