// Slice and Pad geometry: which input element each output element comes from, with ONNX's
// clamping of out-of-range starts/ends and the validation of pads. Shared by the CPU and CUDA
// kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

// Output dim d, index i reads input index start[d] + i * step[d] along d.
struct SlicePlan {
  Shape shape;
  std::vector<int64_t> start, step;
};

// Slice (opset 10+): `axes` and `steps` may be empty (all leading axes, steps of 1). A dim that
// yields at most one element gets step 1, so index arithmetic never meets a huge step.
StatusOr<SlicePlan> PlanSlice(const Shape& input, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                              std::vector<int64_t> axes, std::vector<int64_t> steps);

// The same from the node's inputs: data, starts, ends and the optional axes and steps (host
// tensors; nullptr or absent when omitted).
StatusOr<SlicePlan> PlanSlice(const std::vector<const Tensor*>& inputs);

enum class PadMode { kConstant, kReflect, kEdge };

// The mode attribute of Pad; INVALID_ARGUMENT (without the node prefix) for an unknown one.
StatusOr<PadMode> ParsePadMode(const std::string& mode);

// Pad's output shape: `pads` is [begin..., end...] (2 * rank entries, negative ones crop).
StatusOr<Shape> PadShape(const Shape& input, const std::vector<int64_t>& pads, PadMode mode);

// Maps an output coordinate minus the begin pad, `src`, to the input index along a dim of
// `dim` elements for the reflect and edge modes (constant mode reads the fill value instead).
// constexpr so device code can call it (--expt-relaxed-constexpr).
constexpr int64_t PadSourceIndex(int64_t src, int64_t dim, PadMode mode) {
  if (src >= 0 && src < dim) return src;
  if (mode == PadMode::kEdge) return src < 0 ? 0 : dim - 1;
  return src < 0 ? -src : 2 * (dim - 1) - src;
}

}  // namespace mf::runtime::ops
