// A backend is the set of kernels for one device, behind the one Kernel interface (the CUDA
// backend's kernels take and return device-resident tensors). The graph and its passes are shared;
// the executors are not: the CPU backend runs on ExecutionPlan, the CUDA backend on CudaPlan
// (cuda/cuda_plan.h: placement, device memory, CUDA graphs), which binds the CPU registry too for
// host-side shape arithmetic and the nodes it falls back on. Session picks the executor by backend.
#pragma once

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/session_options.h"

namespace mf::runtime {

// The kernels of `backend`; UNAVAILABLE when it is not built in or has no device.
StatusOr<const KernelRegistry*> KernelsFor(Backend backend);

namespace cpu {
const KernelRegistry& CpuKernels();
}  // namespace cpu

}  // namespace mf::runtime
