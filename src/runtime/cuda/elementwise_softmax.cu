// Softmax and LogSoftmax: one block per row, numerically stable (max subtracted), float
// accumulation whatever the storage type. Rows longer than the block are covered by a
// block-stride loop; elements of a row may be `inner` apart (opset 13 on a non-last axis).
#include <cmath>

#include "runtime/cuda/device_util.cuh"
#include "runtime/cuda/elementwise_internal.cuh"
#include "runtime/ops/softmax_rules.h"

namespace mf::runtime::cuda::elementwise {
namespace {

inline constexpr int kWarp = 32;

// Reduces `v` over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the
// result. `scratch` holds one float per warp.
template <bool kMax>
__device__ float BlockReduce(float v, float* scratch) {
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  const int warp = static_cast<int>(threadIdx.x) / kWarp, lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warps = static_cast<int>(blockDim.x) / kWarp;
  __syncthreads();  // the previous reduction's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : (kMax ? -INFINITY : 0.f);
  for (int o = kWarp / 2; o > 0; o >>= 1) {
    float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = kMax ? fmaxf(v, other) : v + other;
  }
  return v;
}

template <typename T>
__global__ void SoftmaxRows(const T* x, T* y, int64_t rows, int64_t len, int64_t inner, bool log) {
  __shared__ float scratch[kWarp];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t base = (row / inner) * len * inner + row % inner;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      mx = fmaxf(mx, static_cast<float>(Load(x, base + j * inner)));
    mx = BlockReduce<true>(mx, scratch);
    float sum = 0.f;
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x)
      sum += expf(static_cast<float>(Load(x, base + j * inner)) - mx);
    sum = BlockReduce<false>(sum, scratch);
    if (log) {
      const float shift = mx + logf(sum);
      for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
        Store(y, base + j * inner, static_cast<float>(Load(x, base + j * inner)) - shift);
      }
    } else {
      const float inv = 1.f / sum;
      for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
        Store(y, base + j * inner, expf(static_cast<float>(Load(x, base + j * inner)) - mx) * inv);
      }
    }
  }
}

// A power of two in [32, 256]: short rows do not leave most of a 256-thread block idle.
int ThreadsForRow(int64_t len) {
  int threads = kWarp;
  while (threads < 256 && threads < len) threads *= 2;
  return threads;
}

}  // namespace

// Rows of `len` elements spaced `inner` apart (ops::PlanSoftmax).
StatusOr<BoundKernel> SoftmaxFactory(const KernelInit& init, bool log) {
  MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 0));
  MF_ASSIGN_OR_RETURN(ops::SoftmaxAttributes attrs, ops::ReadSoftmaxAttributes(init));
  const DataType t = init.dtype(0);
  return Bind(
      [attrs, log, t](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(ops::SoftmaxRows plan, ops::PlanSoftmax(attrs, x.shape()));
        const int64_t len = plan.len, inner = plan.inner;
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(t, x.shape()));
        const int64_t rows = plan.outer * inner;
        if (rows == 0 || len == 0) return Status::Ok();
        const unsigned blocks = static_cast<unsigned>(rows > (1 << 20) ? (1 << 20) : rows);
        const int threads = ThreadsForRow(len);
        cudaStream_t s = Current().stream;
        if (t == DataType::kFloat16) {
          SoftmaxRows<<<blocks, threads, 0, s>>>(x.data<__half>(), out[0].data<__half>(), rows, len, inner, log);
        } else {
          SoftmaxRows<<<blocks, threads, 0, s>>>(x.data<float>(), out[0].data<float>(), rows, len, inner, log);
        }
        MF_CUDA_RETURN_IF_LAUNCH_FAILED();
        return Status::Ok();
      },
      {t});
}

}  // namespace mf::runtime::cuda::elementwise
