// The process-wide GPU memory cap of the runtime's CUDA sessions (part of the Session API:
// session.h includes this header).
#pragma once

#include <cstddef>

#include "common/status.h"

namespace mf::runtime {

// Caps the GPU memory this process's CUDA sessions use on GPU `device_id` (weights, activations,
// scratch, CUDA graphs) at `fraction` (0, 1] of its total memory, as TF Serving's
// per_process_gpu_memory_fraction; 0 lifts the cap. A load or a run that would exceed it fails
// with RESOURCE_EXHAUSTED and changes nothing else. UNAVAILABLE without a CUDA build or that GPU.
Status SetGpuMemoryFraction(int device_id, double fraction);
// GPU memory this process's sessions use on `device_id` now (0 without CUDA).
size_t GpuMemoryInUse(int device_id);

}  // namespace mf::runtime
