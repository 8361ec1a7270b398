#include "runtime/cuda/cuda_common.h"

namespace mf::runtime::cuda {

void RegisterReduceKernels(KernelRegistry* /*registry*/) {}

}  // namespace mf::runtime::cuda
