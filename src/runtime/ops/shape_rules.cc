#include "runtime/ops/shape_rules.h"

#include <algorithm>
#include <string>
#include <utility>

#include "runtime/ops/indexing.h"
#include "runtime/ops/input_checks.h"

namespace mf::runtime::ops {

StatusOr<Shape> ReshapeShape(const Shape& input, int64_t num_elements, const std::vector<int64_t>& requested,
                             bool allowzero) {
  Shape shape(requested.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < requested.size(); ++i) {
    int64_t d = requested[i];
    if (d == 0 && !allowzero) {
      if (i >= input.size())
        return InvalidArgument("shape dim " + std::to_string(i) + " is 0 but the input has no such dim");
      d = input[i];
    }
    if (d == -1) {
      if (infer >= 0) return InvalidArgument("shape has more than one -1");
      infer = static_cast<int>(i);
      continue;
    }
    if (d < 0) return InvalidArgument("shape has a negative dim " + std::to_string(d));
    shape[i] = d;
    if (d != 0 && known > (int64_t{1} << 62) / d) return InvalidArgument("shape overflows");
    known *= d;
  }
  if (infer >= 0) {
    if (known == 0 || num_elements % known != 0) {
      return InvalidArgument("cannot infer the -1 dim reshaping " + ShapeToString(input) + " to " +
                             ShapeToString(requested));
    }
    shape[static_cast<size_t>(infer)] = num_elements / known;
  }
  return shape;
}

StatusOr<Shape> FlattenShape(const Shape& input, int64_t axis) {
  int64_t rank = static_cast<int64_t>(input.size());
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a > rank) return InvalidArgument("Flatten axis " + std::to_string(axis) + " is out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < a ? outer : inner) *= input[static_cast<size_t>(i)];
  return Shape{outer, inner};
}

StatusOr<Shape> SqueezeShape(const Shape& input, const std::vector<int64_t>& axes) {
  int rank = static_cast<int>(input.size());
  std::vector<bool> drop(input.size(), false);
  if (axes.empty()) {
    for (size_t i = 0; i < input.size(); ++i) drop[i] = input[i] == 1;
  }
  for (int64_t a : axes) {
    MF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(a, rank));
    if (input[static_cast<size_t>(axis)] != 1)
      return InvalidArgument("cannot squeeze dim " + std::to_string(a) + " of " + ShapeToString(input));
    drop[static_cast<size_t>(axis)] = true;
  }
  Shape shape;
  for (size_t i = 0; i < input.size(); ++i) {
    if (!drop[i]) shape.push_back(input[i]);
  }
  return shape;
}

StatusOr<Shape> UnsqueezeShape(const Shape& input, const std::vector<int64_t>& axes) {
  int out_rank = static_cast<int>(input.size() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t a : axes) {
    MF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(a, out_rank));
    if (inserted[static_cast<size_t>(axis)]) return InvalidArgument("Unsqueeze axes repeat " + std::to_string(a));
    inserted[static_cast<size_t>(axis)] = true;
  }
  Shape shape;
  for (size_t i = 0, j = 0; i < inserted.size(); ++i) shape.push_back(inserted[i] ? 1 : input[j++]);
  return shape;
}

StatusOr<std::vector<int64_t>> TransposePerm(const std::vector<int64_t>& perm_attr, int rank) {
  std::vector<int64_t> perm = perm_attr;
  if (perm.empty()) {
    for (int i = rank; i-- > 0;) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != rank)
    return InvalidArgument("perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(rank));
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) return InvalidArgument("perm is not a permutation");
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

StatusOr<int64_t> ReadConcatAxis(const KernelInit& init) {
  if (init.num_inputs() == 0) return init.Error(StatusCode::kInvalidArgument, "needs at least one input");
  for (size_t i = 0; i < init.num_inputs(); ++i) {
    MF_RETURN_IF_ERROR(RequireFixedWidth(init, i));
    if (init.dtype(i) != init.dtype(0)) return init.Error(StatusCode::kInvalidArgument, "inputs have different types");
  }
  return init.attrs().GetInt("axis", 0);
}

StatusOr<ConcatPlan> PlanConcat(const std::vector<const Tensor*>& inputs, int64_t axis_attr) {
  const Shape& first = inputs.at(0)->shape();
  ConcatPlan plan;
  MF_ASSIGN_OR_RETURN(plan.axis, NormalizeAxis(axis_attr, static_cast<int>(first.size())));
  size_t axis = static_cast<size_t>(plan.axis);
  plan.shape = first;
  plan.shape[axis] = 0;
  for (const Tensor* t : inputs) {
    const Shape* s = &t->shape();
    if (s->size() != first.size()) return InvalidArgument("Concat inputs have different ranks");
    for (size_t i = 0; i < s->size(); ++i) {
      if (i != axis && (*s)[i] != first[i]) {
        return InvalidArgument("Concat inputs " + ShapeToString(first) + " and " + ShapeToString(*s) +
                               " differ off the axis");
      }
    }
    plan.shape[axis] += (*s)[axis];
  }
  return plan;
}

StatusOr<SplitAttributes> ReadSplitAttributes(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  SplitAttributes a;
  MF_ASSIGN_OR_RETURN(a.axis, init.attrs().GetInt("axis", 0));
  MF_ASSIGN_OR_RETURN(a.split, init.attrs().GetInts("split", {}));
  a.split_from_input = init.opset >= 13;
  a.outputs = init.node.outputs.size();
  return a;
}

StatusOr<SplitPlan> PlanSplit(const SplitAttributes& attrs, const Shape& x, const Tensor* split_input) {
  SplitPlan plan;
  MF_ASSIGN_OR_RETURN(plan.axis, NormalizeAxis(attrs.axis, static_cast<int>(x.size())));
  std::vector<int64_t> split = attrs.split;
  if (attrs.split_from_input && split_input) {
    MF_ASSIGN_OR_RETURN(split, ReadInts(*split_input, "split"));
  }
  MF_ASSIGN_OR_RETURN(plan.sizes, SplitSizes(std::move(split), x[static_cast<size_t>(plan.axis)], attrs.outputs));
  return plan;
}

StatusOr<std::vector<int64_t>> SplitSizes(std::vector<int64_t> split, int64_t dim, size_t outputs) {
  if (split.empty()) {
    int64_t n = static_cast<int64_t>(outputs);
    int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0; i < n; ++i) split.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
  }
  if (split.size() != outputs)
    return InvalidArgument("split has " + std::to_string(split.size()) + " entries for " + std::to_string(outputs) +
                           " outputs");
  int64_t total = 0;
  for (int64_t s : split) {
    if (s < 0) return InvalidArgument("split sizes must not be negative");
    total += s;
  }
  if (total != dim)
    return InvalidArgument("split sizes sum to " + std::to_string(total) + ", the axis has " + std::to_string(dim));
  return split;
}

StatusOr<Shape> ExpandShape(const Shape& input, const std::vector<int64_t>& requested) {
  for (int64_t d : requested) {
    if (d < 0) return InvalidArgument("Expand shape has a negative dim");
  }
  return BroadcastShapes(input, requested);
}

StatusOr<Shape> TileShape(const Shape& input, const std::vector<int64_t>& repeats) {
  if (repeats.size() != input.size()) return InvalidArgument("Tile repeats must have one entry per dim");
  Shape shape = input;
  for (size_t i = 0; i < repeats.size(); ++i) {
    if (repeats[i] < 0) return InvalidArgument("Tile repeats must not be negative");
    if (__builtin_mul_overflow(shape[i], repeats[i], &shape[i])) return InvalidArgument("Tile output overflows");
  }
  return shape;
}

}  // namespace mf::runtime::ops
