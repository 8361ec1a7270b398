// Helpers shared by the CPU kernels: element-type dispatch and parallel loops, plus the
// backend-neutral rules of runtime/ops (axes, int inputs, broadcasting).
#pragma once

#include <omp.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/ops/element_dispatch.h"
#include "runtime/ops/indexing.h"
#include "runtime/tensor.h"

// A hot loop compiled three times, the CPU picking one when the program loads: the build targets
// baseline x86-64, whose 4-wide SSE2 would leave most of a modern core idle. The middle clone is
// x86-64-v3 (AVX2 with FMA, as on AMD Zen and Intel since Haswell), not plain "avx2", which does
// not imply FMA: with it, the polynomials of Exp and Erf compile to FMAs, as in the AVX-512 clone.
#define MF_CPU_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))

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
void RegisterRecurrentKernels(KernelRegistry* r);

// Element-type dispatch (numeric types; by byte width).
using ops::DispatchBySize;
using ops::DispatchNumeric;

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
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    fn(begin, end);
  }
}

// Checks that input `i` is present and has one of the float types.
Status RequireFloat(const KernelInit& init, size_t i);

// True for an m x k by k x n product too small (under 1 MFLOP) to pay for waking the thread team.
bool IsSmallGemm(int64_t m, int64_t n, int64_t k);

// Row-major C = alpha * op(A) * op(B) + beta * C on oneDNN's sgemm (op: transpose when ta / tb);
// small products (IsSmallGemm) run on the calling thread.
Status Sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
             const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace mf::runtime::cpu
