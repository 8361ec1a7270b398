#include "runtime/ops/softmax_rules.h"

#include "runtime/ops/indexing.h"

namespace mf::runtime::ops {

StatusOr<SoftmaxAttributes> ReadSoftmaxAttributes(const KernelInit& init) {
  SoftmaxAttributes a;
  a.coerce_2d = init.opset < 13;
  MF_ASSIGN_OR_RETURN(a.axis, init.attrs().GetInt("axis", a.coerce_2d ? 1 : -1));
  return a;
}

StatusOr<SoftmaxRows> PlanSoftmax(const SoftmaxAttributes& attrs, const Shape& x) {
  const int rank = static_cast<int>(x.size());
  MF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(attrs.axis, rank));
  SoftmaxRows r;
  for (int i = 0; i < rank; ++i) {
    const int64_t d = x[static_cast<size_t>(i)];
    if (i < axis)
      r.outer *= d;
    else if (i == axis || attrs.coerce_2d)
      r.len *= d;
    else
      r.inner *= d;
  }
  return r;
}

}  // namespace mf::runtime::ops
