// Dropout at inference is Identity (plus an all-true mask when asked for): what a node may ask
// for, once for the CPU and CUDA kernels.
#pragma once

#include "common/status.h"
#include "runtime/kernel.h"

namespace mf::runtime::ops {

// For a Dropout node, refuses training mode (a training_mode input that is not a constant false)
// and returns whether the node wants the mask output. Any other node (Identity): false.
StatusOr<bool> ReadDropoutMaskOutput(const KernelInit& init);

}  // namespace mf::runtime::ops
