// PanelGemm against a product in double, for each kernel the CPU runs (AVX-512, AVX2): every
// tile height (1-6 rows and uneven splits), K around the chunk size, N around the panel width
// (masked last panel), A rows that are not contiguous, B packed from taps, many rows split
// between the threads (small B) or in groups over split panels (large B), bias, accumulation
// onto C and each activation path (in the tile, after it).
#include "runtime/cpu/panel_gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "tests/unit/runtime/kernel_reference.h"

namespace mf::runtime::cpu {
namespace {

struct Case {
  int64_t m, k, n, span;  // span: how A's rows are stored (SpacedRows); 0 for whole rows
  bool bias, accumulate;
  Activation act;
  int64_t taps = 1;  // B packed from [N, K / taps, taps]
};

using testing::Activate;
using testing::RandomValues;

// A's rows in runs of `span` values (a multiple of kChunk, or K), each run apart from the
// others in a bigger buffer, so a kernel that reads past a run (or takes rows as contiguous)
// reads other values and fails.
class SpacedRows final : public PanelGemm::Rows {
 public:
  SpacedRows(int64_t m, int64_t k, int64_t span, unsigned seed)
      : k_(k),
        span_(span),
        runs_((k + span - 1) / span),
        data_(RandomValues(static_cast<size_t>(m * runs_ * (span + 7)), seed)) {}
  const float* Chunk(int64_t r, int64_t k0) const override {
    return data_.data() + (r * runs_ + k0 / span_) * (span_ + 7) + k0 % span_;
  }
  double Value(int64_t r, int64_t kk) const { return Chunk(r, kk - kk % span_)[kk % span_]; }

 private:
  int64_t k_, span_, runs_;
  std::vector<float> data_;
};

std::string Name(const Case& c) {
  return "m " + std::to_string(c.m) + " k " + std::to_string(c.k) + " n " + std::to_string(c.n) + " span " +
         std::to_string(c.span) + " taps " + std::to_string(c.taps) + (c.bias ? " bias" : "") +
         (c.accumulate ? " accumulate" : "") + " act " + std::to_string(static_cast<int>(c.act));
}

// B(kk, j) of a [N, K / taps, taps] tensor: k = tap * C + c reads w[j, c, tap].
double BAt(const std::vector<float>& w, const Case& c, int64_t kk, int64_t j) {
  const int64_t channels = c.k / c.taps;
  return w[static_cast<size_t>(j * c.k + kk % channels * c.taps + kk / channels)];
}

void RunCase(const Case& c, PanelGemm::Isa isa) {
  const std::vector<float> w = RandomValues(static_cast<size_t>(c.k * c.n), 1);
  const std::vector<float> bias = RandomValues(static_cast<size_t>(c.n), 2);
  const SpacedRows rows(c.m, c.k, c.span ? c.span : c.k, 3);
  const int64_t ldc = c.n + 5;
  std::vector<float> out = RandomValues(static_cast<size_t>(c.m * ldc), 4);
  const std::vector<float> before = out;

  std::unique_ptr<PanelGemm> gemm = PanelGemm::Pack(w.data(), c.k, c.n, c.taps, isa);
  ASSERT_NE(gemm, nullptr);
  PanelGemm::Epilogue epilogue;
  epilogue.bias = c.bias ? bias.data() : nullptr;
  epilogue.accumulate = c.accumulate;
  epilogue.act = testing::TestActivation(c.act);
  gemm->Run(c.m, rows, out.data(), ldc, epilogue);

  for (int64_t r = 0; r < c.m; ++r) {
    for (int64_t j = 0; j < ldc; ++j) {
      const size_t at = static_cast<size_t>(r * ldc + j);
      if (j >= c.n) {  // past the last column: untouched
        ASSERT_EQ(out[at], before[at]) << "row " << r << " column " << j;
        continue;
      }
      double want = c.accumulate ? before[at] : 0.0;
      for (int64_t kk = 0; kk < c.k; ++kk) want += rows.Value(r, kk) * BAt(w, c, kk, j);
      if (c.bias) want += bias[static_cast<size_t>(j)];
      want = Activate(c.act, want);
      ASSERT_NEAR(out[at], want, 1e-4 * (1 + std::sqrt(double(c.k)))) << "row " << r << " column " << j;
    }
  }
  // Unpacking gives the weights back exactly.
  std::vector<float> unpacked(w.size());
  gemm->Unpack(unpacked.data());
  ASSERT_EQ(unpacked, w);
}

TEST(PanelGemmTest, MatchesTheProductInDouble) {
  if (PanelGemm::Best() == PanelGemm::Isa::kNone) GTEST_SKIP() << "neither AVX-512 nor AVX2 on this CPU";
  const Case cases[] = {
      {1, 1, 1, 0, false, false, Activation::kNone},
      {1, 128, 64, 0, true, false, Activation::kRelu},
      {5, 127, 63, 0, true, true, Activation::kNone},
      {6, 129, 65, 0, false, true, Activation::kRelu},
      {7, 300, 130, 0, true, false, Activation::kClip},
      {13, 256, 200, 0, true, true, Activation::kLeakyRelu},
      {49, 520, 1000, 0, true, true, Activation::kRelu},
      {100, 64, 129, 0, false, false, Activation::kClip},
      {2, 1000, 17, 0, true, false, Activation::kNone},
      {30, 1152, 70, 128, true, false, Activation::kRelu},  // runs of 128 (taps of 128 channels)
      {60, 1152, 70, 384, true, true, Activation::kNone},   // runs of 384
      {150, 600, 64, 0, true, false, Activation::kNone},    // more rows than the AVX-512 path is made for
      // Taps of fewer channels than a chunk (one chunk per tap), and of 192 (chunks of 64).
      {9, 576, 40, 64, true, false, Activation::kRelu, 9},
      {20, 1728, 33, 64, false, true, Activation::kClip, 9},
      // Many rows by small weights: split between the threads (AVX2), in groups of 24 and a rest.
      {301, 576, 70, 64, true, true, Activation::kRelu, 9},
      {107, 200, 16, 0, true, false, Activation::kLeakyRelu},
      // Many rows by weights past L2 (AVX2): split panels, rows in groups of 192 and a rest.
      {400, 2304, 130, 256, true, true, Activation::kRelu, 9},
  };
  std::vector<PanelGemm::Isa> kernels = {PanelGemm::Isa::kAvx2};
  if (PanelGemm::Best() == PanelGemm::Isa::kAvx512) kernels.push_back(PanelGemm::Isa::kAvx512);
  for (PanelGemm::Isa isa : kernels) {
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      for (const Case& c : cases) {
        SCOPED_TRACE(Name(c) + " threads " + std::to_string(threads) + " isa " + std::to_string(static_cast<int>(isa)));
        RunCase(c, isa);
      }
    }
  }
  omp_set_num_threads(omp_get_num_procs());
}

}  // namespace
}  // namespace mf::runtime::cpu
