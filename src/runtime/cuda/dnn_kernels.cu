// Device helpers of the cuDNN/cuBLASLt kernels: broadcast accumulation for Gemm's C and a
// Conv's broadcast residual.
#include "runtime/cuda/device_util.cuh"
#include "runtime/cuda/dnn_util.h"

namespace mf::runtime::cuda {
namespace {

template <typename T>
__global__ void BroadcastAxpyKernel(const T* src, Broadcast b, float scale, bool accumulate, T* dst, int64_t n) {
  MF_GRID_STRIDE_LOOP(i, n) {
    float v = scale * static_cast<float>(Load(src, b.Offset(i)));
    if (accumulate) v += static_cast<float>(Load(dst, i));
    Store(dst, i, v);
  }
}

}  // namespace

Status BroadcastAxpy(DataType dtype, const Tensor& src, float scale, bool accumulate, const Shape& dst_shape,
                     void* dst) {
  if (src.dtype() != dtype || !IsDeviceFloat(dtype)) return Internal("BroadcastAxpy: unexpected element type");
  MF_ASSIGN_OR_RETURN(Broadcast b, MakeBroadcast(src.shape(), dst_shape));
  int64_t n = NumElements(dst_shape);
  if (n <= 0) return Status::Ok();
  cudaStream_t s = Current().stream;
  if (dtype == DataType::kFloat32) {
    BroadcastAxpyKernel<<<BlocksFor(n), kThreads, 0, s>>>(src.data<float>(), b, scale, accumulate,
                                                          static_cast<float*>(dst), n);
  } else {
    BroadcastAxpyKernel<<<BlocksFor(n), kThreads, 0, s>>>(src.data<__half>(), b, scale, accumulate,
                                                          static_cast<__half*>(dst), n);
  }
  MF_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace mf::runtime::cuda
