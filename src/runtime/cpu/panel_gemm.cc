#include "runtime/cpu/panel_gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "runtime/tensor.h"

namespace mf::runtime::cpu {
namespace {

constexpr int64_t kPanel = PanelGemm::kPanel;
constexpr int kVectors = kPanel / 16;
// Rows per tile: 6 rows x 4 vectors of accumulators, 4 of B and one broadcast fill 29 of the
// 32 registers.
constexpr int kTileRows = 6;
// K per chunk: a 128 x 64 chunk of a panel (32 KiB) stays in L1 while every row block reads it.
constexpr int64_t kChunk = PanelGemm::kChunk;

struct Tile {
  const float* const* a;  // kTileRows row pointers, already offset to the chunk
  const float* b;         // the panel's chunk: kc x 64
  float* c[kTileRows];    // row pointers to the tile's 64 columns
  const float* prefetch;  // this tile's share of the next chunk, to bring into L2 while it runs
  int64_t kc;
  int64_t prefetch_lines;     // lines of `prefetch` to fetch
  int64_t prefetch_step;      // lines fetched per step of k
  __mmask16 masks[kVectors];  // columns of the panel that exist
  bool load_c;                // accumulate onto C's current values
  const float* bias;          // added (this panel's columns) when finishing, or null
  Activation act;             // kRelu and kClip run here; others after the store
  float lo, hi;               // kClip's bounds
};

// max/min through their masked forms: GCC 12's plain _mm512_max_ps/_mm512_min_ps read an
// undefined vector that -Werror=maybe-uninitialized rejects.
__attribute__((target("avx512f"))) inline __m512 MaxPs(__m512 a, __m512 b) {
  return _mm512_mask_max_ps(a, 0xFFFF, a, b);
}
__attribute__((target("avx512f"))) inline __m512 MinPs(__m512 a, __m512 b) {
  return _mm512_mask_min_ps(a, 0xFFFF, a, b);
}

template <int R>
__attribute__((target("avx512f"))) void RunTile(const Tile& t) {
  __m512 acc[R][kVectors];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v) {
      acc[r][v] = t.load_c ? _mm512_maskz_loadu_ps(t.masks[v], t.c[r] + 16 * v) : _mm512_setzero_ps();
    }
  }
  const float* b = t.b;
  for (int64_t kk = 0; kk < t.kc; ++kk, b += kPanel) {
    // A line or two of the next chunk per step: spread out like this, the prefetches never queue
    // up behind each other. A burst of them at the start of a chunk stalled on the line fill
    // buffers (2048x512 weights at 49 rows from DRAM: 0.48 ms that way, 0.42 ms this way).
    for (int64_t line = kk * t.prefetch_step; line < (kk + 1) * t.prefetch_step && line < t.prefetch_lines; ++line) {
      _mm_prefetch(reinterpret_cast<const char*>(t.prefetch + line * 16), _MM_HINT_T1);
    }
    const __m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16), b2 = _mm512_loadu_ps(b + 32),
                 b3 = _mm512_loadu_ps(b + 48);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(t.a[r][kk]);
      acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(a, b2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(a, b3, acc[r][3]);
    }
  }
  if (t.bias) {
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v) {
      const __m512 bias = _mm512_maskz_loadu_ps(t.masks[v], t.bias + 16 * v);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][v] = _mm512_add_ps(acc[r][v], bias);
    }
  }
  if (t.act == Activation::kRelu || t.act == Activation::kClip) {
    const __m512 lo = _mm512_set1_ps(t.act == Activation::kRelu ? 0.f : t.lo);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int v = 0; v < kVectors; ++v) acc[r][v] = MaxPs(acc[r][v], lo);
    }
    if (t.act == Activation::kClip) {
      const __m512 hi = _mm512_set1_ps(t.hi);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int v = 0; v < kVectors; ++v) acc[r][v] = MinPs(acc[r][v], hi);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v) _mm512_mask_storeu_ps(t.c[r] + 16 * v, t.masks[v], acc[r][v]);
  }
}

void RunTileRows(int rows, const Tile& t) {
  switch (rows) {
    case 1:
      return RunTile<1>(t);
    case 2:
      return RunTile<2>(t);
    case 3:
      return RunTile<3>(t);
    case 4:
      return RunTile<4>(t);
    case 5:
      return RunTile<5>(t);
    default:
      return RunTile<6>(t);
  }
}

}  // namespace

bool PanelGemm::Supported() {
  static const bool supported = __builtin_cpu_supports("avx512f");
  return supported;
}

std::unique_ptr<PanelGemm> PanelGemm::Pack(const float* b, int64_t k, int64_t n, int64_t taps) {
  const int64_t panels = (n + kPanel - 1) / kPanel;
  const size_t bytes = static_cast<size_t>(panels * k * kPanel) * sizeof(float);
  std::shared_ptr<void> storage = AllocateWeightBuffer(bytes);
  if (!storage) return nullptr;
  std::unique_ptr<PanelGemm> gemm(new PanelGemm(k, n, taps, std::move(storage), bytes));
  auto* out = static_cast<float*>(gemm->storage_.get());
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t col0 = p * kPanel, cols = std::min(kPanel, n - col0);
    for (int64_t kk = 0; kk < k; ++kk, out += kPanel) {
      for (int64_t j = 0; j < cols; ++j) out[j] = b[gemm->PlainOffset(kk, col0 + j)];
      std::fill(out + cols, out + kPanel, 0.f);
    }
  }
  return gemm;
}

std::unique_ptr<PanelGemm> PanelGemm::Over(std::shared_ptr<void> storage, int64_t k, int64_t n) {
  const size_t bytes = static_cast<size_t>((n + kPanel - 1) / kPanel * k * kPanel) * sizeof(float);
  return std::unique_ptr<PanelGemm>(new PanelGemm(k, n, 1, std::move(storage), bytes));
}

void PanelGemm::Unpack(float* b) const {
  for (int64_t p = 0; p * kPanel < n_; ++p) {
    const int64_t col0 = p * kPanel, cols = std::min(kPanel, n_ - col0);
    const float* in = panel(p);
    for (int64_t kk = 0; kk < k_; ++kk, in += kPanel) {
      for (int64_t j = 0; j < cols; ++j) b[PlainOffset(kk, col0 + j)] = in[j];
    }
  }
}

void PanelGemm::Run(int64_t m, const Rows& rows, float* c, int64_t ldc, const Epilogue& epilogue) const {
  const int64_t panels = (n_ + kPanel - 1) / kPanel;
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), panels));
  if (threads <= 1 || omp_in_parallel()) {
    RunPanels(0, panels, m, rows, c, ldc, epilogue);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), team = omp_get_num_threads();
    RunPanels(panels * t / team, panels * (t + 1) / team, m, rows, c, ldc, epilogue);
  }
}

void PanelGemm::RunPanels(int64_t first, int64_t last, int64_t m, const Rows& rows, float* c, int64_t ldc,
                          const Epilogue& epilogue) const {
  const bool inline_act = epilogue.act.kind == Activation::kRelu || epilogue.act.kind == Activation::kClip;
  const int64_t nblocks = (m + kTileRows - 1) / kTileRows;
  const float* chunk_rows[kTileRows];
  for (int64_t p = first; p < last; ++p) {
    const int64_t col0 = p * kPanel, cols = std::min(kPanel, n_ - col0);
    Tile t{};
    for (int v = 0; v < kVectors; ++v) {
      const int64_t have = std::clamp<int64_t>(cols - 16 * v, 0, 16);
      t.masks[v] = static_cast<__mmask16>((1u << have) - 1);
    }
    t.lo = epilogue.act.alpha;
    t.hi = epilogue.act.beta;
    for (int64_t k0 = 0; k0 < k_; k0 += kChunk) {
      t.kc = std::min(kChunk, k_ - k0);
      const bool finish = k0 + t.kc == k_;
      t.b = panel(p) + k0 * kPanel;
      t.load_c = k0 > 0 || epilogue.accumulate;
      t.bias = finish && epilogue.bias ? epilogue.bias + col0 : nullptr;
      t.act = finish && inline_act ? epilogue.act.kind : Activation::kNone;
      // The chunk after this one (the next panel's first, at the end of this one) is fetched
      // while this one runs, its lines shared out between the row blocks.
      const float* next = !finish ? t.b + t.kc * kPanel : (p + 1 < last ? panel(p + 1) : nullptr);
      const int64_t lines = next ? t.kc * kPanel / 16 : 0, lines_per_block = (lines + nblocks - 1) / nblocks;
      t.prefetch_step = (lines_per_block + t.kc - 1) / t.kc;
      for (int64_t block = 0, r0 = 0; block < nblocks; ++block) {
        const int height = static_cast<int>(m / nblocks + (block < m % nblocks ? 1 : 0));
        for (int r = 0; r < height; ++r) {
          chunk_rows[r] = rows.Chunk(r0 + r, k0);
          t.c[r] = c + (r0 + r) * ldc + col0;
        }
        t.a = chunk_rows;
        const int64_t first_line = std::min(lines, block * lines_per_block);
        t.prefetch = next + first_line * 16;
        t.prefetch_lines = std::min(lines_per_block, lines - first_line);
        RunTileRows(height, t);
        r0 += height;
      }
    }
    if (!inline_act && epilogue.act.kind != Activation::kNone) {
      for (int64_t r = 0; r < m; ++r) ApplyActivation(epilogue.act, c + r * ldc + col0, cols);
    }
  }
}

}  // namespace mf::runtime::cpu
