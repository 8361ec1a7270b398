#include "runtime/backend.h"

#include "runtime/cpu/cpu_common.h"
#ifdef MODELFLEET_HAVE_CUDA
#include "runtime/cuda/cuda_common.h"
#endif

namespace mf::runtime {

namespace cpu {
const KernelRegistry& CpuKernels() {
  static const KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();  // never destroyed: kernels may run during static teardown
    RegisterElementwiseKernels(r);
    RegisterMatMulKernels(r);
    RegisterConvKernels(r);
    RegisterPoolKernels(r);
    RegisterNormKernels(r);
    RegisterReduceKernels(r);
    RegisterShapeKernels(r);
    RegisterDataKernels(r);
    RegisterResizeKernels(r);
    RegisterRecurrentKernels(r);
    return r;
  }();
  return *registry;
}
}  // namespace cpu

StatusOr<const KernelRegistry*> KernelsFor(Backend backend) {
  switch (backend) {
    case Backend::kCpu:
      return &cpu::CpuKernels();
    case Backend::kCuda:
#ifdef MODELFLEET_HAVE_CUDA
      return &cuda::CudaKernels();
#else
      return Unavailable("this build of the runtime has no CUDA backend (built without a CUDA toolkit)");
#endif
  }
  return InvalidArgument("unknown backend");
}

bool BackendFromName(std::string_view name, Backend* backend) {
  if (name == "cpu")
    *backend = Backend::kCpu;
  else if (name == "cuda")
    *backend = Backend::kCuda;
  else
    return false;
  return true;
}

bool PrecisionFromName(std::string_view name, Precision* precision) {
  if (name == "fp32")
    *precision = Precision::kFp32;
  else if (name == "tf32")
    *precision = Precision::kTf32;
  else if (name == "fp16")
    *precision = Precision::kFp16;
  else if (name == "bf16")
    *precision = Precision::kBf16;
  else
    return false;
  return true;
}

std::string_view BackendName(Backend backend) { return backend == Backend::kCpu ? "cpu" : "cuda"; }

}  // namespace mf::runtime
