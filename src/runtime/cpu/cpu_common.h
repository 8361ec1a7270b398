// Helpers shared by the CPU kernels: element-type dispatch and parallel loops, plus the
// backend-neutral rules of runtime/ops (axes, int inputs, broadcasting).
#pragma once

#include <omp.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/ops/indexing.h"
#include "runtime/tensor.h"

namespace mf::runtime::cpu {

void RegisterElementwiseKernels(KernelRegistry* r);
void RegisterMatMulKernels(KernelRegistry* r);
void RegisterConvKernels(KernelRegistry* r);
void RegisterPoolKernels(KernelRegistry* r);
void RegisterNormKernels(KernelRegistry* r);
void RegisterReduceKernels(KernelRegistry* r);
void RegisterShapeKernels(KernelRegistry* r);
void RegisterDataKernels(KernelRegistry* r);
void RegisterResizeKernels(KernelRegistry* r);

// Calls fn(T{}) with T the C++ type of `dtype`, for the numeric types most ops accept.
// Returns UNIMPLEMENTED for the others.
template <typename Fn>
Status DispatchNumeric(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32: return fn(float{});
    case DataType::kFloat64: return fn(double{});
    case DataType::kInt32: return fn(int32_t{});
    case DataType::kInt64: return fn(int64_t{});
    case DataType::kInt8: return fn(int8_t{});
    case DataType::kUInt8: return fn(uint8_t{});
    case DataType::kInt16: return fn(int16_t{});
    case DataType::kUInt16: return fn(uint16_t{});
    case DataType::kUInt32: return fn(uint32_t{});
    case DataType::kUInt64: return fn(uint64_t{});
    default: return Unimplemented("element type " + std::string(DataTypeName(dtype)) + " is not supported");
  }
}

// Same, by byte width only: for ops that move elements without looking at them.
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

inline bool IsFloat(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat64; }
inline bool IsNumeric(DataType t) {
  return t != DataType::kString && t != DataType::kBool && t != DataType::kFloat16 && t != DataType::kBFloat16;
}

// Axis normalisation, int inputs and broadcasting: the rules both backends share.
using ops::BroadcastShapes;
using ops::BroadcastStrides;
using ops::NormalizeAxis;
using ops::ReadInts;

// Runs fn(begin, end) over [0, n) split across the OpenMP team when n is large enough.
template <typename Fn>
void ParallelFor(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  int threads = omp_get_max_threads();
  if (n < grain * 2 || threads <= 1 || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
  int64_t chunks = std::min<int64_t>(threads, n / grain);
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    fn(begin, end);
  }
}

// Checks that input `i` is present and has one of the float types.
Status RequireFloat(const KernelInit& init, size_t i);

}  // namespace mf::runtime::cpu
