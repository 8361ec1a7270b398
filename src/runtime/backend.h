// A backend is the set of kernels for one device. The graph, its passes and the executor are
// shared; only the registry differs (the CUDA backend registers kernels that take and return
// device-resident tensors behind the same Kernel interface).
#pragma once

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/session.h"

namespace mf::runtime {

// The kernels of `backend`; UNAVAILABLE when it is not built in or has no device.
StatusOr<const KernelRegistry*> KernelsFor(Backend backend);

namespace cpu {
const KernelRegistry& CpuKernels();
}  // namespace cpu

}  // namespace mf::runtime
