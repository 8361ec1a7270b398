// cuBLASLt is loaded on first use of the CUDA backend, not when a binary starts: mapping and
// relocating libcublasLt costs ~150 MiB of resident memory, which a CPU-only server or
// modelfleet-run must not pay. cublaslt_loader.cc defines the cuBLASLt functions we call as
// forwarders to the library opened with dlopen (we do not link it).
#pragma once

#include "common/status.h"

namespace mf::runtime::cuda {

// Opens libcublasLt once; UNAVAILABLE with the loader's reason when it cannot be found.
Status LoadCublasLt();

}  // namespace mf::runtime::cuda
