// A model loaded as written (no graph rewrites) and optimized, and what the two compute: for the
// tests that check that a rewrite or a layout choice changes no result.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/session.h"

namespace mf::runtime::testing {

// Null where a load failed (the failure is reported).
inline std::pair<std::unique_ptr<Session>, std::unique_ptr<Session>> LoadPlainAndOptimized(const std::string& model) {
  SessionOptions unoptimized;
  unoptimized.optimize = false;
  auto plain = Session::LoadFromBytes(model, "", unoptimized);
  auto optimized = Session::LoadFromBytes(model, "", SessionOptions{});
  EXPECT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(optimized.ok()) << optimized.status().ToString();
  return {plain.ok() ? std::move(*plain) : nullptr, optimized.ok() ? std::move(*optimized) : nullptr};
}

// Runs both on `inputs` and checks that every output has the same shape and that each element
// agrees within abs_tolerance + rel_tolerance * |plain's|; reports the first disagreement of
// each output with `context`. Returns the plain session's outputs (empty when a run failed).
inline std::vector<Tensor> ExpectSameOutputs(const Session& plain, const Session& optimized,
                                             const std::vector<const Tensor*>& inputs, double abs_tolerance,
                                             double rel_tolerance, const std::string& context) {
  std::vector<Tensor> a, b;
  Status sa = plain.Run(inputs, &a);
  Status sb = optimized.Run(inputs, &b);
  EXPECT_TRUE(sa.ok()) << context << ": " << sa.ToString();
  EXPECT_TRUE(sb.ok()) << context << ": " << sb.ToString();
  if (!sa.ok() || !sb.ok()) return {};
  EXPECT_EQ(a.size(), b.size()) << context;
  for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
    EXPECT_EQ(a[k].shape(), b[k].shape()) << context << ", output " << k;
    if (a[k].shape() != b[k].shape()) continue;
    for (int64_t i = 0; i < a[k].num_elements(); ++i) {
      const double x = a[k].data<float>()[i], y = b[k].data<float>()[i];
      if (std::fabs(x - y) > abs_tolerance + rel_tolerance * std::fabs(x)) {
        ADD_FAILURE() << context << ", output " << k << " element " << i << " of " << ShapeToString(a[k].shape())
                      << ": " << x << " as written, " << y << " optimized";
        break;
      }
    }
  }
  return a;
}

}  // namespace mf::runtime::testing
