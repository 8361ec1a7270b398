// Which axes a reduction (ReduceSum & co.) or an arg-reduction (ArgMax/ArgMin) covers and the
// shape it produces, shared by the CPU and CUDA kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

// What a reduction folds its elements into (the kernels say how).
enum class ReduceKind : int { kMean, kSum, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSum, kLogSumExp };

// ReduceLogSum and ReduceLogSumExp take float types only.
constexpr bool ReduceNeedsFloat(ReduceKind kind) {
  return kind == ReduceKind::kLogSum || kind == ReduceKind::kLogSumExp;
}

// The reduction operators, which every backend registers: the name, what it folds and the opset
// from which its axes come from input 1 instead of the attribute.
struct ReduceOp {
  const char* name;
  ReduceKind kind;
  int64_t axes_input_since;
};
inline constexpr ReduceOp kReduceOps[] = {
    {"ReduceMean", ReduceKind::kMean, 18},     {"ReduceSum", ReduceKind::kSum, 13},
    {"ReduceMax", ReduceKind::kMax, 18},       {"ReduceMin", ReduceKind::kMin, 18},
    {"ReduceProd", ReduceKind::kProd, 18},     {"ReduceSumSquare", ReduceKind::kSumSquare, 18},
    {"ReduceL1", ReduceKind::kL1, 18},         {"ReduceL2", ReduceKind::kL2, 18},
    {"ReduceLogSum", ReduceKind::kLogSum, 18}, {"ReduceLogSumExp", ReduceKind::kLogSumExp, 18}};

struct ReduceAttributes {
  std::vector<int64_t> axes;  // the attribute; from opset `axes_input_since` on, input 1 wins
  bool axes_from_input = false;
  bool keepdims = true;
  bool noop_with_empty_axes = false;
};

// Reads the reduction attributes of `init`'s node; axes come from input 1 from opset
// `axes_input_since` on (ReduceSum 13, the others 18).
StatusOr<ReduceAttributes> ReadReduceAttributes(const KernelInit& init, int64_t axes_input_since);

// The axes to reduce: the input's (when given, see ReduceAttributes) or the attribute's; an
// empty list reduces everything unless noop_with_empty_axes.
StatusOr<std::vector<bool>> ReducedAxes(const ReduceAttributes& attrs, const Tensor* axes_input, int rank);

// The reduction's output shape and the number of input elements folded into each output.
struct ReduceShape {
  Shape shape;
  int64_t count = 1;
};
ReduceShape ReducedShape(const Shape& x, const std::vector<bool>& reduced, bool keepdims);

// ArgMax/ArgMin's attributes.
struct ArgReduceAttributes {
  int64_t axis = 0;
  bool keepdims = true;
  bool select_last_index = false;  // ties go to the last position instead of the first
};
StatusOr<ArgReduceAttributes> ReadArgReduceAttributes(const KernelInit& init);

// ArgMax/ArgMin along one axis: the input seen as [outer, len, inner] and the int64 output shape.
struct ArgReducePlan {
  int axis = 0;
  int64_t outer = 1, len = 0, inner = 1;
  Shape shape;
};
StatusOr<ArgReducePlan> PlanArgReduce(const Shape& x, int64_t axis, bool keepdims);

}  // namespace mf::runtime::ops
