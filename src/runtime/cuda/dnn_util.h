// Small pieces shared by the cuDNN and cuBLASLt kernels (conv.cc, matmul.cc, pool.cu): owning
// wrappers for library descriptors, strided tensor views, and device-side helpers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_common.h"

namespace mf::runtime::cuda {

// A cuDNN descriptor that destroys itself. Descriptors are created once per input shape and then
// only read, so one plan can serve concurrent runs.
template <typename T, cudnnStatus_t (*Destroy)(T)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() = default;
  ~CudnnDescriptor() {
    if (desc_) Destroy(desc_);
  }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  T get() const { return desc_; }
  T* out() { return &desc_; }

 private:
  T desc_ = nullptr;
};

using TensorDesc = CudnnDescriptor<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = CudnnDescriptor<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;
using ActivationDesc = CudnnDescriptor<cudnnActivationDescriptor_t, cudnnDestroyActivationDescriptor>;

// The cuDNN element type of a device float type (kFloat32 or kFloat16).
cudnnDataType_t CudnnType(DataType dtype);

// A tensor of logical shape `dims` (N, C, spatial...) whose memory is either row-major NC...
// or, when `nhwc`, channels-last. `strides` lets a view select a sub-box of a larger buffer.
struct TensorView {
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
};
// Dense strides for `dims` (rank >= 3) in NC... or channels-last order.
std::vector<int64_t> DenseStrides(const std::vector<int64_t>& dims, bool nhwc);

// Creates `desc` for `view` (rank 3 to 8; ranks below 4 are padded with trailing unit dims, as
// cuDNN wants at least 4). INVALID_ARGUMENT when a dim does not fit cuDNN's int.
Status SetTensorDesc(TensorDesc* desc, DataType dtype, const TensorView& view);

// Copies the box `view_src` of `src` onto the box `view_dst` of `dst` (same dims, any strides),
// on Current().stream: cuDNN's strided transform. Used to pad, crop and change layouts.
Status CopyBox(DataType dtype, const TensorView& view_src, const void* src, const TensorView& view_dst, void* dst);

// dst[i] = (accumulate ? dst[i] : 0) + scale * src[broadcast(i)] over the dense row-major
// tensor `dst_shape`, for kFloat32/kFloat16 on Current().stream. `src` broadcasts to `dst_shape`
// with numpy rules (INVALID_ARGUMENT otherwise). dnn_kernels.cu.
Status BroadcastAxpy(DataType dtype, const Tensor& src, float scale, bool accumulate, const Shape& dst_shape,
                     void* dst);

// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool (pool.cu); called by RegisterConvKernels.
void RegisterPoolKernels(KernelRegistry* registry);

// Whether the fused activation is a plain ReLU (fusable into cuDNN / cuBLASLt epilogues).
inline bool IsRelu(const Activation& act) { return act.kind == Activation::kRelu; }

// Alignment in bytes (a power of two up to 256) of a device pointer.
inline uint32_t PointerAlignment(const void* p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && (v % a) != 0) a >>= 1;
  return a;
}

}  // namespace mf::runtime::cuda
