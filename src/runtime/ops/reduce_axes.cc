#include "runtime/ops/reduce_axes.h"

#include "runtime/ops/indexing.h"

namespace mf::runtime::ops {

StatusOr<ReduceAttributes> ReadReduceAttributes(const KernelInit& init, int64_t axes_input_since) {
  ReduceAttributes r;
  r.axes_from_input = init.opset >= axes_input_since;
  MF_ASSIGN_OR_RETURN(r.axes, init.attrs().GetInts("axes", {}));
  MF_ASSIGN_OR_RETURN(int64_t keepdims, init.attrs().GetInt("keepdims", 1));
  MF_ASSIGN_OR_RETURN(int64_t noop_empty, init.attrs().GetInt("noop_with_empty_axes", 0));
  r.keepdims = keepdims != 0;
  r.noop_with_empty_axes = noop_empty != 0;
  return r;
}

StatusOr<ArgReduceAttributes> ReadArgReduceAttributes(const KernelInit& init) {
  ArgReduceAttributes r;
  MF_ASSIGN_OR_RETURN(r.axis, init.attrs().GetInt("axis", 0));
  MF_ASSIGN_OR_RETURN(int64_t keepdims, init.attrs().GetInt("keepdims", 1));
  MF_ASSIGN_OR_RETURN(int64_t last, init.attrs().GetInt("select_last_index", 0));
  r.keepdims = keepdims != 0;
  r.select_last_index = last != 0;
  return r;
}

StatusOr<std::vector<bool>> ReducedAxes(const ReduceAttributes& attrs, const Tensor* axes_input, int rank) {
  std::vector<int64_t> axes = attrs.axes;
  if (attrs.axes_from_input && axes_input) {
    MF_ASSIGN_OR_RETURN(axes, ReadInts(*axes_input, "axes"));
  }
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty() && !attrs.noop_with_empty_axes);
  for (int64_t a : axes) {
    MF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(a, rank));
    reduced[static_cast<size_t>(axis)] = true;
  }
  return reduced;
}

ReduceShape ReducedShape(const Shape& x, const std::vector<bool>& reduced, bool keepdims) {
  ReduceShape r;
  for (size_t i = 0; i < x.size(); ++i) {
    if (reduced[i]) {
      r.count *= x[i];
      if (keepdims) r.shape.push_back(1);
    } else {
      r.shape.push_back(x[i]);
    }
  }
  return r;
}

StatusOr<ArgReducePlan> PlanArgReduce(const Shape& x, int64_t axis_attr, bool keepdims) {
  ArgReducePlan p;
  MF_ASSIGN_OR_RETURN(p.axis, NormalizeAxis(axis_attr, static_cast<int>(x.size())));
  size_t axis = static_cast<size_t>(p.axis);
  if (x.empty() || x[axis] == 0) return InvalidArgument("cannot take the arg-extreme of an empty axis");
  p.len = x[axis];
  for (size_t i = 0; i < x.size(); ++i) {
    if (i < axis) p.outer *= x[i];
    if (i > axis) p.inner *= x[i];
  }
  p.shape = x;
  if (keepdims)
    p.shape[axis] = 1;
  else
    p.shape.erase(p.shape.begin() + p.axis);
  return p;
}

}  // namespace mf::runtime::ops
