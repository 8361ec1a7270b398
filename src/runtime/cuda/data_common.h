// Host-side helpers shared by the data-movement, reduction and normalization kernel files
// (data_*.cu, reduce*.cu): input checks, axis normalisation and reading host-side int tensors
// with the same messages as the CPU kernels, and element-size dispatch. The CPU helpers in
// cpu/cpu_common.h cannot be included from .cu files (they pull in OpenMP pragmas) and live in
// another library.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda/cuda_common.h"

namespace mf::runtime::cuda {

inline Status RequireInput(const KernelInit& init, size_t i) {
  if (!init.has_input(i)) return init.Error(StatusCode::kInvalidArgument, "missing input " + std::to_string(i));
  return Status::Ok();
}

// Element types the data-movement kernels handle: everything with a fixed width.
inline Status RequireFixedWidth(const KernelInit& init, size_t i) {
  MF_RETURN_IF_ERROR(RequireInput(init, i));
  if (init.dtype(i) == DataType::kString) return init.Error(StatusCode::kUnimplemented, "string tensors are not supported");
  return Status::Ok();
}

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

// Maps a possibly negative axis into [0, rank); INVALID_ARGUMENT when out of range.
inline StatusOr<int> NormalizeAxis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) {
    return InvalidArgument("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

// Reads a 0-D or 1-D int32/int64 HOST tensor (a slot listed in KernelDef::host_inputs).
inline StatusOr<std::vector<int64_t>> ReadInts(const Tensor& t, const char* what) {
  if (t.location() != Location::kHost) return Internal(std::string(what) + " must be a host input of the CUDA kernel");
  if (t.rank() > 1) return InvalidArgument(std::string(what) + " must be a 0-D or 1-D tensor");
  std::vector<int64_t> out(static_cast<size_t>(t.num_elements()));
  if (t.dtype() == DataType::kInt64) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = t.data<int64_t>()[i];
  } else if (t.dtype() == DataType::kInt32) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = t.data<int32_t>()[i];
  } else {
    return InvalidArgument(std::string(what) + " must be int32 or int64, got " + std::string(DataTypeName(t.dtype())));
  }
  return out;
}

// Reads a HOST float tensor (Resize scales and roi) as doubles. float16 is accepted too, in case
// a constant was stored in the device float type.
inline StatusOr<std::vector<double>> ReadFloats(const Tensor& t, const char* what) {
  if (t.location() != Location::kHost) return Internal(std::string(what) + " must be a host input of the CUDA kernel");
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

// Calls fn(T{}) with an unsigned type of the element's width: for ops that move elements
// without looking at them.
template <typename Fn>
Status DispatchBySize(DataType dtype, Fn&& fn) {
  switch (ElementSize(dtype)) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
    default: return Unimplemented("element type " + std::string(DataTypeName(dtype)) + " is not supported");
  }
}

// Calls fn(T{}) for the device float types.
template <typename Fn>
Status DispatchDeviceFloat(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32: return fn(float{});
    case DataType::kFloat16: return fn(__half{});
    default: return Unimplemented("element type " + std::string(DataTypeName(dtype)) + " is not supported on the GPU");
  }
}

// Row-major strides of `shape`.
inline std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
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
