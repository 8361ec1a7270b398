// Conv and ConvTranspose geometry in ONNX terms: attribute parsing, channel/group checks,
// auto_pad (SAME_UPPER/SAME_LOWER/VALID), output_shape and output_padding, shared by the CPU
// (oneDNN) and CUDA (cuDNN) kernels, which then map it to their libraries' conventions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

struct ConvAttributes {
  bool transpose = false;
  int64_t group = 1;
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel_shape, strides, dilations, pads, output_padding, output_shape;
};

// Reads and checks the attributes of `init`'s Conv (or, with `transpose`, ConvTranspose) node
// (errors carry the node prefix).
StatusOr<ConvAttributes> ReadConvAttributes(const KernelInit& init, bool transpose);

// A Conv given a fused sum (fusion pass) has the addend as input 3; INTERNAL otherwise, and for
// a ConvTranspose.
Status CheckConvFusedSum(const KernelInit& init, bool transpose);

// One input shape's geometry, per spatial dim: input extent, kernel, stride, dilation, begin
// and end padding, output_padding (ConvTranspose) and output extent.
struct ConvGeometry {
  size_t spatial = 0;
  int64_t n = 0, c = 0, m = 0;  // batch, input channels, output channels
  std::vector<int64_t> in, k, st, dl, pl, pr, op, out;
};

// The geometry of convolving input `x` [N, C, spatial...] with weights `w` ([M, C/g, k...] for
// Conv, [C, M/g, k...] for ConvTranspose).
StatusOr<ConvGeometry> ComputeConvGeometry(const ConvAttributes& p, const Shape& x, const Shape& w);

// [N, M, out...].
Shape ConvOutputShape(const ConvGeometry& geo);

}  // namespace mf::runtime::ops
