// Softmax and LogSoftmax: the axis attribute and the rows the input splits into, shared by the
// CPU and CUDA kernels. Before opset 13 the input is coerced to 2-D at `axis` (default 1); from
// 13 the softmax runs along `axis` (default -1).
#pragma once

#include <cstdint>

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

struct SoftmaxAttributes {
  int64_t axis = -1;
  bool coerce_2d = false;  // opset < 13: every dim from the axis on is one row
};
StatusOr<SoftmaxAttributes> ReadSoftmaxAttributes(const KernelInit& init);

// The input as [outer, len, inner]: outer * inner rows of `len` elements spaced `inner` apart.
struct SoftmaxRows {
  int64_t outer = 1, len = 1, inner = 1;
};
StatusOr<SoftmaxRows> PlanSoftmax(const SoftmaxAttributes& attrs, const Shape& x);

}  // namespace mf::runtime::ops
