#include "runtime/ops/slice_rules.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "runtime/ops/indexing.h"

namespace mf::runtime::ops {

StatusOr<SlicePlan> PlanSlice(const Shape& input, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                              std::vector<int64_t> axes, std::vector<int64_t> steps) {
  if (ends.size() != starts.size()) return InvalidArgument("Slice starts and ends differ in length");
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return InvalidArgument("Slice axes/steps length mismatch");
  int rank = static_cast<int>(input.size());
  SlicePlan plan;
  plan.shape = input;
  plan.start.assign(input.size(), 0);
  plan.step.assign(input.size(), 1);
  std::vector<bool> seen(input.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    MF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axes[i], rank));
    size_t a = static_cast<size_t>(axis);
    if (seen[a]) return InvalidArgument("Slice axes repeat");
    seen[a] = true;
    int64_t dim = input[a], st = steps[i];
    if (st == 0) return InvalidArgument("Slice step must not be 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;  // no overflow: dim >= 0
    if (e < 0) e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    // Written so that huge steps (INT64_MAX) cannot overflow.
    int64_t n = st > 0 ? (e > s ? 1 + (e - s - 1) / st : 0)
                       : (s > e ? (st == std::numeric_limits<int64_t>::min() ? 1 : 1 + (s - e - 1) / -st) : 0);
    plan.shape[a] = std::max<int64_t>(0, n);
    plan.start[a] = s;
    plan.step[a] = n <= 1 ? 1 : st;
  }
  return plan;
}

StatusOr<SlicePlan> PlanSlice(const std::vector<const Tensor*>& in) {
  MF_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ReadInts(*in[1], "starts"));
  MF_ASSIGN_OR_RETURN(std::vector<int64_t> ends, ReadInts(*in[2], "ends"));
  std::vector<int64_t> axes, steps;
  if (in.size() > 3 && in[3]) {
    MF_ASSIGN_OR_RETURN(axes, ReadInts(*in[3], "axes"));
  }
  if (in.size() > 4 && in[4]) {
    MF_ASSIGN_OR_RETURN(steps, ReadInts(*in[4], "steps"));
  }
  return PlanSlice(in[0]->shape(), starts, ends, std::move(axes), std::move(steps));
}

StatusOr<PadMode> ParsePadMode(const std::string& mode) {
  if (mode == "constant") return PadMode::kConstant;
  if (mode == "reflect") return PadMode::kReflect;
  if (mode == "edge") return PadMode::kEdge;
  return InvalidArgument("unknown mode '" + mode + "'");
}

StatusOr<Shape> PadShape(const Shape& input, const std::vector<int64_t>& pads, PadMode mode) {
  size_t rank = input.size();
  if (pads.size() != 2 * rank) return InvalidArgument("pads must have 2 * rank entries");
  Shape shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t begin = pads[i], end = pads[i + rank], dim = input[i];
    int64_t d = 0;
    if (__builtin_add_overflow(dim, begin, &d) || __builtin_add_overflow(d, end, &d))
      return InvalidArgument("pads overflow");
    if (d < 0) return InvalidArgument("negative pads remove more than the whole dim");
    if (mode != PadMode::kConstant && dim == 0 && d > 0) {
      return InvalidArgument(std::string("cannot ") + (mode == PadMode::kEdge ? "edge" : "reflect") +
                             "-pad an empty dim");
    }
    if (mode == PadMode::kReflect && (begin >= dim || end >= dim) && (begin > 0 || end > 0)) {
      return InvalidArgument("reflect pads must be smaller than the dim");
    }
    shape[i] = d;
  }
  return shape;
}

}  // namespace mf::runtime::ops
