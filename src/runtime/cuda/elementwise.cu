#include "runtime/cuda/cuda_common.h"

namespace mf::runtime::cuda {

void RegisterElementwiseKernels(KernelRegistry* /*registry*/) {}

}  // namespace mf::runtime::cuda
