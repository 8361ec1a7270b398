// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool as direct CUDA kernels, in
// NCHW or channels-last (Value::nhwc) on either side.
//
// Why not cudnnPoolingForward: cuDNN pads symmetrically only, has no dilations, and its
// ceil-mode and count_include_pad windows differ from ONNX's at the borders, so matching the
// shared geometry (ops/pool_geometry.h) would need a fallback for every one of those cases anyway. One thread per
// output element (adjacent threads on adjacent channels when channels-last, on adjacent columns
// otherwise) keeps the reads coalesced; pooling is memory-bound, so this runs at cuDNN's speed.
// 1-D and 2-D pools run as 3-D pools with leading unit dims, like the CPU kernel.
#include <array>
#include <cmath>

#include "runtime/cuda/device_util.cuh"
#include "runtime/cuda/dnn_util.h"
#include "runtime/ops/pool_geometry.h"

namespace mf::runtime::cuda {
namespace {

struct PoolParams {
  bool is_max = true;
  ops::PoolAttributes attrs;
  bool in_nhwc = false, out_nhwc = false;
  DataType dtype = DataType::kFloat32;
};

using ops::PoolDim;

// What the kernel needs, by value.
struct PoolArgs {
  int64_t n = 0, c = 0;
  PoolDim dim[3];
  bool is_max = true, include_pad = false, in_nhwc = false, out_nhwc = false;
};

template <typename T>
__global__ void PoolKernel(const T* x, T* y, PoolArgs a, int64_t total) {
  const PoolDim &D = a.dim[0], &H = a.dim[1], &W = a.dim[2];
  MF_GRID_STRIDE_LOOP(i, total) {
    int64_t rem = i, n, c, od, oh, ow;
    if (a.out_nhwc) {
      c = rem % a.c;
      rem /= a.c;
      ow = rem % W.out;
      rem /= W.out;
      oh = rem % H.out;
      rem /= H.out;
      od = rem % D.out;
      n = rem / D.out;
    } else {
      ow = rem % W.out;
      rem /= W.out;
      oh = rem % H.out;
      rem /= H.out;
      od = rem % D.out;
      rem /= D.out;
      c = rem % a.c;
      n = rem / a.c;
    }
    int64_t d0 = od * D.s - D.pb, h0 = oh * H.s - H.pb, w0 = ow * W.s - W.pb;
    float acc = a.is_max ? -INFINITY : 0.f;
    int64_t valid = 0;
    for (int64_t kd = 0; kd < D.k; ++kd) {
      int64_t id = d0 + kd * D.d;
      if (id < 0 || id >= D.in) continue;
      for (int64_t kh = 0; kh < H.k; ++kh) {
        int64_t ih = h0 + kh * H.d;
        if (ih < 0 || ih >= H.in) continue;
        for (int64_t kw = 0; kw < W.k; ++kw) {
          int64_t iw = w0 + kw * W.d;
          if (iw < 0 || iw >= W.in) continue;
          int64_t at = a.in_nhwc ? (((n * D.in + id) * H.in + ih) * W.in + iw) * a.c + c
                                 : (((n * a.c + c) * D.in + id) * H.in + ih) * W.in + iw;
          float v = static_cast<float>(Load(x, at));
          if (a.is_max) {
            acc = v > acc || isnan(v) ? v : acc;
          } else {
            acc += v;
          }
          ++valid;
        }
      }
    }
    if (!a.is_max) {
      int64_t count =
          a.include_pad ? ops::PoolPaddedSpan(d0, D) * ops::PoolPaddedSpan(h0, H) * ops::PoolPaddedSpan(w0, W) : valid;
      acc = count > 0 ? acc / static_cast<float>(count) : 0.f;
    }
    Store(y, i, acc);
  }
}

// std::max semantics (a NaN after the first element is skipped), as the CPU global max.
__device__ __forceinline__ float MaxLikeStd(float acc, float v) { return acc < v ? v : acc; }

// Contiguous planes (NC... order): one warp per plane, lanes striding the plane.
template <typename T>
__global__ void GlobalPoolPlanesKernel(const T* x, T* y, int64_t planes, int64_t size, bool is_max) {
  int lane = threadIdx.x & 31;
  int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
  int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t p = warp; p < planes; p += warps) {  // uniform per warp: every lane shuffles
    const T* s = x + p * size;
    float acc = is_max ? -INFINITY : 0.f;
    for (int64_t j = lane; j < size; j += 32) {
      float v = static_cast<float>(Load(s, j));
      acc = is_max ? MaxLikeStd(acc, v) : acc + v;
    }
    for (int off = 16; off > 0; off >>= 1) {
      float o = __shfl_down_sync(0xffffffffu, acc, off);
      acc = is_max ? MaxLikeStd(acc, o) : acc + o;
    }
    if (lane == 0) Store(y, p, is_max ? acc : (size ? acc / static_cast<float>(size) : 0.f));
  }
}

// Channels-last 4-D input: one thread per (n, c), adjacent threads on adjacent channels.
template <typename T>
__global__ void GlobalPoolNhwcKernel(const T* x, T* y, int64_t n, int64_t c, int64_t hw, bool is_max) {
  MF_GRID_STRIDE_LOOP(i, n * c) {
    int64_t b = i / c, ch = i - b * c;
    const T* s = x + b * hw * c + ch;
    float acc = is_max ? -INFINITY : 0.f;
    for (int64_t p = 0; p < hw; ++p) {
      float v = static_cast<float>(Load(s, p * c));
      acc = is_max ? MaxLikeStd(acc, v) : acc + v;
    }
    Store(y, i, is_max ? acc : (hw ? acc / static_cast<float>(hw) : 0.f));
  }
}

Status RunPool(const PoolParams& p, const Tensor& x, Tensor& out) {
  if ((p.in_nhwc || p.out_nhwc) && x.rank() != 4) return Internal("channels-last pooling needs a 4-D input");
  MF_ASSIGN_OR_RETURN(auto dims, ops::PoolGeometry(p.attrs, x.shape()));
  Shape out_shape = ops::PoolOutputShape(x.shape(), dims);
  MF_ASSIGN_OR_RETURN(out, AllocateDevice(p.dtype, out_shape));
  int64_t total = out.num_elements();
  if (total == 0) return Status::Ok();
  PoolArgs a;
  a.n = x.dim(0);
  a.c = x.dim(1);
  for (int i = 0; i < 3; ++i) a.dim[i] = dims[static_cast<size_t>(i)];
  a.is_max = p.is_max;
  a.include_pad = p.attrs.count_include_pad != 0;
  a.in_nhwc = p.in_nhwc;
  a.out_nhwc = p.out_nhwc;
  cudaStream_t s = Current().stream;
  if (p.dtype == DataType::kFloat16) {
    PoolKernel<<<BlocksFor(total), kThreads, 0, s>>>(x.data<__half>(), out.data<__half>(), a, total);
  } else {
    PoolKernel<<<BlocksFor(total), kThreads, 0, s>>>(x.data<float>(), out.data<float>(), a, total);
  }
  MF_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

Status RunGlobalPool(bool is_max, bool in_nhwc, DataType dtype, const Tensor& x, Tensor& out) {
  MF_ASSIGN_OR_RETURN(Shape shape, ops::GlobalPoolShape(x.shape()));
  if (in_nhwc && x.rank() != 4) return Internal("channels-last global pooling needs a 4-D input");
  // [N, C, 1, 1] has the same element order in NCHW and NHWC: the output layout needs nothing.
  MF_ASSIGN_OR_RETURN(out, AllocateDevice(dtype, shape));
  int64_t planes = x.dim(0) * x.dim(1);
  if (planes == 0) return Status::Ok();
  int64_t size = x.num_elements() / planes;
  cudaStream_t s = Current().stream;
  auto launch = [&](auto* in, auto* o) {
    if (in_nhwc) {
      GlobalPoolNhwcKernel<<<BlocksFor(planes), kThreads, 0, s>>>(in, o, x.dim(0), x.dim(1), size, is_max);
    } else {
      GlobalPoolPlanesKernel<<<BlocksFor(planes * 32), kThreads, 0, s>>>(in, o, planes, size, is_max);
    }
  };
  if (dtype == DataType::kFloat16) {
    launch(x.data<__half>(), out.data<__half>());
  } else {
    launch(x.data<float>(), out.data<float>());
  }
  MF_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

StatusOr<DataType> RequireDeviceFloatInput(const KernelInit& init) {
  if (!init.has_input(0)) return init.Error(StatusCode::kInvalidArgument, "input 0 is missing");
  if (!IsDeviceFloat(init.dtype(0))) {
    return init.Error(StatusCode::kUnimplemented,
                      "element type " + std::string(DataTypeName(init.dtype(0))) + " on the GPU");
  }
  return init.dtype(0);
}

StatusOr<BoundKernel> PoolFactory(const KernelInit& init, bool is_max) {
  PoolParams p;
  MF_ASSIGN_OR_RETURN(p.dtype, RequireDeviceFloatInput(init));
  p.is_max = is_max;
  MF_ASSIGN_OR_RETURN(p.attrs, ops::ReadPoolAttributes(init));
  p.in_nhwc = init.input_is_nhwc(0);
  p.out_nhwc = init.output_nhwc;
  std::vector<DataType> outs(init.node.outputs.size(), DataType::kInt64);
  outs[0] = p.dtype;
  return Bind(
      [p](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return RunPool(p, *in[0], out[0]); }, outs);
}

StatusOr<BoundKernel> GlobalPoolFactory(const KernelInit& init, bool is_max) {
  MF_ASSIGN_OR_RETURN(DataType dtype, RequireDeviceFloatInput(init));
  bool in_nhwc = init.input_is_nhwc(0);
  return Bind(
      [is_max, in_nhwc, dtype](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
        return RunGlobalPool(is_max, in_nhwc, dtype, *in[0], out[0]);
      },
      {dtype});
}

}  // namespace

void RegisterPoolKernels(KernelRegistry* registry) {
  registry->Register({"MaxPool", 1, [](const KernelInit& i) { return PoolFactory(i, true); }, "float, float16"});
  registry->Register({"AveragePool", 1, [](const KernelInit& i) { return PoolFactory(i, false); }, "float, float16"});
  registry->Register(
      {"GlobalAveragePool", 1, [](const KernelInit& i) { return GlobalPoolFactory(i, false); }, "float, float16"});
  registry->Register(
      {"GlobalMaxPool", 1, [](const KernelInit& i) { return GlobalPoolFactory(i, true); }, "float, float16"});
}

}  // namespace mf::runtime::cuda
