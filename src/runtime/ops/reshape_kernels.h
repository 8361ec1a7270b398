// Reshape, Flatten, Squeeze and Unsqueeze only give the input's elements a new shape. Both
// backends bind these same factories and differ only in how the elements are copied (a host
// memcpy, or a device-to-device copy): one definition of each op for both.
#pragma once

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

// Copies `x` into a new tensor of `shape` (same element count) in the backend's memory.
using CopyWithShapeFn = StatusOr<Tensor> (*)(const Tensor& x, Shape shape);

// Registers the four ops. With `device`, their shape/axes inputs are declared host_inputs (the
// CUDA executor then hands them over in host memory).
void RegisterReshapeKernels(KernelRegistry* registry, CopyWithShapeFn copy, bool device);

}  // namespace mf::runtime::ops
