// Gemm and MatMul by constant 2-D weights on a oneDNN matmul primitive whose weights are
// reordered once into the blocked layout it prefers, where sgemm re-packs them on every call
// (ONNX Runtime pre-packs for MLAS the same way). The bias and the fused activation run inside
// the primitive. On AVX2-only CPUs oneDNN 2.6's matmul is that very sgemm on plain weights, so
// there the weights are packed into PanelGemm's panels instead.
#pragma once

#include <memory>

#include "runtime/cpu/activation.h"
#include "runtime/kernel.h"

namespace mf::runtime::cpu {

struct PackedMatMulParams {
  bool gemm = false;                // Gemm: A is [M, K] (output [M, N]); MatMul: rows of any rank
  bool transposed_weights = false;  // Gemm transB: the weights are stored [N, K]
  ActivationParams act;
  // The sgemm kernel of the same node: runs products too small to pay for a packed copy
  // (IsSmallGemm), empty products, and shapes that do not fit (its errors).
  FunctionKernel::Fn fallback;
};

// A kernel reading (A, W[, bias]) with W a constant 2-D tensor.
std::unique_ptr<Kernel> MakePackedMatMulKernel(PackedMatMulParams params);

}  // namespace mf::runtime::cpu
