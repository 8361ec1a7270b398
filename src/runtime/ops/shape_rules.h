// Output shapes of the operators that only relabel or rearrange elements (Reshape, Flatten,
// Squeeze, Unsqueeze, Transpose, Concat, Split, Expand, Tile): attributes, validation, defaults
// and error messages, once for the CPU and CUDA kernels, which then only move the bytes.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

// Reshape: `requested` may hold one -1 (inferred) and, unless `allowzero`, 0s (copy the input
// dim). `num_elements` is the input's.
StatusOr<Shape> ReshapeShape(const Shape& input, int64_t num_elements, const std::vector<int64_t>& requested,
                             bool allowzero);

// Flatten at `axis` (negative counts from the end; rank itself is allowed): [outer, inner].
StatusOr<Shape> FlattenShape(const Shape& input, int64_t axis);

// Squeeze: drops the listed dims (which must be 1), or every dim of 1 when `axes` is empty.
StatusOr<Shape> SqueezeShape(const Shape& input, const std::vector<int64_t>& axes);
// Unsqueeze: inserts dims of 1 at `axes` (positions in the output).
StatusOr<Shape> UnsqueezeShape(const Shape& input, const std::vector<int64_t>& axes);

// Transpose: the permutation (reversed dims when `perm` is empty), validated against the rank.
StatusOr<std::vector<int64_t>> TransposePerm(const std::vector<int64_t>& perm, int rank);

// Concat's bind-time rules: at least one input, every one present, fixed-width and of the first
// one's type; returns the axis attribute.
StatusOr<int64_t> ReadConcatAxis(const KernelInit& init);

// Concat: the normalized axis and the output shape of joining `inputs` along it.
struct ConcatPlan {
  int axis = 0;
  Shape shape;
};
StatusOr<ConcatPlan> PlanConcat(const std::vector<const Tensor*>& inputs, int64_t axis);

// Split's attributes (the input must be fixed-width). From opset 13 the sizes come from input 1
// when it is given.
struct SplitAttributes {
  int64_t axis = 0;
  std::vector<int64_t> split;
  bool split_from_input = false;
  size_t outputs = 0;
};
StatusOr<SplitAttributes> ReadSplitAttributes(const KernelInit& init);

// Split of an input of shape `x`: the normalized axis and one size per output. `split_input` is
// input 1 (or null), read only when the attributes say so.
struct SplitPlan {
  int axis = 0;
  std::vector<int64_t> sizes;
};
StatusOr<SplitPlan> PlanSplit(const SplitAttributes& attrs, const Shape& x, const Tensor* split_input);

// Split of `dim` into `outputs` parts: `split` as given (it must sum to `dim`) or, when empty,
// equal chunks with a smaller last one.
StatusOr<std::vector<int64_t>> SplitSizes(std::vector<int64_t> split, int64_t dim, size_t outputs);

// Expand: numpy broadcast of the input shape with the requested one (no negative dims).
StatusOr<Shape> ExpandShape(const Shape& input, const std::vector<int64_t>& requested);

// Tile: the input shape times `repeats` (one non-negative entry per dim), overflow-checked.
StatusOr<Shape> TileShape(const Shape& input, const std::vector<int64_t>& repeats);

}  // namespace mf::runtime::ops
