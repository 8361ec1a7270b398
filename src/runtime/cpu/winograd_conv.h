// 3x3 convolutions of stride 1 by Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray,
// "Fast Algorithms for Convolutional Neural Networks", 2015): each 2x2 block of output pixels is
// computed from a 4x4 block of input pixels with 16 multiplications per channel pair instead of
// 36. Over channels that is 16 products of [tiles, C] by [C, M], one per position of the 4x4
// block, plus transforms that are additions only:
//   V = Bᵀ d B (input), U = G g Gᵀ (weights, once), Y = Aᵀ (V ⊙ U) A (output).
// The products run on PanelGemm's tile, the weights of each packed once into its panels.
//
// Why: on AVX2-only CPUs our direct 3x3 convolutions on panels ran ResNet-18's 3x3 layers 20-30 %
// behind ONNX Runtime's NCHWc kernels (MLAS); F(2x2, 3x3) does 2.25x fewer multiplications (1.78x
// at 7x7 outputs, whose last tiles are half outside). The transformed weights are 16/9 the size
// of the plain ones. Its rounding differs from direct convolution's by a few units in the last
// place of the inputs' magnitude (the transforms add and subtract up to 16 values).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "runtime/cpu/panel_gemm.h"

namespace mf::runtime::cpu {

class WinogradConv {
 public:
  // One run's geometry, channels-last: input [n, h, w, C], output [n, oh, ow, M], the input
  // padded by pad_top rows and pad_left columns (others at the bottom and right as oh, ow need).
  struct Shape {
    int64_t n, h, w, oh, ow, pad_top, pad_left;
  };

  // 2x2 output tiles, all images.
  static int64_t Tiles(const Shape& s) { return s.n * ((s.oh + 1) / 2) * ((s.ow + 1) / 2); }

  // Transforms [M, C, 3, 3] weights and packs them for `isa` (not kNone). Null when out of memory.
  static std::unique_ptr<WinogradConv> Pack(const float* weights, int64_t m, int64_t c,
                                            PanelGemm::Isa isa = PanelGemm::Best());

  // Writes the weights back as [M, C, 3, 3] (to pack them another way): G's left inverse
  // undoes the transform, exactly but for a rounding of the middle row and column.
  void Unpack(float* weights) const;

  // y = act(conv(x) + bias [+ y's old value]), on the OpenMP team.
  void Run(const Shape& s, const float* x, float* y, const PanelGemm::Epilogue& epilogue) const;

  size_t bytes() const;

 private:
  // A run's tiles transformed together: V [16][capacity][C], P [16][capacity][M].
  struct Batch {
    const Shape& s;
    const float* x;
    float* y;
    const PanelGemm::Epilogue& epilogue;
    int64_t capacity;
    float *v, *p, *zeros, *sink;
  };

  WinogradConv(int64_t m, int64_t c) : m_(m), c_(c) {}
  bool SplitsTiles(int64_t tiles) const;    // else the threads split each product's panels
  int64_t BatchTiles(int64_t bytes) const;  // tiles whose V and P take up to `bytes`
  Batch MakeBatch(const Shape& s, const float* x, float* y, const PanelGemm::Epilogue& epilogue,
                  int64_t capacity) const;  // on the calling thread's scratchpad
  static void Locate(const Shape& s, int64_t tile, int64_t* image, int64_t* oy, int64_t* ox);
  // Tiles first + [begin, end) into the batch's slots [begin, end), and back out of them.
  void TransformInputs(const Batch& b, int64_t first, int64_t begin, int64_t end) const;
  void Multiply(const Batch& b, int64_t count) const;  // P = V ⊙ U, slots [0, count)
  void TransformOutputs(const Batch& b, int64_t first, int64_t begin, int64_t end) const;

  int64_t m_, c_;
  std::array<std::unique_ptr<PanelGemm>, 16> products_;  // U at each position of the 4x4 block
};

}  // namespace mf::runtime::cpu
