// Tensor: a dense, row-major, host-memory array with an element type and a shape. The one
// value type that crosses every boundary: wire codecs (REST JSON, TensorProto, KServe v2)
// produce and consume it, the runtime runs on it, the batcher concatenates and splits it.
// Buffers are 64-byte aligned (oneDNN and AVX-512 loads want that). Move-only; Clone() copies.
// Inside the CUDA backend a Tensor may instead own device memory (location() == kCuda); such
// tensors never leave the runtime: Session::Run takes and returns host tensors only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mf::runtime {

enum class DataType : uint8_t {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kBool,
  kString,  // variable-length bytes, held as std::string elements
};

// Bytes per element; 0 for kString.
size_t ElementSize(DataType dtype);
// KServe v2 / Triton names: "FP32", "FP16", "BF16", "FP64", "INT8".. "UINT64", "BOOL", "BYTES".
std::string_view DataTypeName(DataType dtype);
// Inverse of DataTypeName; false when unknown.
bool DataTypeFromName(std::string_view name, DataType* dtype);

// Where a tensor's buffer lives.
enum class Location : uint8_t { kHost, kCuda };

using Shape = std::vector<int64_t>;
// Product of dims, or -1 when any dim is negative or the product overflows int64.
int64_t NumElements(const Shape& shape);
std::string ShapeToString(const Shape& shape);  // "[2, 3]"

// Largest tensor we ever allocate from untrusted input (shapes in requests and model files).
inline constexpr size_t kMaxTensorBytes = size_t{4} << 30;

class Tensor {
 public:
  Tensor() = default;
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // Zero-filled (or empty strings). Refuses negative dims, overflow and more than kMaxTensorBytes.
  static StatusOr<Tensor> Allocate(DataType dtype, Shape shape);
  // Same limits, contents unspecified (strings are still empty): for outputs a kernel overwrites.
  static StatusOr<Tensor> AllocateUninitialized(DataType dtype, Shape shape);
  // Copies `bytes`, which must be exactly NumElements(shape) * ElementSize(dtype) long.
  static StatusOr<Tensor> FromBytes(DataType dtype, Shape shape, std::string_view bytes);

  // Takes ownership of a buffer allocated elsewhere (device memory of a backend), released by
  // `release(data)`. `data` holds NumElements(shape) * ElementSize(dtype) bytes.
  static Tensor Adopt(DataType dtype, Shape shape, void* data, Location location, void (*release)(void*));

  // For model weights: like AllocateUninitialized, but a buffer of 1 MiB or more gets an
  // anonymous mapping of its own (MapAnonymous) instead of malloc's heap.
  static StatusOr<Tensor> AllocateForWeights(DataType dtype, Shape shape);

  // A shape and no data (raw_data() is null): stands in for a constant whose readers keep
  // their own copies of it and look only at its shape (ExecutionPlan::DropConstantsKernelsOwn).
  static Tensor ShapeOnly(DataType dtype, Shape shape);

  // Host tensors only (a device tensor is copied by its backend).
  Tensor Clone() const;

  DataType dtype() const { return dtype_; }
  Location location() const { return location_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t num_elements() const { return num_elements_; }
  // Bytes of the dense buffer (0 for kString).
  size_t byte_size() const { return static_cast<size_t>(num_elements_) * ElementSize(dtype_); }

  void* raw_data() { return data_.get(); }
  const void* raw_data() const { return data_.get(); }
  template <typename T>
  T* data() {
    return static_cast<T*>(raw_data());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw_data());
  }
  std::string_view bytes() const { return {static_cast<const char*>(raw_data()), byte_size()}; }

  // Elements of a kString tensor.
  std::vector<std::string>& strings() { return strings_; }
  const std::vector<std::string>& strings() const { return strings_; }

  // Same buffer, new shape with the same element count (e.g. a flatten). INVALID_ARGUMENT otherwise.
  Status Reshape(Shape shape);

 private:
  static StatusOr<Tensor> AllocateImpl(DataType dtype, Shape shape, bool zero, bool own_mapping = false);

  // Frees with std::free (host buffers) unless a backend supplied its own release function.
  struct Releaser {
    void (*release)(void*);  // nullptr: std::free (value-initialized by unique_ptr)
    void operator()(void* p) const;
  };

  DataType dtype_ = DataType::kFloat32;
  Location location_ = Location::kHost;
  Shape shape_;
  int64_t num_elements_ = 0;
  std::unique_ptr<void, Releaser> data_;
  std::vector<std::string> strings_;
};

// Host buffers of 32 MiB or more are mappings of their own (malloc would map them afresh on every
// allocation anyway). Released ones are kept mapped, up to `max_bytes` in all (0, the default:
// none), for the next buffer of about their size: a model whose activations are that large then
// runs without faulting their pages in on every run, as ONNX Runtime's arena does. The server and
// modelfleet-run turn it on; lowering it to 0 unmaps what is kept.
void KeepLargeBuffersForReuse(size_t max_bytes);
// Bytes of released large buffers kept right now.
size_t KeptLargeBufferBytes();

// Hands a dead host buffer's pages back to the kernel just before the buffer is freed. A freed
// block that lies below live ones stays resident in glibc's heap (until malloc_trim), so a
// load that frees one copy of the weights after making another would otherwise keep both
// resident. MADV_DONTNEED on private anonymous memory only drops the pages (they read as zeros if
// touched again); the allocator's bookkeeping lies outside the page-aligned interior, the only
// part released. Buffers under 1 MiB are left alone (not worth the syscall).
void ReleaseResidentPages(const void* data, size_t bytes);

// Model weights of 1 MiB or more live in anonymous mappings of their own, not in malloc's heap:
// freeing them (a swap unloading a version) gives their pages back at once, and those frees
// never raise glibc's adaptive mmap threshold, which otherwise has later loads' weights come from
// the heap, where a freed weight-sized block can stay resident until malloc_trim. Used by
// Tensor::AllocateForWeights, and by kernels for their own (packed) copies of weights: a buffer
// of `bytes`, 64-byte aligned at least; null when out of memory.
std::shared_ptr<void> AllocateWeightBuffer(size_t bytes);

// Releases a dead buffer's pages as it is read front to back: Consumed(n) says its first n bytes
// will not be read again, and each page wholly inside them goes back (ReleaseResidentPages). So
// a buffer copied or converted into another, then freed, never has both resident whole.
class ConsumedPages {
 public:
  ConsumedPages(const void* data, size_t bytes);
  void Consumed(size_t bytes);

 private:
  uintptr_t next_;  // first page not released yet
  uintptr_t start_;
  size_t bytes_;
};

// memcpy that releases the source's pages as it goes (ConsumedPages): for a source that is
// freed right after.
void CopyReleasingSource(void* dst, const void* src, size_t bytes);

}  // namespace mf::runtime
