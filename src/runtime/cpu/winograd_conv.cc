#include "runtime/cpu/winograd_conv.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/cpu/cpu_common.h"
#include "runtime/cpu/dnnl_engine.h"

namespace mf::runtime::cpu {
namespace {

constexpr int kPositions = 16;  // of the 4x4 input block, and of the transformed products
// Transformed weights up to this size (128 x 128 channels) are read from L2: then the threads
// split the tiles, each in blocks whose transforms and products take up to kBlockBytes, and every
// block reads all of U. Larger weights are streamed: the threads split each product's panels,
// over groups of tiles whose transforms take up to kGroupBytes, so U is read once per group.
constexpr int64_t kSmallWeightBytes = int64_t{1} << 20;
constexpr int64_t kBlockBytes = int64_t{1} << 20;
constexpr int64_t kMinBlockTiles = 12, kMaxBlockTiles = 192;
constexpr int64_t kGroupBytes = int64_t{4} << 20;
// Splitting the tiles needs this many per thread.
constexpr int64_t kMinTilesPerThread = 48;

// Eight channels in one AVX2 register, through GCC's vector extension: the transforms below are
// written once for it and for the float of a last channel or few.
typedef float Lanes8 __attribute__((vector_size(32)));

template <typename V>
__attribute__((target("avx2,fma"), always_inline)) inline V Load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

template <typename V>
__attribute__((target("avx2,fma"), always_inline)) inline void Store(float* p, V v) {
  std::memcpy(p, &v, sizeof(v));
}

// V = Bᵀ d B for one tile at channel k (and the next ones V holds): d's 16 pixels at `pixels`
// (row-major in the 4x4 block), position e of V at v + e * stride.
// Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
template <typename V>
__attribute__((target("avx2,fma"), always_inline)) inline void TransformInputAt(const float* const* pixels, int64_t k,
                                                                                float* v, int64_t stride) {
  V t[kPositions];
  for (int q = 0; q < 4; ++q) {
    const V d0 = Load<V>(pixels[q] + k), d1 = Load<V>(pixels[4 + q] + k);
    const V d2 = Load<V>(pixels[8 + q] + k), d3 = Load<V>(pixels[12 + q] + k);
    t[q] = d0 - d2;
    t[4 + q] = d1 + d2;
    t[8 + q] = d2 - d1;
    t[12 + q] = d1 - d3;
  }
  for (int r = 0; r < 4; ++r) {
    Store(v + (4 * r + 0) * stride + k, t[4 * r + 0] - t[4 * r + 2]);
    Store(v + (4 * r + 1) * stride + k, t[4 * r + 1] + t[4 * r + 2]);
    Store(v + (4 * r + 2) * stride + k, t[4 * r + 2] - t[4 * r + 1]);
    Store(v + (4 * r + 3) * stride + k, t[4 * r + 1] - t[4 * r + 3]);
  }
}

__attribute__((target("avx2,fma"))) void TransformInput(const float* const* pixels, int64_t c, float* v,
                                                        int64_t stride) {
  int64_t k = 0;
  for (; k + 8 <= c; k += 8) TransformInputAt<Lanes8>(pixels, k, v, stride);
  for (; k < c; ++k) TransformInputAt<float>(pixels, k, v, stride);
}

// Y = Aᵀ P A for one tile at output channel k (and the next ones V holds), from the products P
// (position e at p + e * stride), then bias, the old value (`accumulate`) and a clamp to [lo, hi]
// (ReLU, Clip, or none): the 2x2 pixels go to out[0..3], row-major. Aᵀ = [1 1 1 0; 0 1 -1 -1].
template <typename V, bool kAccumulate>
__attribute__((target("avx2,fma"), always_inline)) inline void TransformOutputAt(const float* p, int64_t stride,
                                                                                 int64_t k, const float* bias, V lo,
                                                                                 V hi, float* const* out) {
  V t[8];
  for (int q = 0; q < 4; ++q) {
    const V s0 = Load<V>(p + q * stride + k), s1 = Load<V>(p + (4 + q) * stride + k);
    const V s2 = Load<V>(p + (8 + q) * stride + k), s3 = Load<V>(p + (12 + q) * stride + k);
    t[q] = s0 + s1 + s2;
    t[4 + q] = s1 - s2 - s3;
  }
  const V b = Load<V>(bias + k);
  for (int i = 0; i < 2; ++i) {
    V y[2] = {t[4 * i] + t[4 * i + 1] + t[4 * i + 2], t[4 * i + 1] - t[4 * i + 2] - t[4 * i + 3]};
    for (int j = 0; j < 2; ++j) {
      float* o = out[2 * i + j] + k;
      V value = y[j] + b;
      if (kAccumulate) value += Load<V>(o);
      value = value < lo ? lo : value;  // a NaN stays NaN
      value = value > hi ? hi : value;
      Store(o, value);
    }
  }
}

template <bool kAccumulate>
__attribute__((target("avx2,fma"))) void TransformOutput(const float* p, int64_t stride, int64_t m, const float* bias,
                                                         float lo, float hi, float* const* out) {
  int64_t k = 0;
  const Lanes8 lo8 = Lanes8{} + lo, hi8 = Lanes8{} + hi;
  for (; k + 8 <= m; k += 8) TransformOutputAt<Lanes8, kAccumulate>(p, stride, k, bias, lo8, hi8, out);
  for (; k < m; ++k) TransformOutputAt<float, kAccumulate>(p, stride, k, bias, lo, hi, out);
}

// Position e = 4r + q of U = G g Gᵀ for `count` 3x3 kernels g (the plain [M, C, 3, 3] layout's),
// into u[0, count): the [M, C] matrix that position's product multiplies by.
// G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1].
void TransformWeightsAt(const float* w, int64_t count, int e, float* u) {
  constexpr float kG[4][3] = {{1.f, 0.f, 0.f}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0.f, 0.f, 1.f}};
  const int r = e / 4, q = e % 4;
  for (int64_t i = 0; i < count; ++i) {
    const float* g = w + i * 9;
    float sum = 0.f;
    for (int a = 0; a < 3; ++a) {
      const float row = kG[r][0] * g[a] + kG[r][1] * g[3 + a] + kG[r][2] * g[6 + a];  // (G g)[r][a]
      sum += row * kG[q][a];
    }
    u[i] = sum;
  }
}

}  // namespace

std::unique_ptr<WinogradConv> WinogradConv::Pack(const float* weights, int64_t m, int64_t c, PanelGemm::Isa isa) {
  std::unique_ptr<WinogradConv> conv(new WinogradConv(m, c));
  // One position at a time: the plain weights, one position's matrix and the panels made so far
  // are all that is ever held (ResNet-18's last layers: 9 MiB plain, 17 MiB transformed).
  std::vector<float> u(static_cast<size_t>(m * c));
  for (int e = 0; e < kPositions; ++e) {
    TransformWeightsAt(weights, m * c, e, u.data());
    conv->products_[e] = PanelGemm::Pack(u.data(), c, m, 1, isa);
    if (!conv->products_[e]) return nullptr;
  }
  return conv;
}

void WinogradConv::Unpack(float* weights) const {
  // g = G⁺ U G⁺ᵀ with G⁺ = [1 0 0 0; 0 1 -1 0; 0 0 0 1], a left inverse of G: G's middle rows
  // differ by g's middle row.
  std::vector<std::vector<float>> u(kPositions, std::vector<float>(static_cast<size_t>(m_ * c_)));
  for (int e = 0; e < kPositions; ++e) products_[e]->Unpack(u[e].data());
  constexpr int kInverse[3][4] = {{1, 0, 0, 0}, {0, 1, -1, 0}, {0, 0, 0, 1}};
  for (int64_t i = 0; i < m_ * c_; ++i) {
    for (int a = 0; a < 3; ++a) {
      for (int b = 0; b < 3; ++b) {
        float g = 0.f;
        for (int r = 0; r < 4; ++r) {
          for (int q = 0; q < 4; ++q) {
            if (kInverse[a][r] * kInverse[b][q] != 0)
              g += static_cast<float>(kInverse[a][r] * kInverse[b][q]) * u[4 * r + q][i];
          }
        }
        weights[i * 9 + a * 3 + b] = g;
      }
    }
  }
}

size_t WinogradConv::bytes() const {
  size_t bytes = 0;
  for (const auto& product : products_) bytes += product->bytes();
  return bytes;
}

bool WinogradConv::SplitsTiles(int64_t tiles) const {
  return kPositions * c_ * m_ * static_cast<int64_t>(sizeof(float)) <= kSmallWeightBytes &&
         tiles >= 2 * kMinTilesPerThread;
}

int64_t WinogradConv::BatchTiles(int64_t bytes) const {
  const int64_t fit = bytes / (kPositions * (c_ + m_) * static_cast<int64_t>(sizeof(float)));
  return std::max<int64_t>(fit / 6 * 6, 6);  // whole 6-row tiles of PanelGemm
}

WinogradConv::Batch WinogradConv::MakeBatch(const Shape& s, const float* x, float* y,
                                            const PanelGemm::Epilogue& epilogue, int64_t capacity) const {
  Batch b{s, x, y, epilogue, capacity};
  // V, P, zeros (the padding's pixels, a missing bias) and a sink for pixels past the edge.
  const size_t floats = static_cast<size_t>(kPositions * capacity * (c_ + m_) + std::max(c_, m_) + m_);
  b.v = reinterpret_cast<float*>(ThreadScratchpad(floats * sizeof(float)));
  b.p = b.v + kPositions * capacity * c_;
  b.zeros = b.p + kPositions * capacity * m_;
  b.sink = b.zeros + std::max(c_, m_);
  std::fill(b.zeros, b.sink + m_, 0.f);
  return b;
}

void WinogradConv::Run(const Shape& s, const float* x, float* y, const PanelGemm::Epilogue& epilogue) const {
  const int64_t tiles = Tiles(s);
  if (SplitsTiles(tiles)) {
    // Each thread an even share of the tiles, in blocks of even size that stay in its L2 through
    // the input transform, the 16 products and the output transform.
    const int64_t capacity = std::clamp<int64_t>(BatchTiles(kBlockBytes), kMinBlockTiles, kMaxBlockTiles);
    auto run_share = [&](int64_t t, int64_t team) {
      const int64_t first = tiles * t / team, count = tiles * (t + 1) / team - first;
      const int64_t blocks = (count + capacity - 1) / capacity;
      const Batch b = MakeBatch(s, x, y, epilogue, capacity);
      for (int64_t block = 0; block < blocks; ++block) {
        const int64_t begin = first + count * block / blocks, size = first + count * (block + 1) / blocks - begin;
        TransformInputs(b, begin, 0, size);
        Multiply(b, size);
        TransformOutputs(b, begin, 0, size);
      }
    };
    const int threads =
        omp_in_parallel() ? 1 : static_cast<int>(std::min<int64_t>(omp_get_max_threads(), tiles / kMinTilesPerThread));
    if (threads <= 1) {
      run_share(0, 1);
      return;
    }
#pragma omp parallel num_threads(threads)
    run_share(omp_get_thread_num(), omp_get_num_threads());
    return;
  }
  // Few tiles or large weights: all the tiles of a group transformed (the threads splitting
  // them), then each product with the threads splitting its panels (each streams only its share
  // of U, once per group), then the output transforms.
  const int64_t capacity = std::min(tiles, BatchTiles(kGroupBytes));
  const Batch b = MakeBatch(s, x, y, epilogue, capacity);
  for (int64_t first = 0; first < tiles; first += capacity) {
    const int64_t size = std::min(capacity, tiles - first);
    ParallelFor(size, 8, [&](int64_t begin, int64_t end) { TransformInputs(b, first, begin, end); });
    Multiply(b, size);
    ParallelFor(size, 8, [&](int64_t begin, int64_t end) { TransformOutputs(b, first, begin, end); });
  }
}

void WinogradConv::Locate(const Shape& s, int64_t tile, int64_t* image, int64_t* oy, int64_t* ox) {
  const int64_t tiles_x = (s.ow + 1) / 2, tiles_y = (s.oh + 1) / 2;
  *ox = tile % tiles_x * 2;
  *oy = tile / tiles_x % tiles_y * 2;
  *image = tile / tiles_x / tiles_y;
}

void WinogradConv::TransformInputs(const Batch& b, int64_t first, int64_t begin, int64_t end) const {
  const Shape& s = b.s;
  for (int64_t i = begin; i < end; ++i) {
    int64_t image, oy, ox;
    Locate(s, first + i, &image, &oy, &ox);
    const float* pixels[kPositions];
    for (int r = 0; r < 4; ++r) {
      const int64_t iy = oy - s.pad_top + r;
      for (int q = 0; q < 4; ++q) {
        const int64_t ix = ox - s.pad_left + q;
        const bool inside = iy >= 0 && iy < s.h && ix >= 0 && ix < s.w;
        pixels[4 * r + q] = inside ? b.x + ((image * s.h + iy) * s.w + ix) * c_ : b.zeros;
      }
    }
    TransformInput(pixels, c_, b.v + i * c_, b.capacity * c_);
  }
}

void WinogradConv::Multiply(const Batch& b, int64_t count) const {
  for (int e = 0; e < kPositions; ++e) {
    products_[e]->Run(count, PanelGemm::MatrixRows(b.v + e * b.capacity * c_, c_), b.p + e * b.capacity * m_, m_,
                      PanelGemm::Epilogue{});
  }
}

void WinogradConv::TransformOutputs(const Batch& b, int64_t first, int64_t begin, int64_t end) const {
  const Shape& s = b.s;
  const ActivationParams& act = b.epilogue.act;
  const bool clamps = act.kind == Activation::kRelu || act.kind == Activation::kClip;
  const float lo = act.kind == Activation::kRelu   ? 0.f
                   : act.kind == Activation::kClip ? act.alpha
                                                   : -std::numeric_limits<float>::infinity();
  const float hi = act.kind == Activation::kClip ? act.beta : std::numeric_limits<float>::infinity();
  const float* bias = b.epilogue.bias ? b.epilogue.bias : b.zeros;
  for (int64_t i = begin; i < end; ++i) {
    int64_t image, oy, ox;
    Locate(s, first + i, &image, &oy, &ox);
    float* out[4];
    for (int j = 0; j < 4; ++j) {
      const int64_t py = oy + j / 2, px = ox + j % 2;
      out[j] = py < s.oh && px < s.ow ? b.y + ((image * s.oh + py) * s.ow + px) * m_ : b.sink;
    }
    if (b.epilogue.accumulate) {
      TransformOutput<true>(b.p + i * m_, b.capacity * m_, m_, bias, lo, hi, out);
    } else {
      TransformOutput<false>(b.p + i * m_, b.capacity * m_, m_, bias, lo, hi, out);
    }
    if (!clamps && act.kind != Activation::kNone) {
      for (int j = 0; j < 4; ++j) {
        if (out[j] != b.sink) ApplyActivation(act, out[j], m_);
      }
    }
  }
}

}  // namespace mf::runtime::cpu
