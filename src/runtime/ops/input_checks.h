// Bind-time checks of a node's inputs that mean the same on every backend (the element-type
// checks that differ per backend stay with the kernels).
#pragma once

#include <cstddef>

#include "common/status.h"
#include "runtime/kernel.h"

namespace mf::runtime::ops {

// Input `i` is present.
Status RequireInput(const KernelInit& init, size_t i);

// Input `i` is present and of a fixed-width element type (not string): what the data-movement
// kernels handle.
Status RequireFixedWidth(const KernelInit& init, size_t i);

}  // namespace mf::runtime::ops
