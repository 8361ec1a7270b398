// MaxPool/AveragePool geometry: attribute parsing and validation, auto_pad, ceil mode and the
// count_include_pad divisor, shared by the CPU and CUDA pooling kernels. 1-D and 2-D pools are
// described as 3-D ones with leading unit dims, so one loop nest covers every rank.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

struct PoolAttributes {
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t ceil_mode = 0;
  int64_t count_include_pad = 0;
};

// Reads and checks the pooling attributes of `init`'s node (errors carry the node prefix);
// UNIMPLEMENTED when MaxPool's Indices output is asked for.
StatusOr<PoolAttributes> ReadPoolAttributes(const KernelInit& init);

// One spatial dim of a pool: extents, kernel, stride, dilation and begin/end padding. Plain
// data: device kernels take it by value.
struct PoolDim {
  int64_t in = 1, out = 1, k = 1, s = 1, d = 1, pb = 0, pe = 0;
};

// The three (D, H, W) dims of pooling an input of shape `x` (3-D to 5-D: N, C, spatial...).
StatusOr<std::array<PoolDim, 3>> PoolGeometry(const PoolAttributes& p, const Shape& x);

// The pooled output shape: N, C and the spatial outputs of `dims`.
Shape PoolOutputShape(const Shape& x, const std::array<PoolDim, 3>& dims);

// Number of window taps along one dim counted by count_include_pad: the window starting at
// `start` clipped to the padded input (a ceil-mode overhang past the end padding is not
// counted). constexpr so device code can call it (--expt-relaxed-constexpr).
constexpr int64_t PoolPaddedSpan(int64_t start, const PoolDim& d) {
  int64_t end = start + (d.k - 1) * d.d + 1;
  if (end > d.in + d.pe) end = d.in + d.pe;
  return (end - start + d.d - 1) / d.d;
}

// GlobalAveragePool/GlobalMaxPool: [N, C, 1, ...] of the input's rank (at least 2-D).
StatusOr<Shape> GlobalPoolShape(const Shape& x);

}  // namespace mf::runtime::ops
