// WinogradConv against a direct 3x3 convolution in double, for each kernel the CPU runs (AVX-512,
// AVX2): odd output sizes (a last row and column of tiles half outside), padding on one side only
// and none, channel counts that are not multiples of the vector width or of PanelGemm's chunk,
// both ways of sharing the work (the threads splitting the tiles in several blocks each; few
// tiles or large weights in groups, the threads splitting the panels), bias, accumulation onto
// the output and each activation path (clamped in the transform, applied after it).
#include "runtime/cpu/winograd_conv.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/runtime/kernel_reference.h"

namespace mf::runtime::cpu {
namespace {

struct Case {
  int64_t n, h, w, c, m, pad_top, pad_left, pad_bottom, pad_right;
  bool bias, accumulate;
  Activation act;
};

using testing::Activate;
using testing::RandomValues;

std::string Describe(const Case& k) {
  return std::to_string(k.n) + "x" + std::to_string(k.h) + "x" + std::to_string(k.w) + "x" + std::to_string(k.c) +
         " -> " + std::to_string(k.m) + " pads " + std::to_string(k.pad_top) + "," + std::to_string(k.pad_left) + "," +
         std::to_string(k.pad_bottom) + "," + std::to_string(k.pad_right) + (k.bias ? " bias" : "") +
         (k.accumulate ? " accumulate" : "") + " act " + std::to_string(static_cast<int>(k.act));
}

void Check(const Case& k, PanelGemm::Isa isa) {
  SCOPED_TRACE(Describe(k));
  const WinogradConv::Shape s{
      k.n, k.h, k.w, k.h + k.pad_top + k.pad_bottom - 2, k.w + k.pad_left + k.pad_right - 2, k.pad_top, k.pad_left};
  const std::vector<float> x = RandomValues(static_cast<size_t>(k.n * k.h * k.w * k.c), 1);  // NHWC
  const std::vector<float> w = RandomValues(static_cast<size_t>(k.m * k.c * 9), 2);          // [M, C, 3, 3]
  const std::vector<float> bias = RandomValues(static_cast<size_t>(k.m), 3);
  const size_t out_size = static_cast<size_t>(k.n * s.oh * s.ow * k.m);
  std::vector<float> y = k.accumulate ? RandomValues(out_size, 4) : std::vector<float>(out_size, NAN);
  const std::vector<float> old = y;
  std::unique_ptr<WinogradConv> conv = WinogradConv::Pack(w.data(), k.m, k.c, isa);
  ASSERT_NE(conv, nullptr);
  PanelGemm::Epilogue epilogue;
  epilogue.bias = k.bias ? bias.data() : nullptr;
  epilogue.accumulate = k.accumulate;
  epilogue.act = testing::TestActivation(k.act);
  conv->Run(s, x.data(), y.data(), epilogue);
  for (int64_t image = 0; image < k.n; ++image) {
    for (int64_t oy = 0; oy < s.oh; ++oy) {
      for (int64_t ox = 0; ox < s.ow; ++ox) {
        for (int64_t m = 0; m < k.m; ++m) {
          double sum = 0, magnitude = 0;
          for (int64_t ky = 0; ky < 3; ++ky) {
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t iy = oy + ky - k.pad_top, ix = ox + kx - k.pad_left;
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              for (int64_t c = 0; c < k.c; ++c) {
                const double term = double{x[static_cast<size_t>(((image * k.h + iy) * k.w + ix) * k.c + c)]} *
                                    w[static_cast<size_t>(((m * k.c + c) * 3 + ky) * 3 + kx)];
                sum += term;
                magnitude += std::fabs(term);
              }
            }
          }
          const size_t at = static_cast<size_t>(((image * s.oh + oy) * s.ow + ox) * k.m + m);
          if (k.bias) sum += bias[static_cast<size_t>(m)];
          if (k.accumulate) sum += old[at];
          const double expected = Activate(k.act, sum);
          // The transforms add and subtract up to 16 terms: a few float roundings of the terms'
          // magnitude, not of the (possibly cancelling) sum's.
          ASSERT_NEAR(y[at], expected, 1e-5 * (magnitude + 1))
              << "image " << image << " pixel " << oy << "," << ox << " channel " << m;
        }
      }
    }
  }
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      // n, h, w, c, m, pads (top, left, bottom, right), bias, accumulate, act
      {1, 7, 5, 8, 16, 1, 1, 1, 1, false, false, Activation::kNone},        // odd sizes, one thread
      {1, 6, 6, 5, 3, 0, 0, 0, 0, true, false, Activation::kRelu},          // no padding, tiny channels
      {2, 9, 8, 13, 20, 2, 0, 1, 2, true, true, Activation::kClip},         // one-sided padding
      {2, 30, 30, 64, 64, 1, 1, 1, 1, true, false, Activation::kRelu},      // both threads
      {1, 33, 31, 136, 70, 1, 1, 1, 1, false, true, Activation::kRelu},     // several blocks, short chunk
      {3, 12, 14, 24, 40, 1, 1, 1, 1, true, true, Activation::kLeakyRelu},  // activation after
      {1, 16, 28, 512, 128, 1, 1, 1, 1, true, true, Activation::kRelu},     // large weights: two groups
  };
  return cases;
}

TEST(WinogradConv, MatchesDirectConvolutionOnThisCpusKernel) {
  if (PanelGemm::Best() == PanelGemm::Isa::kNone) GTEST_SKIP() << "no AVX2 with FMA here";
  for (const Case& k : Cases()) Check(k, PanelGemm::Best());
}

TEST(WinogradConv, MatchesDirectConvolutionOnTheAvx2Kernel) {
  if (PanelGemm::Best() == PanelGemm::Isa::kNone) GTEST_SKIP() << "no AVX2 with FMA here";
  for (const Case& k : Cases()) Check(k, PanelGemm::Isa::kAvx2);
}

TEST(WinogradConv, UnpacksTheWeightsItWasGiven) {
  if (PanelGemm::Best() == PanelGemm::Isa::kNone) GTEST_SKIP() << "no AVX2 with FMA here";
  const std::vector<float> w = RandomValues(70 * 13 * 9, 5);
  std::unique_ptr<WinogradConv> conv = WinogradConv::Pack(w.data(), 70, 13);
  ASSERT_NE(conv, nullptr);
  std::vector<float> back(w.size());
  conv->Unpack(back.data());
  for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(back[i], w[i], 1e-6) << i;
}

}  // namespace
}  // namespace mf::runtime::cpu
