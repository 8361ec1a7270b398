// Host-side helpers shared by the data-movement, reduction and normalization kernel files
// (data_*.cu, reduce*.cu): the backend-neutral rules of runtime/ops (input checks, axes, int
// inputs, strides) plus what only the device needs (host-input checks, device float types,
// element-size dispatch).
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_common.h"
#include "runtime/ops/element_dispatch.h"
#include "runtime/ops/indexing.h"
#include "runtime/ops/input_checks.h"

namespace mf::runtime::cuda {

using ops::DispatchBySize;
using ops::NormalizeAxis;
using ops::RequireFixedWidth;
using ops::RequireInput;
using ops::RowMajorStrides;

// A float input in its device form (float32, or float16 in FP16 mode).
inline Status RequireDeviceFloat(const KernelInit& init, size_t i) {
  MF_RETURN_IF_ERROR(RequireInput(init, i));
  if (!IsDeviceFloat(init.dtype(i))) {
    return init.Error(StatusCode::kUnimplemented, "input " + std::to_string(i) + " of type " +
                                                      std::string(DataTypeName(init.dtype(i))) +
                                                      " is not supported (float32, or float16 in FP16 mode)");
  }
  return Status::Ok();
}

// INTERNAL unless `t` (when present) is in host memory: the slots a KernelDef lists in
// host_inputs, which the shared rules of runtime/ops read directly.
inline Status RequireHost(const Tensor* t, const char* what) {
  if (t && t->location() != Location::kHost)
    return Internal(std::string(what) + " must be a host input of the CUDA kernel");
  return Status::Ok();
}

// Reads a 0-D or 1-D int32/int64 HOST tensor with the shared rule.
inline StatusOr<std::vector<int64_t>> ReadInts(const Tensor& t, const char* what) {
  MF_RETURN_IF_ERROR(RequireHost(&t, what));
  return ops::ReadInts(t, what);
}

// Reads a HOST float tensor (Resize scales and roi) as doubles. float16 is accepted too, in case
// a constant was stored in the device float type.
inline StatusOr<std::vector<double>> ReadFloats(const Tensor& t, const char* what) {
  MF_RETURN_IF_ERROR(RequireHost(&t, what));
  std::vector<double> out(static_cast<size_t>(t.num_elements()));
  if (t.dtype() == DataType::kFloat32) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = t.data<float>()[i];
  } else if (t.dtype() == DataType::kFloat16) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(__half2float(t.data<__half>()[i]));
  } else {
    return InvalidArgument(std::string(what) + " must be float32");
  }
  return out;
}

// Calls fn(T{}) for the device float types.
template <typename Fn>
Status DispatchDeviceFloat(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32:
      return fn(float{});
    case DataType::kFloat16:
      return fn(__half{});
    default:
      return Unimplemented("element type " + std::string(DataTypeName(dtype)) + " is not supported on the GPU");
  }
}

}  // namespace mf::runtime::cuda

namespace mf::runtime::cuda {

// Copies the elements of an iteration space `dims` from `src` to `dst`, element (i0, i1, ..) going
// from src[src_base + sum(i_d * src_strides[d])] to dst[dst_base + sum(i_d * dst_strides[d])]
// (strides in elements, may be 0 or negative on the source side). Transpose, Slice, Concat,
// Split, Expand and Tile are all this copy; dims are coalesced first, so contiguous runs become
// cudaMemcpyAsync/cudaMemcpy2DAsync and a batched last-two-dims swap uses a tiled kernel.
// UNIMPLEMENTED when the coalesced space still has more than kMaxDims dims.
Status StridedCopy(DataType dtype, const void* src, void* dst, std::vector<int64_t> dims,
                   std::vector<int64_t> src_strides, std::vector<int64_t> dst_strides, int64_t src_base = 0,
                   int64_t dst_base = 0);

// The other files of the data family (called from RegisterDataKernels).
void RegisterGatherKernels(KernelRegistry* registry);  // data_gather.cu: Gather, GatherElements, Pad, Trilu
void RegisterResizeKernel(KernelRegistry* registry);   // data_resize.cu
// The normalization half of the reduce family (called from RegisterReduceKernels).
void RegisterNormKernels(KernelRegistry* registry);  // reduce_norm.cu: LayerNormalization, BatchNormalization

}  // namespace mf::runtime::cuda
