// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool as direct CUDA kernels, in
// NCHW or channels-last (Value::nhwc) on either side.
//
// Why not cudnnPoolingForward: cuDNN pads symmetrically only, has no dilations, and its
// ceil-mode and count_include_pad windows differ from ONNX's at the borders, so matching the CPU
// kernel (cpu/pool.cc) would need a fallback for every one of those cases anyway. One thread per
// output element (adjacent threads on adjacent channels when channels-last, on adjacent columns
// otherwise) keeps the reads coalesced; pooling is memory-bound, so this runs at cuDNN's speed.
// 1-D and 2-D pools run as 3-D pools with leading unit dims, like the CPU kernel.
#include <array>
#include <cmath>

#include "runtime/cuda/device_util.cuh"
#include "runtime/cuda/dnn_util.h"

namespace mf::runtime::cuda {
namespace {

struct PoolParams {
  bool is_max = true;
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t ceil_mode = 0;
  int64_t count_include_pad = 0;
  bool in_nhwc = false, out_nhwc = false;
  DataType dtype = DataType::kFloat32;
};

struct Dim3 {
  int64_t in = 1, out = 1, k = 1, s = 1, d = 1, pb = 0, pe = 0;
};

// What the kernel needs, by value.
struct PoolArgs {
  int64_t n = 0, c = 0;
  Dim3 dim[3];
  bool is_max = true, include_pad = false, in_nhwc = false, out_nhwc = false;
};

// The CPU kernel's geometry (cpu/pool.cc), same checks and messages.
StatusOr<std::array<Dim3, 3>> PoolGeometry(const PoolParams& p, const Shape& x) {
  size_t sp = x.size() - 2;
  if (p.kernel.size() != sp) return InvalidArgument("kernel_shape has " + std::to_string(p.kernel.size()) +
                                                    " dims, the input " + ShapeToString(x) + " has " +
                                                    std::to_string(sp) + " spatial dims");
  if ((!p.strides.empty() && p.strides.size() != sp) || (!p.pads.empty() && p.pads.size() != 2 * sp) ||
      (!p.dilations.empty() && p.dilations.size() != sp)) {
    return InvalidArgument("strides/pads/dilations do not match the spatial rank");
  }
  constexpr int64_t kMaxAttr = int64_t{1} << 24;  // keeps size arithmetic far from overflow
  for (const auto* v : {&p.kernel, &p.strides, &p.pads, &p.dilations}) {
    for (int64_t a : *v) {
      if (a > kMaxAttr || a < -kMaxAttr) return InvalidArgument("kernel_shape/strides/pads/dilations value " + std::to_string(a) + " is out of range");
    }
  }
  std::array<Dim3, 3> dims;
  for (size_t i = 0; i < sp; ++i) {
    Dim3& d = dims[3 - sp + i];
    d.in = x[2 + i];
    d.k = p.kernel[i];
    d.s = p.strides.empty() ? 1 : p.strides[i];
    d.d = p.dilations.empty() ? 1 : p.dilations[i];
    d.pb = p.pads.empty() ? 0 : p.pads[i];
    d.pe = p.pads.empty() ? 0 : p.pads[i + sp];
    if (d.k <= 0 || d.s <= 0 || d.d <= 0 || d.pb < 0 || d.pe < 0) {
      return InvalidArgument("kernel_shape, strides and dilations must be positive, pads non-negative");
    }
    int64_t ek = (d.k - 1) * d.d + 1;
    if (p.auto_pad == "SAME_UPPER" || p.auto_pad == "SAME_LOWER") {
      d.out = (d.in + d.s - 1) / d.s;
      int64_t total = std::max<int64_t>(0, (d.out - 1) * d.s + ek - d.in);
      d.pb = p.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      d.pe = total - d.pb;
      continue;
    }
    if (p.auto_pad == "VALID") d.pb = d.pe = 0;
    int64_t span = d.in + d.pb + d.pe - ek;
    if (span < 0) return InvalidArgument("pooling window is larger than the padded input " + ShapeToString(x));
    d.out = (p.ceil_mode ? (span + d.s - 1) / d.s : span / d.s) + 1;
    // A window may not start in the end padding.
    if (p.ceil_mode && (d.out - 1) * d.s >= d.in + d.pb) --d.out;
  }
  return dims;
}

// Number of window taps along one dim counted by count_include_pad: the window clipped to the
// padded input (a ceil-mode overhang past the end padding is not counted).
__device__ __forceinline__ int64_t PaddedSpan(int64_t start, const Dim3& d) {
  int64_t end = start + (d.k - 1) * d.d + 1;
  if (end > d.in + d.pe) end = d.in + d.pe;
  return (end - start + d.d - 1) / d.d;
}

template <typename T>
__global__ void PoolKernel(const T* x, T* y, PoolArgs a, int64_t total) {
  const Dim3 &D = a.dim[0], &H = a.dim[1], &W = a.dim[2];
  MF_GRID_STRIDE_LOOP(i, total) {
    int64_t rem = i, n, c, od, oh, ow;
    if (a.out_nhwc) {
      c = rem % a.c; rem /= a.c;
      ow = rem % W.out; rem /= W.out;
      oh = rem % H.out; rem /= H.out;
      od = rem % D.out; n = rem / D.out;
    } else {
      ow = rem % W.out; rem /= W.out;
      oh = rem % H.out; rem /= H.out;
      od = rem % D.out; rem /= D.out;
      c = rem % a.c; n = rem / a.c;
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
      int64_t count = a.include_pad ? PaddedSpan(d0, D) * PaddedSpan(h0, H) * PaddedSpan(w0, W) : valid;
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
  if (x.rank() < 3 || x.rank() > 5) return InvalidArgument("pooling input must be 3-D to 5-D, got " + ShapeToString(x.shape()));
  if ((p.in_nhwc || p.out_nhwc) && x.rank() != 4) return Internal("channels-last pooling needs a 4-D input");
  MF_ASSIGN_OR_RETURN(auto dims, PoolGeometry(p, x.shape()));
  Shape out_shape{x.dim(0), x.dim(1)};
  for (size_t i = 3 - (x.shape().size() - 2); i < 3; ++i) out_shape.push_back(dims[i].out);
  MF_ASSIGN_OR_RETURN(out, AllocateDevice(p.dtype, out_shape));
  int64_t total = out.num_elements();
  if (total == 0) return Status::Ok();
  PoolArgs a;
  a.n = x.dim(0);
  a.c = x.dim(1);
  for (int i = 0; i < 3; ++i) a.dim[i] = dims[static_cast<size_t>(i)];
  a.is_max = p.is_max;
  a.include_pad = p.count_include_pad != 0;
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
  if (x.rank() < 2) return InvalidArgument("global pooling input must be at least 2-D");
  if (in_nhwc && x.rank() != 4) return Internal("channels-last global pooling needs a 4-D input");
  Shape shape(static_cast<size_t>(x.rank()), 1);
  shape[0] = x.dim(0);
  shape[1] = x.dim(1);
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
    return init.Error(StatusCode::kUnimplemented, "element type " + std::string(DataTypeName(init.dtype(0))) + " on the GPU");
  }
  return init.dtype(0);
}

StatusOr<BoundKernel> PoolFactory(const KernelInit& init, bool is_max) {
  PoolParams p;
  MF_ASSIGN_OR_RETURN(p.dtype, RequireDeviceFloatInput(init));
  if (init.node.outputs.size() > 1 && init.node.outputs[1] != kNoValue) {
    return init.Error(StatusCode::kUnimplemented, "the Indices output of MaxPool is not supported");
  }
  const Attributes& a = init.attrs();
  p.is_max = is_max;
  MF_ASSIGN_OR_RETURN(p.auto_pad, a.GetString("auto_pad", "NOTSET"));
  MF_ASSIGN_OR_RETURN(p.kernel, a.GetInts("kernel_shape", {}));
  MF_ASSIGN_OR_RETURN(p.strides, a.GetInts("strides", {}));
  MF_ASSIGN_OR_RETURN(p.pads, a.GetInts("pads", {}));
  MF_ASSIGN_OR_RETURN(p.dilations, a.GetInts("dilations", {}));
  MF_ASSIGN_OR_RETURN(p.ceil_mode, a.GetInt("ceil_mode", 0));
  MF_ASSIGN_OR_RETURN(p.count_include_pad, a.GetInt("count_include_pad", 0));
  if (p.kernel.empty()) return init.Error(StatusCode::kInvalidArgument, "kernel_shape is required");
  if (p.auto_pad != "NOTSET" && p.auto_pad != "VALID" && p.auto_pad != "SAME_UPPER" && p.auto_pad != "SAME_LOWER") {
    return init.Error(StatusCode::kInvalidArgument, "unknown auto_pad '" + p.auto_pad + "'");
  }
  p.in_nhwc = !init.input_nhwc.empty() && init.input_nhwc[0];
  p.out_nhwc = init.output_nhwc;
  std::vector<DataType> outs(init.node.outputs.size(), DataType::kInt64);
  outs[0] = p.dtype;
  return Bind([p](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return RunPool(p, *in[0], out[0]); },
              outs);
}

StatusOr<BoundKernel> GlobalPoolFactory(const KernelInit& init, bool is_max) {
  MF_ASSIGN_OR_RETURN(DataType dtype, RequireDeviceFloatInput(init));
  bool in_nhwc = !init.input_nhwc.empty() && init.input_nhwc[0];
  return Bind([is_max, in_nhwc, dtype](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
                return RunGlobalPool(is_max, in_nhwc, dtype, *in[0], out[0]);
              },
              {dtype});
}

}  // namespace

void RegisterPoolKernels(KernelRegistry* registry) {
  registry->Register({"MaxPool", 1, [](const KernelInit& i) { return PoolFactory(i, true); }, "float, float16"});
  registry->Register({"AveragePool", 1, [](const KernelInit& i) { return PoolFactory(i, false); }, "float, float16"});
  registry->Register({"GlobalAveragePool", 1, [](const KernelInit& i) { return GlobalPoolFactory(i, false); }, "float, float16"});
  registry->Register({"GlobalMaxPool", 1, [](const KernelInit& i) { return GlobalPoolFactory(i, true); }, "float, float16"});
}

}  // namespace mf::runtime::cuda
