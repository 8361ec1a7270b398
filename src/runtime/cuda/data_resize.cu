// Resize (opset 11+) on the GPU: modes nearest and linear with every coordinate transformation
// mode and nearest_mode of ops/resize_rules.h; cubic, antialias, axes and
// keep_aspect_ratio_policy are refused with UNIMPLEMENTED (the node runs on the CPU).
//
// The CPU kernel runs one separable 1-D pass per resized axis; here each output element is the
// weighted sum over the product of its per-axis taps (1 for nearest, 2 for linear), which is
// the same interpolation in one pass. Source coordinates are computed on the device in double
// with the shared formulas (ops::ResizeSourceCoordinate), so nearest picks the same elements.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/cuda/data_common.h"
#include "runtime/cuda/device_util.cuh"
#include "runtime/ops/resize_rules.h"

namespace mf::runtime::cuda {
namespace {

using ops::CoordinateTransform;
using ops::ResizeAxis;

struct ResizePlan {
  int rank = 0;
  bool linear = false;
  CoordinateTransform transform = CoordinateTransform::kHalfPixel;
  ops::NearestMode nearest = ops::NearestMode::kRoundPreferFloor;
  float extrapolation = 0.f;
  int64_t in_strides[kMaxDims] = {};
  ResizeAxis axes[kMaxDims];
};

template <typename T>
__global__ void ResizeKernel(const T* __restrict__ x, T* __restrict__ out, int64_t n, ResizePlan p) {
  MF_GRID_STRIDE_LOOP(e, n) {
    // Per resized axis: up to two source indices and weights; other axes contribute a fixed offset.
    int64_t base = 0;
    int64_t tap_offset[kMaxDims][2];
    float tap_weight[kMaxDims][2];
    int taps = 0;
    bool outside = false;
    int64_t rem = e;
    for (int d = p.rank - 1; d >= 0; --d) {
      const ResizeAxis& a = p.axes[d];
      int64_t q = rem / a.out_len;
      int64_t o = rem - q * a.out_len;
      rem = q;
      if (a.identity) {
        base += o * p.in_strides[d];
        continue;
      }
      double c = ops::ResizeSourceCoordinate(p.transform, a, o);
      if (ops::ResizeOutside(p.transform, a, c)) {
        outside = true;
        break;
      }
      if (!p.linear) {
        base += ops::ResizeNearestIndex(p.nearest, a, c) * p.in_strides[d];
        continue;
      }
      double f = floor(c);
      double w = c - f;
      tap_offset[taps][0] = ops::ResizeClamp(a, static_cast<int64_t>(f)) * p.in_strides[d];
      tap_offset[taps][1] = ops::ResizeClamp(a, static_cast<int64_t>(f) + 1) * p.in_strides[d];
      tap_weight[taps][0] = static_cast<float>(1 - w);
      tap_weight[taps][1] = static_cast<float>(w);
      ++taps;
    }
    if (outside) {
      Store(out, e, p.extrapolation);
      continue;
    }
    float acc = 0.f;
    for (int combo = 0; combo < (1 << taps); ++combo) {
      int64_t off = base;
      float w = 1.f;
      for (int t = 0; t < taps; ++t) {
        int bit = (combo >> t) & 1;
        off += tap_offset[t][bit];
        w *= tap_weight[t][bit];
      }
      acc += w * static_cast<float>(Load(x, off));
    }
    Store(out, e, acc);
  }
}

StatusOr<BoundKernel> ResizeFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireDeviceFloat(init, 0));
  MF_ASSIGN_OR_RETURN(ops::ResizeAttributes attrs, ops::ReadResizeAttributes(init));
  if (attrs.mode == ops::ResizeMode::kCubic) {
    return init.Error(StatusCode::kUnimplemented, "cubic Resize is not supported on the GPU");
  }
  ResizePlan plan;
  plan.linear = attrs.mode == ops::ResizeMode::kLinear;
  plan.transform = attrs.transform;
  plan.nearest = attrs.nearest;
  plan.extrapolation = attrs.extrapolation;
  return Bind(
      [plan](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        int rank = x.rank();
        const Tensor* roi = in.size() > 1 ? in[1] : nullptr;
        const Tensor* scales = in.size() > 2 ? in[2] : nullptr;
        const Tensor* sizes = in.size() > 3 ? in[3] : nullptr;
        MF_RETURN_IF_ERROR(RequireHost(sizes, "sizes"));
        MF_ASSIGN_OR_RETURN(std::vector<ResizeAxis> axes,
                            ops::PlanResize(x.shape(), roi, scales, sizes, plan.transform, ReadFloats));
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), ops::ResizeOutputShape(axes)));
        ResizePlan p = plan;
        p.rank = rank;
        std::vector<int64_t> strides = RowMajorStrides(x.shape());
        for (int axis = 0; axis < rank && axis < kMaxDims; ++axis) {
          p.axes[axis] = axes[static_cast<size_t>(axis)];
          p.in_strides[axis] = strides[static_cast<size_t>(axis)];
        }
        int64_t n = out[0].num_elements();
        if (n == 0) return Status::Ok();
        if (rank > kMaxDims) return Unimplemented("Resize of rank " + std::to_string(rank) + " on the GPU");
        cudaStream_t s = Current().stream;
        return DispatchDeviceFloat(x.dtype(), [&](auto tag) -> Status {
          using T = decltype(tag);
          ResizeKernel<<<BlocksFor(n), kThreads, 0, s>>>(x.data<T>(), out[0].data<T>(), n, p);
          MF_CUDA_RETURN_IF_LAUNCH_FAILED();
          return Status::Ok();
        });
      },
      {init.dtype(0)});
}

}  // namespace

void RegisterResizeKernel(KernelRegistry* r) { r->Register({"Resize", 11, ResizeFactory, "float", {1, 2, 3}}); }

}  // namespace mf::runtime::cuda
