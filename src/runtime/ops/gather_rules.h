// Gather, GatherElements and Trilu: output shapes, index range checks and the triangle bound,
// shared by the CPU and CUDA kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

// Indices must be int32 or int64 (the bind-time check; callers add the node prefix).
inline bool IsIndexType(DataType t) { return t == DataType::kInt64 || t == DataType::kInt32; }

// Gather along `axis`: data[:axis] + indices + data[axis+1:].
struct GatherPlan {
  int axis = 0;
  Shape shape;
  int64_t outer = 1;  // product of data dims before the axis
  int64_t dim = 0;    // the axis' extent
  int64_t inner = 1;  // product of data dims after the axis (elements)
};
StatusOr<GatherPlan> PlanGather(const Shape& data, const Shape& indices, int64_t axis);

// Checks one Gather index against the axis' extent and returns it in [0, dim).
StatusOr<int64_t> GatherIndex(int64_t index, int64_t dim);

// GatherElements: the normalized axis; indices must have the data's rank and fit off the axis.
StatusOr<int> GatherElementsAxis(const Shape& data, const Shape& indices, int64_t axis);
// Checks one GatherElements index against the axis' extent and returns it in [0, dim).
StatusOr<int64_t> GatherElementsIndex(int64_t index, int64_t dim);

// Reads an int32/int64 index tensor (host memory) into int64s.
std::vector<int64_t> ReadIndices(const Tensor& indices);

// Trilu's k from its optional input (a one-element int tensor), 0 when absent.
StatusOr<int64_t> TriluK(const Tensor* k);
// k clamped into [-rows - 1, cols + 1] on the side that matters, so that comparing j - i with
// it never meets an extreme value: element (i, j) is kept when j - i >= k (upper) or <= k.
int64_t ClampTriluK(int64_t k, bool upper, int64_t rows, int64_t cols);

}  // namespace mf::runtime::ops
