// Normalizations on the GPU: LayerNormalization (the BERT hot path) and BatchNormalization in its
// inference form. Validation and messages mirror cpu/norm.cc; float32 and float16 (FP16 mode)
// tensors, statistics always computed in float.
#include <algorithm>
#include <string>
#include <vector>

#include "runtime/cuda/data_common.h"
#include "runtime/cuda/device_util.cuh"
#include "runtime/ops/norm_rules.h"

namespace mf::runtime::cuda {
namespace {

// Sum over the block of one float per thread; every thread gets the total. `scratch` holds 32
// floats. blockDim.x is a multiple of 32.
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  __syncthreads();  // scratch may still be read from the previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Scale and bias: either exactly [cols] (direct index) or a shape that broadcasts to the
// normalised dims (through the indexer).
struct Affine {
  bool direct = true;
  Broadcast index;
};

template <typename T>
__device__ __forceinline__ float AffineAt(const T* p, const Affine& a, int64_t col) {
  return static_cast<float>(Load(p, a.direct ? col : a.index.Offset(col)));
}

// One block per row. When the row fits in shared memory it is read from global memory once
// (converted to float) and the variance and output passes read the staged copy.
template <typename T>
__global__ void LayerNormKernel(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ bias,
                                T* __restrict__ y, T* __restrict__ mean_out, T* __restrict__ inv_out, int64_t rows,
                                int64_t cols, float eps, Affine scale_at, Affine bias_at, bool staged) {
  extern __shared__ float row_cache[];
  __shared__ float scratch[32];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    float sum = 0.f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      float v = static_cast<float>(Load(xr, i));
      if (staged) row_cache[i] = v;
      sum += v;
    }
    const float mean = BlockSum(sum, scratch) / static_cast<float>(cols);
    float sq = 0.f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      float d = (staged ? row_cache[i] : static_cast<float>(Load(xr, i))) - mean;
      sq += d * d;
    }
    const float inv = rsqrtf(BlockSum(sq, scratch) / static_cast<float>(cols) + eps);
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
      float v = staged ? row_cache[i] : static_cast<float>(Load(xr, i));
      float out = (v - mean) * inv * AffineAt(scale, scale_at, i);
      if (bias) out += AffineAt(bias, bias_at, i);
      Store(y, r * cols + i, out);
    }
    if (threadIdx.x == 0) {
      if (mean_out) Store(mean_out, r, mean);
      if (inv_out) Store(inv_out, r, inv);
    }
    __syncthreads();  // row_cache is rewritten by the next row
  }
}

// Largest row staged in shared memory: static and dynamic shared memory together must stay
// within the default 48 KiB (the scratch array takes 128 bytes).
constexpr int64_t kMaxStagedCols = (47 << 10) / sizeof(float);

StatusOr<BoundKernel> LayerNormFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 0));
  MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 1));
  if (init.has_input(2)) MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 2));
  DataType t = init.dtype(0);
  if (t != DeviceFloatType(init.precision) || init.dtype(1) != t || (init.has_input(2) && init.dtype(2) != t)) {
    return init.Error(StatusCode::kUnimplemented, "mixed float types are not supported on the GPU");
  }
  MF_ASSIGN_OR_RETURN(ops::LayerNormAttributes attrs, ops::ReadLayerNormAttributes(init));
  // Mean and InvStdDev are float32 in the model: the device float type here.
  std::vector<DataType> outs(init.node.outputs.size(), t);
  return Bind(
      [attrs](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(ops::LayerNormPlan plan, ops::PlanLayerNorm(x.shape(), attrs.axis));
        int64_t rows = plan.rows, cols = plan.cols;
        const Shape& norm_shape = plan.norm_shape;
        auto affine = [&](const Tensor* p, Affine* a) -> Status {
          if (!p) return Status::Ok();
          MF_RETURN_IF_ERROR(ops::CheckLayerNormParameter(p->shape(), norm_shape));
          a->direct = p->num_elements() == cols;
          if (!a->direct) {
            MF_ASSIGN_OR_RETURN(a->index, MakeBroadcast(p->shape(), norm_shape));
          }
          return Status::Ok();
        };
        const Tensor* bias = in.size() > 2 ? in[2] : nullptr;
        Affine scale_at, bias_at;
        MF_RETURN_IF_ERROR(affine(in[1], &scale_at));
        MF_RETURN_IF_ERROR(affine(bias, &bias_at));
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), x.shape()));
        for (size_t k = 1; k < out.size() && k < 3; ++k) {
          MF_ASSIGN_OR_RETURN(out[k], AllocateDevice(x.dtype(), plan.stat_shape));
        }
        if (rows == 0) return Status::Ok();
        int threads = static_cast<int>(32 * std::clamp<int64_t>((cols + 127) / 128, 1, 16));
        bool staged = cols <= kMaxStagedCols;
        size_t shared = staged ? static_cast<size_t>(cols) * sizeof(float) : 0;
        unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, 1 << 20));
        cudaStream_t s = Current().stream;
        return DispatchDeviceFloat(x.dtype(), [&](auto tag) -> Status {
          using T = decltype(tag);
          LayerNormKernel<T><<<blocks, threads, shared, s>>>(
              x.data<T>(), in[1]->data<T>(), bias ? bias->data<T>() : nullptr, out[0].data<T>(),
              out.size() > 1 ? out[1].data<T>() : nullptr, out.size() > 2 ? out[2].data<T>() : nullptr, rows, cols,
              attrs.epsilon, scale_at, bias_at, staged);
          MF_CUDA_RETURN_IF_LAUNCH_FAILED();
          return Status::Ok();
        });
      },
      outs);
}

// y = (x - mean[c]) * scale[c] / sqrt(var[c] + eps) + b[c], c the channel of each element: dim 1
// of NC... data, or the innermost dim of channels-last data.
template <typename T>
__global__ void BatchNormKernel(const T* __restrict__ x, const T* __restrict__ scale, const T* __restrict__ b,
                                const T* __restrict__ mean, const T* __restrict__ var, T* __restrict__ y, int64_t n,
                                int64_t channels, int64_t inner, bool channels_last, float eps) {
  MF_GRID_STRIDE_LOOP(i, n) {
    int64_t c = channels_last ? i % channels : (i / inner) % channels;
    float s = static_cast<float>(Load(scale, c)) / sqrtf(static_cast<float>(Load(var, c)) + eps);
    float shift = static_cast<float>(Load(b, c)) - static_cast<float>(Load(mean, c)) * s;
    Store(y, i, static_cast<float>(Load(x, i)) * s + shift);
  }
}

StatusOr<BoundKernel> BatchNormFactory(const KernelInit& init) {
  for (size_t i = 0; i < 5; ++i) MF_RETURN_IF_ERROR(RequireDeviceFloat(init, i));
  DataType t = init.dtype(0);
  for (size_t i = 1; i < 5; ++i) {
    if (init.dtype(i) != t)
      return init.Error(StatusCode::kUnimplemented, "mixed float types are not supported on the GPU");
  }
  MF_ASSIGN_OR_RETURN(float eps, ops::ReadBatchNormEpsilon(init));
  bool in_nhwc = init.input_is_nhwc(0);
  if (in_nhwc != init.output_nhwc) {
    return init.Error(StatusCode::kUnimplemented,
                      "a layout change inside BatchNormalization is not supported on the GPU");
  }
  std::vector<DataType> outs(init.node.outputs.size(), t);
  return Bind(
      [eps, in_nhwc](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        const Tensor* const params[4] = {in[1], in[2], in[3], in[4]};
        MF_ASSIGN_OR_RETURN(ops::BatchNormShape bn, ops::CheckBatchNorm(x, params));
        int64_t c = bn.c, inner = bn.inner;
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), x.shape()));
        int64_t total = x.num_elements();
        if (total == 0) return Status::Ok();
        cudaStream_t s = Current().stream;
        return DispatchDeviceFloat(x.dtype(), [&](auto tag) -> Status {
          using T = decltype(tag);
          BatchNormKernel<T><<<BlocksFor(total), kThreads, 0, s>>>(x.data<T>(), in[1]->data<T>(), in[2]->data<T>(),
                                                                   in[3]->data<T>(), in[4]->data<T>(), out[0].data<T>(),
                                                                   total, c, inner, in_nhwc, eps);
          MF_CUDA_RETURN_IF_LAUNCH_FAILED();
          return Status::Ok();
        });
      },
      outs);
}

}  // namespace

void RegisterNormKernels(KernelRegistry* r) {
  r->Register({"BatchNormalization", 7, BatchNormFactory, "float"});
  r->Register({"LayerNormalization", 17, LayerNormFactory, "float"});
}

}  // namespace mf::runtime::cuda
