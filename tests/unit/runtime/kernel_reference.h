// What the CPU kernel tests share: the parameters they fuse each activation with,
// and what each activation computes, in double, for the reference results.
#pragma once

#include <algorithm>

#include "runtime/cpu/activation.h"
#include "tests/unit/runtime/random_values.h"

namespace mf::runtime::cpu::testing {

using mf::runtime::testing::RandomValues;

// LeakyRelu with slope 0.1, Clip to [-0.5, 0.75].
inline ActivationParams TestActivation(Activation act) {
  return {act, act == Activation::kLeakyRelu ? 0.1f : -0.5f, 0.75f};
}

// TestActivation(act) applied to x.
inline double Activate(Activation act, double x) {
  switch (act) {
    case Activation::kRelu:
      return std::max(x, 0.0);
    case Activation::kClip:
      return std::min(std::max(x, -0.5), 0.75);
    case Activation::kLeakyRelu:
      return x < 0 ? 0.1 * x : x;
    default:
      return x;
  }
}

}  // namespace mf::runtime::cpu::testing
