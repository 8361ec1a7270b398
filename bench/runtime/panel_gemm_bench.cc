// PanelGemm (the CPU convolutions' and constant-weight products' kernel) against oneDNN's sgemm,
// one thread, on the shapes of ResNet-50's 1x1 layers and a wide 3x3 layer as im2col would see
// it: rows x K x N, A and C row-major, B constant (packed once, outside the timing, for both).
// GFLOP/s per shape; the ratio to read is PanelGemm's over sgemm's at the same shape.
//
//   build/bench/runtime/panel_gemm_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <vector>

#include "runtime/cpu/panel_gemm.h"
#include "tests/unit/runtime/random_values.h"

namespace mf::runtime::cpu {
namespace {

struct Shape {
  int64_t rows, k, n;
};

// ResNet-50 at batch 1: 1x1 layers at 7x7 and 14x14 (expand, reduce), a stage-2 1x1 at 28x28,
// and a 3x3 of 64 channels at 56x56 as im2col rows (K = 9 x 64).
constexpr Shape kShapes[] = {{49, 2048, 512},  {49, 512, 2048}, {196, 1024, 256},
                             {196, 256, 1024}, {784, 512, 128}, {3136, 576, 64}};

void SetFlops(benchmark::State& state, const Shape& s) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(s.rows * s.k * s.n), benchmark::Counter::kIsIterationInvariantRate,
                         benchmark::Counter::kIs1000);
}

void BM_PanelGemm(benchmark::State& state) {
  const Shape& s = kShapes[state.range(0)];
  if (PanelGemm::Best() == PanelGemm::Isa::kNone) {
    state.SkipWithError("no AVX2 or AVX-512 on this CPU");
    return;
  }
  omp_set_num_threads(1);
  const std::vector<float> a = testing::RandomValues(static_cast<size_t>(s.rows * s.k), 1),
                           b = testing::RandomValues(static_cast<size_t>(s.k * s.n), 2);
  std::vector<float> c(static_cast<size_t>(s.rows * s.n));
  auto gemm = PanelGemm::Pack(b.data(), s.k, s.n, 1);  // b read as [N, K]: the same FLOPs
  const PanelGemm::MatrixRows rows(a.data(), s.k);
  for (auto _ : state) {
    gemm->Run(s.rows, rows, c.data(), s.n, PanelGemm::Epilogue{});
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, s);
  state.SetLabel(std::to_string(s.rows) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n));
}

void BM_OneDnnSgemm(benchmark::State& state) {
  const Shape& s = kShapes[state.range(0)];
  omp_set_num_threads(1);
  const std::vector<float> a = testing::RandomValues(static_cast<size_t>(s.rows * s.k), 1),
                           b = testing::RandomValues(static_cast<size_t>(s.k * s.n), 2);
  std::vector<float> c(static_cast<size_t>(s.rows * s.n));
  for (auto _ : state) {
    dnnl_sgemm('N', 'N', s.rows, s.n, s.k, 1.f, a.data(), s.k, b.data(), s.n, 0.f, c.data(), s.n);
    benchmark::DoNotOptimize(c.data());
  }
  SetFlops(state, s);
  state.SetLabel(std::to_string(s.rows) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n));
}

BENCHMARK(BM_PanelGemm)->DenseRange(0, std::size(kShapes) - 1)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OneDnnSgemm)->DenseRange(0, std::size(kShapes) - 1)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mf::runtime::cpu

BENCHMARK_MAIN();
