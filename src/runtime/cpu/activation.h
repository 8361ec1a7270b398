// Pointwise activations shared by the standalone kernels and by kernels that carry a fused
// activation (Conv, Gemm, MatMul after the fusion pass).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace mf::runtime::cpu {

enum class Activation : uint8_t { kNone, kRelu, kLeakyRelu, kSigmoid, kTanh, kClip, kGelu };

// Parses a node's fused_activation ("" -> kNone); INVALID_ARGUMENT for unknown names.
StatusOr<Activation> ActivationFromName(const std::string& name);

struct ActivationParams {
  Activation kind = Activation::kNone;
  float alpha = 0.f;  // LeakyRelu slope, Clip min
  float beta = 0.f;   // Clip max
};

// erf as x * P(x^2) / Q(x^2) on [-4, 4] (beyond it erf is +-1 to within 2e-8): plain arithmetic,
// so loops over it vectorize, where std::erf is a scalar libm call. Coefficients: our
// least-squares rational fit of degree (5, 5); largest error 4.1e-7 against the exact erf,
// evaluated in float32 over [-4, 4].
inline float Erf(float x) {
  x = std::min(std::max(x, -4.f), 4.f);  // in this order a NaN stays NaN
  const float u = x * x;
  float p = 2.109104070613377e-06f;
  p = p * u + 2.827125348843114e-04f;
  p = p * u + 3.578807108234567e-03f;
  p = p * u + 5.216511626798029e-02f;
  p = p * u + 1.857618578418459e-01f;
  p = p * u + 1.128379161158418e+00f;
  float q = 3.859802518235700e-05f;
  q = q * u + 1.121368246891092e-03f;
  q = q * u + 1.458837143600714e-02f;
  q = q * u + 1.122181144803357e-01f;
  q = q * u + 4.979602915509946e-01f;
  q = q * u + 1.f;
  return x * p / q;
}

// e^x from e^r * 2^n, x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor series to r^7
// (relative error below 1e-7): plain arithmetic, so loops over it vectorize. Inputs are clamped
// to [-87.3, 88.3], where the result stays a normal float; a NaN stays NaN.
inline float Exp(float x) {
  x = std::max(std::min(x, 88.3f), -87.3f);  // in this order a NaN stays NaN
  const float n = std::nearbyint(x * 1.44269504088896341f);
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-06f;  // ln2 in two parts
  float e = 1.f / 5040.f;
  e = e * r + 1.f / 720.f;
  e = e * r + 1.f / 120.f;
  e = e * r + 1.f / 24.f;
  e = e * r + 1.f / 6.f;
  e = e * r + 0.5f;
  e = e * r + 1.f;
  e = e * r + 1.f;
  // n is within [-126, 127] for the clamped x; a NaN maps to 0, its r already being NaN.
  const int32_t exponent = static_cast<int32_t>(std::max(-126.f, std::min(127.f, n))) + 127;
  return e * std::bit_cast<float>(static_cast<uint32_t>(exponent) << 23);
}

// GELU, exact form (ONNX Gelu with approximate="none"): x/2 * (1 + erf(x / sqrt 2)).
inline float Gelu(float x) { return 0.5f * x * (1.f + Erf(x * 0.70710678118654752f)); }

// y[i] = Gelu(x[i]) (x == y allowed), vectorized for the widest vector unit present.
void GeluRows(const float* x, float* y, int64_t n);

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
    case Activation::kGelu:
      return Gelu(x);
  }
  return x;
}

// In place over n floats, multi-threaded for large n.
void ApplyActivation(const ActivationParams& p, float* data, int64_t n);

}  // namespace mf::runtime::cpu
