#include "runtime/cuda/cuda_common.h"

namespace mf::runtime::cuda {

void RegisterDataKernels(KernelRegistry* /*registry*/) {}

}  // namespace mf::runtime::cuda
