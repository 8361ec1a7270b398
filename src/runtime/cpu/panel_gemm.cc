#include "runtime/cpu/panel_gemm.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "runtime/tensor.h"

namespace mf::runtime::cpu {
namespace {

using Isa = PanelGemm::Isa;
constexpr int64_t kWide = 64;  // AVX-512's panel width
constexpr int kVectors = kWide / 16;
// Rows per tile: in AVX-512, 6 rows x 4 vectors of accumulators, 4 of B and one broadcast fill
// 29 of the 32 registers; in AVX2, 6 x 2, 2 and one fill 15 of 16.
constexpr int kTileRows = 6;
// Rows per group when the threads split many rows (AVX2): a group's chunks of A (24 x 128
// floats, 12 KiB) stay in L1 while every panel's chunk passes them.
constexpr int64_t kGroupRows = 24;
// Up to this many rows the threads split the panels, not the rows.
constexpr int64_t kFewRows = 100;
// Weights up to this size (AVX2): many rows split between the threads, each reading all of B.
constexpr size_t kRowSplitMaxBytes = size_t{1} << 20;
// Rows per group when the threads split the panels of larger weights (AVX2): 192 rows of a
// 128-wide chunk (96 KiB) stay in L2 while the panels pass.
constexpr int64_t kPanelGroupRows = 192;

struct Tile {
  // Row pointers to A's chunks: of chunk i (from the tile's first) at a + i * a_stride, each
  // with the tile's rows in order. AVX-512 tiles run one chunk (kc <= chunk).
  const float* const* a;
  int64_t a_stride;
  const float* b;         // the panel's rows of K that the tile runs: kc x width
  float* c[kTileRows];    // row pointers to the tile's columns
  const float* prefetch;  // this tile's share of the next block of B, to bring into L2 while it runs
  int64_t kc;             // K the tile runs, in chunks of `chunk` (the last may be short)
  int64_t chunk;
  int64_t prefetch_lines;     // lines of `prefetch` to fetch
  int64_t prefetch_step;      // lines fetched per step of k
  __mmask16 masks[kVectors];  // AVX-512: columns of the panel that exist
  int cols;                   // AVX2: columns of the panel that exist
  bool load_c;                // accumulate onto C's current values
  const float* bias;          // added (this panel's columns) when finishing, or null
  Activation act;             // kRelu and kClip run here; others after the store
  float lo, hi;               // kClip's bounds
};

// A line or two of the next chunk per step of k: spread out like this, the prefetches never
// queue up behind each other. A burst of them at the start of a chunk stalled on the line fill
// buffers (2048x512 weights at 49 rows from DRAM: 0.48 ms that way, 0.42 ms this way).
inline void PrefetchStep(const Tile& t, int64_t kk) {
  for (int64_t line = kk * t.prefetch_step; line < (kk + 1) * t.prefetch_step && line < t.prefetch_lines; ++line) {
    _mm_prefetch(reinterpret_cast<const char*>(t.prefetch + line * 16), _MM_HINT_T1);
  }
}

// max/min through their masked forms: GCC 12's plain _mm512_max_ps/_mm512_min_ps read an
// undefined vector that -Werror=maybe-uninitialized rejects.
__attribute__((target("avx512f"))) inline __m512 MaxPs(__m512 a, __m512 b) {
  return _mm512_mask_max_ps(a, 0xFFFF, a, b);
}
__attribute__((target("avx512f"))) inline __m512 MinPs(__m512 a, __m512 b) {
  return _mm512_mask_min_ps(a, 0xFFFF, a, b);
}

template <int R>
__attribute__((target("avx512f"))) void RunTileAvx512(const Tile& t) {
  __m512 acc[R][kVectors];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int v = 0; v < kVectors; ++v) {
      acc[r][v] = t.load_c ? _mm512_maskz_loadu_ps(t.masks[v], t.c[r] + 16 * v) : _mm512_setzero_ps();
    }
  }
  const float* b = t.b;
  for (int64_t kk = 0; kk < t.kc; ++kk, b += kWide) {
    PrefetchStep(t, kk);
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

// Lanes [0, n) of eight set.
__attribute__((target("avx2"))) inline __m256i FirstLanes(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The AVX2 tile: 6 rows x 16 columns. A partial last panel goes through masked loads and stores,
// whole ones through plain ones (masked stores are slow on AMD).
template <int R>
__attribute__((target("avx2,fma"))) void RunTileAvx2(const Tile& t) {
  const bool whole = t.cols == 16;
  const __m256i mask0 = FirstLanes(t.cols), mask1 = FirstLanes(t.cols - 8);
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (!t.load_c) {
      acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    } else if (whole) {
      acc[r][0] = _mm256_loadu_ps(t.c[r]);
      acc[r][1] = _mm256_loadu_ps(t.c[r] + 8);
    } else {
      acc[r][0] = _mm256_maskload_ps(t.c[r], mask0);
      acc[r][1] = _mm256_maskload_ps(t.c[r] + 8, mask1);
    }
  }
  // The accumulators stay in registers across the chunks: C is read and written once per tile.
  const float* b = t.b;
  for (int64_t k0 = 0, i = 0; k0 < t.kc; k0 += t.chunk, ++i) {
    const float* a[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) a[r] = t.a[i * t.a_stride + r];
    const int64_t kc = std::min(t.chunk, t.kc - k0);
    for (int64_t kk = 0; kk < kc; ++kk, b += 16) {
      PrefetchStep(t, k0 + kk);
      const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256 x = _mm256_broadcast_ss(a[r] + kk);
        acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
      }
    }
  }
  if (t.bias) {
    const __m256 bias0 = whole ? _mm256_loadu_ps(t.bias) : _mm256_maskload_ps(t.bias, mask0);
    const __m256 bias1 = whole ? _mm256_loadu_ps(t.bias + 8) : _mm256_maskload_ps(t.bias + 8, mask1);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][0] = _mm256_add_ps(acc[r][0], bias0);
      acc[r][1] = _mm256_add_ps(acc[r][1], bias1);
    }
  }
  if (t.act == Activation::kRelu || t.act == Activation::kClip) {
    const __m256 lo = _mm256_set1_ps(t.act == Activation::kRelu ? 0.f : t.lo);
    const __m256 hi = _mm256_set1_ps(t.act == Activation::kClip ? t.hi : INFINITY);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r][0] = _mm256_min_ps(_mm256_max_ps(acc[r][0], lo), hi);
      acc[r][1] = _mm256_min_ps(_mm256_max_ps(acc[r][1], lo), hi);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (whole) {
      _mm256_storeu_ps(t.c[r], acc[r][0]);
      _mm256_storeu_ps(t.c[r] + 8, acc[r][1]);
    } else {
      _mm256_maskstore_ps(t.c[r], mask0, acc[r][0]);
      _mm256_maskstore_ps(t.c[r] + 8, mask1, acc[r][1]);
    }
  }
}

template <int R>
void RunTile(Isa isa, const Tile& t) {
  if (isa == Isa::kAvx512) {
    RunTileAvx512<R>(t);
  } else {
    RunTileAvx2<R>(t);
  }
}

void RunTileRows(Isa isa, int rows, const Tile& t) {
  switch (rows) {
    case 1:
      return RunTile<1>(isa, t);
    case 2:
      return RunTile<2>(isa, t);
    case 3:
      return RunTile<3>(isa, t);
    case 4:
      return RunTile<4>(isa, t);
    case 5:
      return RunTile<5>(isa, t);
    default:
      return RunTile<6>(isa, t);
  }
}

// Sets the tile's column masks for a panel of which `cols` columns exist.
void SetColumns(Tile& t, int64_t cols) {
  for (int v = 0; v < kVectors; ++v) {
    const int64_t have = std::clamp<int64_t>(cols - 16 * v, 0, 16);
    t.masks[v] = static_cast<__mmask16>((1u << have) - 1);
  }
  t.cols = static_cast<int>(std::min<int64_t>(cols, 16));
}

// ReLU and Clip run in the tile's registers; other activations after the store.
bool ActivatesInTile(Activation act) { return act == Activation::kRelu || act == Activation::kClip; }

// Splits `m` rows into `blocks` tile heights differing by one at most (49 rows: 6,6,6,6,5,5,5,5,5
// and not 8x6+1).
int BlockHeight(int64_t m, int64_t blocks, int64_t block) {
  return static_cast<int>(m / blocks + (block < m % blocks ? 1 : 0));
}

}  // namespace

PanelGemm::Isa PanelGemm::Best() {
  static const Isa best = __builtin_cpu_supports("avx512f")                                 ? Isa::kAvx512
                          : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? Isa::kAvx2
                                                                                            : Isa::kNone;
  return best;
}

int64_t PanelGemm::ChunkFor(int64_t k, int64_t taps) {
  if (taps <= 0 || k % taps != 0) return 0;
  const int64_t c = k / taps;
  if (taps == 1 || c % kMaxChunk == 0) return kMaxChunk;
  if (c % 8 != 0) return 0;
  if (c < kMaxChunk) return c;
  for (int64_t chunk = kMaxChunk / 2;; chunk /= 2) {
    if (c % chunk == 0) return chunk;  // ends at 8 at the latest
  }
}

std::unique_ptr<PanelGemm> PanelGemm::Pack(const float* b, int64_t k, int64_t n, int64_t taps, Isa isa) {
  const int64_t width = PanelWidth(isa), panels = (n + width - 1) / width;
  const size_t bytes = static_cast<size_t>(panels * k * width) * sizeof(float);
  std::shared_ptr<void> storage = AllocateWeightBuffer(bytes);
  if (!storage) return nullptr;
  std::unique_ptr<PanelGemm> gemm(new PanelGemm(k, n, taps, isa, std::move(storage), bytes));
  auto* out = static_cast<float*>(gemm->storage_.get());
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t col0 = p * width, cols = std::min(width, n - col0);
    for (int64_t kk = 0; kk < k; ++kk, out += width) {
      for (int64_t j = 0; j < cols; ++j) out[j] = b[gemm->PlainOffset(kk, col0 + j)];
      std::fill(out + cols, out + width, 0.f);
    }
  }
  return gemm;
}

std::unique_ptr<PanelGemm> PanelGemm::Over(std::shared_ptr<void> storage, int64_t k, int64_t n) {
  const size_t bytes = static_cast<size_t>((n + kWide - 1) / kWide * k * kWide) * sizeof(float);
  return std::unique_ptr<PanelGemm>(new PanelGemm(k, n, 1, Isa::kAvx512, std::move(storage), bytes));
}

void PanelGemm::Unpack(float* b) const {
  for (int64_t p = 0; p < panels(); ++p) {
    const int64_t col0 = p * width_, cols = std::min(width_, n_ - col0);
    const float* in = panel(p);
    for (int64_t kk = 0; kk < k_; ++kk, in += width_) {
      for (int64_t j = 0; j < cols; ++j) b[PlainOffset(kk, col0 + j)] = in[j];
    }
  }
}

void PanelGemm::Run(int64_t m, const Rows& rows, float* c, int64_t ldc, const Epilogue& epilogue) const {
  // Many rows by weights that fit a core's L2 split the rows; larger weights split the panels,
  // so that each thread streams only its share of them (ResNet-18's last stage at batch 8: 392
  // rows by 9 MiB of weights took 19 ms split by rows, every thread reading all of B once per
  // group of rows).
  const bool split_rows = isa_ == Isa::kAvx2 && m > kFewRows && k_ * n_ * sizeof(float) <= kRowSplitMaxBytes;
  const int64_t units = split_rows ? (m + kTileRows - 1) / kTileRows : panels();
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), units));
  // The share of thread t of `team`: whole panels, or rows in whole tiles.
  auto run_share = [&](int64_t t, int64_t team) {
    const int64_t first = units * t / team, last = units * (t + 1) / team;
    if (split_rows) {
      RunRowGroups(first * kTileRows, std::min(m, last * kTileRows), rows, c, ldc, epilogue);
    } else {
      // On AVX2, in groups of rows whose chunks stay in L2 while the thread's panels pass.
      // Groups of even size (196 rows: 98 and 98, not 192 and 4 that pass over all of B again).
      const int64_t groups = isa_ == Isa::kAvx2 ? (m + kPanelGroupRows - 1) / kPanelGroupRows : 1;
      const int64_t group = (m + groups - 1) / groups;
      for (int64_t g0 = 0; g0 < m; g0 += group) {
        RunPanels(first, last, g0, std::min(group, m - g0), rows, c, ldc, epilogue);
      }
    }
  };
  if (threads <= 1 || omp_in_parallel()) {
    run_share(0, 1);
    return;
  }
#pragma omp parallel num_threads(threads)
  run_share(omp_get_thread_num(), omp_get_num_threads());
}

int64_t PanelGemm::KBlock() const {
  if (isa_ == Isa::kAvx512) return chunk_;
  // About 512 of K per tile on AVX2: C is read and written once per block, and the block of a
  // 16-column panel (32 KiB) stays in L1 while the tiles of a group of rows pass over it.
  constexpr int64_t kTarget = 512;
  return std::max<int64_t>(1, kTarget / chunk_) * chunk_;
}

void PanelGemm::RunPanels(int64_t first, int64_t last, int64_t row0, int64_t m, const Rows& rows, float* c, int64_t ldc,
                          const Epilogue& epilogue) const {
  c += row0 * ldc;
  const bool inline_act = ActivatesInTile(epilogue.act.kind);
  const int64_t nblocks = (m + kTileRows - 1) / kTileRows;
  // Every row's every chunk, found once for all the panels: [chunk][row].
  std::vector<const float*> chunk_rows(static_cast<size_t>((k_ + chunk_ - 1) / chunk_ * m));
  for (int64_t k0 = 0; k0 < k_; k0 += chunk_)
    rows.Chunks(row0, m, k0, &chunk_rows[static_cast<size_t>(k0 / chunk_ * m)]);
  const int64_t block = KBlock();
  for (int64_t p = first; p < last; ++p) {
    const int64_t col0 = p * width_, cols = std::min(width_, n_ - col0);
    Tile t{};
    SetColumns(t, cols);
    t.chunk = chunk_;
    t.a_stride = m;
    t.lo = epilogue.act.alpha;
    t.hi = epilogue.act.beta;
    for (int64_t k0 = 0; k0 < k_; k0 += block) {
      t.kc = std::min(block, k_ - k0);
      const bool finish = k0 + t.kc == k_;
      t.b = panel(p) + k0 * width_;
      t.load_c = k0 > 0 || epilogue.accumulate;
      t.bias = finish && epilogue.bias ? epilogue.bias + col0 : nullptr;
      t.act = finish && inline_act ? epilogue.act.kind : Activation::kNone;
      // The chunk after this one (the next panel's first, at the end of this one) is fetched
      // while this one runs, its lines shared out between the row blocks.
      const float* next = !finish ? t.b + t.kc * width_ : (p + 1 < last ? panel(p + 1) : nullptr);
      const int64_t lines = next ? t.kc * width_ / 16 : 0, lines_per_block = (lines + nblocks - 1) / nblocks;
      t.prefetch_step = (lines_per_block + t.kc - 1) / t.kc;
      for (int64_t block = 0, r0 = 0; block < nblocks; ++block) {
        const int height = BlockHeight(m, nblocks, block);
        for (int r = 0; r < height; ++r) t.c[r] = c + (r0 + r) * ldc + col0;
        t.a = &chunk_rows[static_cast<size_t>(k0 / chunk_ * m + r0)];
        const int64_t first_line = std::min(lines, block * lines_per_block);
        t.prefetch = next + first_line * 16;
        t.prefetch_lines = std::min(lines_per_block, lines - first_line);
        RunTileRows(isa_, height, t);
        r0 += height;
      }
    }
    if (!inline_act && epilogue.act.kind != Activation::kNone) {
      for (int64_t r = 0; r < m; ++r) ApplyActivation(epilogue.act, c + r * ldc + col0, cols);
    }
  }
}

void PanelGemm::RunRowGroups(int64_t first, int64_t last, const Rows& rows, float* c, int64_t ldc,
                             const Epilogue& epilogue) const {
  const bool inline_act = ActivatesInTile(epilogue.act.kind);
  const int64_t block = KBlock();
  // The group's rows' chunks of one block of K: [chunk][row].
  std::vector<const float*> chunk_rows(static_cast<size_t>(block / chunk_ * kGroupRows));
  Tile t{};
  t.chunk = chunk_;
  t.lo = epilogue.act.alpha;
  t.hi = epilogue.act.beta;
  for (int64_t g0 = first; g0 < last; g0 += kGroupRows) {
    const int64_t gm = std::min(kGroupRows, last - g0), nblocks = (gm + kTileRows - 1) / kTileRows;
    t.a_stride = gm;
    for (int64_t k0 = 0; k0 < k_; k0 += block) {
      t.kc = std::min(block, k_ - k0);
      const bool finish = k0 + t.kc == k_;
      t.load_c = k0 > 0 || epilogue.accumulate;
      t.act = finish && inline_act ? epilogue.act.kind : Activation::kNone;
      for (int64_t i = 0; i * chunk_ < t.kc; ++i) rows.Chunks(g0, gm, k0 + i * chunk_, &chunk_rows[i * gm]);
      for (int64_t p = 0; p < panels(); ++p) {
        const int64_t col0 = p * width_;
        SetColumns(t, std::min(width_, n_ - col0));
        t.b = panel(p) + k0 * width_;
        t.bias = finish && epilogue.bias ? epilogue.bias + col0 : nullptr;
        for (int64_t block = 0, r0 = 0; block < nblocks; ++block) {
          const int height = BlockHeight(gm, nblocks, block);
          for (int r = 0; r < height; ++r) t.c[r] = c + (g0 + r0 + r) * ldc + col0;
          t.a = &chunk_rows[r0];
          RunTileRows(isa_, height, t);
          r0 += height;
        }
      }
    }
    if (!inline_act && epilogue.act.kind != Activation::kNone) {
      for (int64_t r = g0; r < g0 + gm; ++r) ApplyActivation(epilogue.act, c + r * ldc, n_);
    }
  }
}

}  // namespace mf::runtime::cpu
