// A product of few rows by large constant weights, C[M, N] = A[M, K] * B[K, N], for batch-1
// shaped work: ResNet's last stage (49 output pixels against 1-9 MiB of weights per 1x1 or 3x3
// convolution). There the weights come from DRAM on every run, and oneDNN's kernels stall on
// them: 2048x512 weights at 49 rows take 1.02 ms on one core when cold against 0.73 ms when
// cached.
// Here B is packed once into panels of 64 columns (each K x 64, contiguous), the threads split
// the panels between them (each reads only its own weights), and a panel is consumed in chunks of
// K small enough for L1, so that its one pass from DRAM is a sequential stream the prefetchers
// keep ahead of, and every later row block reads it from cache (MLAS, which ONNX Runtime runs,
// also packs B into column panels).
//
// On AVX-512 it is made for few rows (up to about a hundred): with hundreds, where B is read
// from cache anyway, oneDNN's brgemm is as fast or faster. On AVX2 alone (AMD Zen 3, say),
// oneDNN 2.6 has no brgemm, and its direct convolutions ran ResNet-18 at 0.60x ONNX Runtime's
// speed: there every row count runs here. Many rows by weights that fit a core's L2 are split
// between the threads in groups of 24, each group's chunks of A staying in L1 while every panel
// passes (BLIS-style blocking); larger weights still split the panels, the rows in groups that
// stay in L2. Elsewhere Best() is kNone, and callers keep oneDNN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/cpu/activation.h"

namespace mf::runtime::cpu {

class PanelGemm {
 public:
  static constexpr int64_t kMaxChunk = 128;  // K per step through a panel, at most (see Rows)

  // The kernels: 6 rows by a 64-column panel in AVX-512 registers, or by a 16-column one in
  // AVX2's.
  enum class Isa { kNone, kAvx2, kAvx512 };
  static Isa Best();  // the widest this CPU runs
  static int64_t PanelWidth(Isa isa) { return isa == Isa::kAvx512 ? 64 : 16; }

  // K per chunk for K = taps x C (k = tap * C + c): kMaxChunk, or for taps of fewer channels a
  // divisor of C, so that no chunk straddles two taps; 0 when there is none worth running (C not
  // a multiple of 8). The AVX2 tile runs several chunks in one pass (KBlock).
  static int64_t ChunkFor(int64_t k, int64_t taps);

  // Where A's values are: those of row r from k0 (a multiple of chunk()) to k0 + chunk() - 1, or
  // K - 1, are contiguous at Chunk(r, k0). Rows need not be stored anywhere as a whole: a
  // convolution's are gathered from the taps of its input (im2col, without the copy).
  class Rows {
   public:
    virtual ~Rows() = default;
    virtual const float* Chunk(int64_t row, int64_t k0) const = 0;
    // Chunk(first + i, k0) for i in [0, count), into `out`: for rows whose addresses are cheaper
    // to step through than to compute one by one (a convolution's pixels).
    virtual void Chunks(int64_t first, int64_t count, int64_t k0, const float** out) const {
      for (int64_t i = 0; i < count; ++i) out[i] = Chunk(first + i, k0);
    }
  };

  // A's rows as they lie in a row-major matrix, `stride` floats apart.
  class MatrixRows final : public Rows {
   public:
    MatrixRows(const float* a, int64_t stride) : a_(a), stride_(stride) {}
    const float* Chunk(int64_t row, int64_t k0) const override { return a_ + row * stride_ + k0; }

   private:
    const float* a_;
    int64_t stride_;
  };

  // Packs B from a plain [N, K / taps, taps] tensor (a convolution's [M, C, kh, kw] weights;
  // [N, K] row-major with taps = 1): B(k, n) for k = tap * (K / taps) + c is b[n, c, tap], so
  // that each tap's channels are a contiguous run of K (see Rows), for the kernel `isa` (not
  // kNone; ChunkFor(k, taps) must not be 0). Null when out of memory.
  static std::unique_ptr<PanelGemm> Pack(const float* b, int64_t k, int64_t n, int64_t taps, Isa isa = Best());

  // Writes B back into that plain layout (to pack it another way).
  void Unpack(float* b) const;

  // AVX-512 panels over `storage` packed by someone else, for a [N, K] (taps = 1) B: oneDNN's
  // matmul packs its weights as BA16a64b, which for K a multiple of 16 is these very bytes, so
  // one copy serves both (ConvKernel).
  static std::unique_ptr<PanelGemm> Over(std::shared_ptr<void> storage, int64_t k, int64_t n);
  const std::shared_ptr<void>& storage() const { return storage_; }

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  Isa isa() const { return isa_; }
  size_t bytes() const { return bytes_; }

  // What happens to each output row after the product: C = act(A * B + bias [+ C's old value]).
  struct Epilogue {
    const float* bias = nullptr;  // [N], or null
    bool accumulate = false;      // add to C's old value (a residual already in place)
    ActivationParams act;
  };

  // C rows r in [0, m), row r of C at c + r * ldc, from A's `rows`. The OpenMP team splits the
  // panels (each thread reads only its share of B), or on AVX2 many rows by weights up to 1 MiB.
  void Run(int64_t m, const Rows& rows, float* c, int64_t ldc, const Epilogue& epilogue) const;

 private:
  PanelGemm(int64_t k, int64_t n, int64_t taps, Isa isa, std::shared_ptr<void> storage, size_t bytes)
      : k_(k),
        n_(n),
        taps_(taps),
        isa_(isa),
        width_(PanelWidth(isa)),
        chunk_(ChunkFor(k, taps)),
        storage_(std::move(storage)),
        bytes_(bytes) {}
  int64_t PlainOffset(int64_t kk, int64_t col) const {  // of B(kk, col) in the plain layout
    const int64_t c = k_ / taps_;
    return col * k_ + (kk % c) * taps_ + kk / c;
  }
  int64_t KBlock() const;  // K per tile: one chunk on AVX-512, several on AVX2
  int64_t panels() const { return (n_ + width_ - 1) / width_; }
  const float* panel(int64_t p) const { return static_cast<const float*>(storage_.get()) + p * k_ * width_; }
  void RunPanels(int64_t first, int64_t last, int64_t row0, int64_t m, const Rows& rows, float* c, int64_t ldc,
                 const Epilogue& epilogue) const;
  void RunRowGroups(int64_t first, int64_t last, const Rows& rows, float* c, int64_t ldc,
                    const Epilogue& epilogue) const;

  int64_t k_, n_, taps_;
  Isa isa_;
  int64_t width_, chunk_;
  std::shared_ptr<void> storage_;  // panels * K * width_ floats, the last panel zero-padded
  size_t bytes_;
};

}  // namespace mf::runtime::cpu
