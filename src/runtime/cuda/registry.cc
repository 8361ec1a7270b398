#include "runtime/cuda/cuda_common.h"

namespace mf::runtime::cuda {

const KernelRegistry& CudaKernels() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();  // never destroyed: kernels may run during static teardown
    RegisterElementwiseKernels(r);
    RegisterDataKernels(r);
    RegisterReduceKernels(r);
    RegisterConvKernels(r);
    RegisterMatMulKernels(r);
    return r;
  }();
  return *registry;
}

}  // namespace mf::runtime::cuda
