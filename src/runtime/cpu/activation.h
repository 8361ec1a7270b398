// Pointwise activations shared by the standalone kernels and by kernels that carry a fused
// activation (Conv, Gemm, MatMul after the fusion pass).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace mf::runtime::cpu {

enum class Activation : uint8_t { kNone, kRelu, kLeakyRelu, kSigmoid, kTanh, kClip };

// Parses a node's fused_activation ("" -> kNone); INVALID_ARGUMENT for unknown names.
StatusOr<Activation> ActivationFromName(const std::string& name);

struct ActivationParams {
  Activation kind = Activation::kNone;
  float alpha = 0.f;  // LeakyRelu slope, Clip min
  float beta = 0.f;   // Clip max
};

inline float Activate(const ActivationParams& p, float x) {
  switch (p.kind) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return x > 0.f ? x : 0.f;
    case Activation::kLeakyRelu:
      return x >= 0.f ? x : x * p.alpha;
    case Activation::kSigmoid:
      return 1.f / (1.f + std::exp(-x));
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kClip:
      return x < p.alpha ? p.alpha : (x > p.beta ? p.beta : x);
  }
  return x;
}

// In place over n floats, multi-threaded for large n.
void ApplyActivation(const ActivationParams& p, float* data, int64_t n);

}  // namespace mf::runtime::cpu
