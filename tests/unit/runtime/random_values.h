// Deterministic random test values, for the model builder's weights and the kernel tests' inputs.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace mf::runtime::testing {

// `n` values uniform in [-1, 1), deterministic in `seed`.
inline std::vector<float> RandomValues(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace mf::runtime::testing
