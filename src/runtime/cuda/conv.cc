#include "runtime/cuda/cuda_common.h"

namespace mf::runtime::cuda {

void RegisterConvKernels(KernelRegistry* /*registry*/) {}

}  // namespace mf::runtime::cuda
