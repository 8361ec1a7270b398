// Bind-time checks of a node's inputs that mean the same on every backend. Which element types a
// kernel has differs per backend: the backend passes its set, the check and its message are here.
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

// At least one input, all present and of one element type (Sum, Mean, Max, Min).
Status RequireInputsOfOneType(const KernelInit& init);

// UNIMPLEMENTED "element type T is not supported": a type the backend's kernel lacks.
Status UnsupportedElementType(const KernelInit& init, DataType t);

// Input 0 is present (INVALID_ARGUMENT "missing input") and `supported(type)` holds for its
// element type (else UnsupportedElementType).
template <typename Supported>
Status RequireDataInput(const KernelInit& init, Supported&& supported) {
  if (!init.has_input(0)) return init.Error(StatusCode::kInvalidArgument, "missing input");
  if (!supported(init.dtype(0))) return UnsupportedElementType(init, init.dtype(0));
  return Status::Ok();
}

}  // namespace mf::runtime::ops
