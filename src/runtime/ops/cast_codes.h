// Cast's `to` attribute: the ONNX TensorProto element-type codes the kernels convert to, shared
// by the CPU and CUDA Cast kernels (which each check the source types they handle).
#pragma once

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

// The target type of `init`'s Cast node: codes 1..13 except 8 (string) and 10 (float16);
// UNIMPLEMENTED (with the node prefix) for the others.
StatusOr<DataType> ReadCastTarget(const KernelInit& init);

}  // namespace mf::runtime::ops
