#include "runtime/ops/gather_rules.h"

#include <algorithm>
#include <string>

#include "runtime/ops/indexing.h"

namespace mf::runtime::ops {

StatusOr<GatherPlan> PlanGather(const Shape& data, const Shape& indices, int64_t axis_attr) {
  GatherPlan plan;
  MF_ASSIGN_OR_RETURN(plan.axis, NormalizeAxis(axis_attr, static_cast<int>(data.size())));
  if (data.empty()) return InvalidArgument("Gather data must be at least 1-D");
  size_t axis = static_cast<size_t>(plan.axis);
  plan.shape.assign(data.begin(), data.begin() + plan.axis);
  plan.shape.insert(plan.shape.end(), indices.begin(), indices.end());
  plan.shape.insert(plan.shape.end(), data.begin() + plan.axis + 1, data.end());
  for (size_t i = 0; i < axis; ++i) plan.outer *= data[i];
  plan.dim = data[axis];
  for (size_t i = axis + 1; i < data.size(); ++i) plan.inner *= data[i];
  return plan;
}

StatusOr<int64_t> GatherIndex(int64_t v, int64_t dim) {
  if (v < -dim || v >= dim)
    return InvalidArgument("Gather index " + std::to_string(v) + " is out of range for a dim of " +
                           std::to_string(dim));
  return v < 0 ? v + dim : v;
}

StatusOr<int> GatherElementsAxis(const Shape& data, const Shape& indices, int64_t axis_attr) {
  MF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_attr, static_cast<int>(data.size())));
  if (indices.size() != data.size()) return InvalidArgument("GatherElements indices must have the data's rank");
  for (size_t d = 0; d < data.size(); ++d) {
    if (static_cast<int>(d) != axis && indices[d] > data[d])
      return InvalidArgument("GatherElements indices exceed the data's shape");
  }
  return axis;
}

StatusOr<int64_t> GatherElementsIndex(int64_t k, int64_t dim) {
  if (k < -dim || k >= dim) return InvalidArgument("GatherElements index " + std::to_string(k) + " is out of range");
  return k < 0 ? k + dim : k;
}

std::vector<int64_t> ReadIndices(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.num_elements()));
  for (size_t k = 0; k < v.size(); ++k)
    v[k] = t.dtype() == DataType::kInt64 ? t.data<int64_t>()[k] : t.data<int32_t>()[k];
  return v;
}

StatusOr<int64_t> TriluK(const Tensor* k) {
  if (k == nullptr) return int64_t{0};
  MF_ASSIGN_OR_RETURN(std::vector<int64_t> kv, ReadInts(*k, "k"));
  if (kv.size() != 1) return InvalidArgument("Trilu k must be a scalar");
  return kv[0];
}

int64_t ClampTriluK(int64_t k, bool upper, int64_t rows, int64_t cols) {
  return upper ? (k <= 0 ? std::max(k, -rows - 1) : std::min(k, cols + 1))
               : (k >= 0 ? std::min(k, cols + 1) : std::max(k, -rows - 1));
}

}  // namespace mf::runtime::ops
