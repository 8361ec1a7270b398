// Gemm and MatMul shapes: transposes, numpy-style 1-D promotion and batch broadcasting, and
// Gemm's C, shared by the CPU (oneDNN sgemm) and CUDA (cuBLASLt) kernels.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

// Gemm: A is [M, K] ([K, M] with trans_a), B is [K, N] ([N, K] with trans_b).
struct GemmShape {
  int64_t m = 0, k = 0, n = 0;
};
StatusOr<GemmShape> PlanGemm(const Shape& a, const Shape& b, bool trans_a, bool trans_b);

// Gemm's C must broadcast to [M, N].
Status CheckGemmC(const Shape& c, int64_t m, int64_t n);

// MatMul: [..., M, K] x [..., K, N] with the batch dims broadcast; a 1-D operand is promoted to
// a matrix (A to [1, K], B to [K, 1]) and that dim dropped from the output, as numpy does.
struct MatMulShape {
  int64_t m = 0, k = 0, n = 0;
  Shape batch_a, batch_b;  // the operands' batch dims
  Shape batch;             // their broadcast
  Shape out;
};
StatusOr<MatMulShape> PlanMatMul(const Shape& a, const Shape& b);

}  // namespace mf::runtime::ops
