// The Session API's process-wide GPU memory cap (gpu_memory.h), kept apart from session.cc so a
// build without CUDA needs no conditional code there.
#include "runtime/gpu_memory.h"

#ifdef MODELFLEET_HAVE_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda/device_memory.h"
#endif

namespace mf::runtime {

Status SetGpuMemoryFraction(int device_id, double fraction) {
#ifdef MODELFLEET_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device_id < 0 || device_id >= count) {
    cudaGetLastError();
    return Unavailable("no CUDA GPU " + std::to_string(device_id) + " is visible to this process");
  }
  return cuda::SetGpuMemoryFraction(device_id, fraction);
#else
  (void)device_id;
  (void)fraction;
  return Unavailable("this build of the runtime has no CUDA backend (built without a CUDA toolkit)");
#endif
}

size_t GpuMemoryInUse(int device_id) {
#ifdef MODELFLEET_HAVE_CUDA
  return cuda::GpuMemoryInUse(device_id);
#else
  (void)device_id;
  return 0;
#endif
}

}  // namespace mf::runtime
