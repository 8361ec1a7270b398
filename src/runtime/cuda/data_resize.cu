// Resize (opset 11+) on the GPU: modes nearest and linear with every coordinate transformation
// mode and nearest_mode the CPU kernel (cpu/resize.cc) supports; cubic, antialias, axes and
// keep_aspect_ratio_policy are refused with UNIMPLEMENTED (the node runs on the CPU).
//
// The CPU kernel runs one separable 1-D pass per resized axis; here each output element is the
// weighted sum over the product of its per-axis taps (1 for nearest, 2 for linear), which is
// the same interpolation in one pass. Source coordinates are computed on the device in double
// with the CPU kernel's formulas, so nearest picks the same elements.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "runtime/cuda/data_common.h"
#include "runtime/cuda/device_util.cuh"

namespace mf::runtime::cuda {
namespace {

enum class Transform : int { kHalfPixel, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfHalfPixelForNn, kTfCropAndResize };
enum class NearestMode : int { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct AxisResize {
  int64_t in_len = 0, out_len = 0;
  double scale = 1, roi_start = 0, roi_end = 1;
  bool identity = true;
};

struct ResizePlan {
  int rank = 0;
  bool linear = false;
  Transform transform = Transform::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  float extrapolation = 0.f;
  int64_t in_strides[kMaxDims] = {};
  AxisResize axes[kMaxDims];
};

// As in the ONNX spec (and the CPU kernel), "length_resized" is in_len * scale, fractional when
// the output size came from scales.
__device__ double OriginalCoordinate(const ResizePlan& p, const AxisResize& a, int64_t x) {
  double scale = a.scale, out_len = static_cast<double>(a.in_len) * a.scale;
  switch (p.transform) {
    case Transform::kHalfPixel: return (x + 0.5) / scale - 0.5;
    case Transform::kPytorchHalfPixel: return out_len > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case Transform::kAlignCorners: return out_len == 1 ? 0.0 : x * static_cast<double>(a.in_len - 1) / (out_len - 1);
    case Transform::kAsymmetric: return x / scale;
    case Transform::kTfHalfPixelForNn: return (x + 0.5) / scale;
    case Transform::kTfCropAndResize: break;
  }
  if (out_len > 1) {
    return a.roi_start * (a.in_len - 1) + x * (a.roi_end - a.roi_start) * (a.in_len - 1) / (out_len - 1);
  }
  return 0.5 * (a.roi_start + a.roi_end) * (a.in_len - 1);
}

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
      const AxisResize& a = p.axes[d];
      int64_t q = rem / a.out_len;
      int64_t o = rem - q * a.out_len;
      rem = q;
      if (a.identity) {
        base += o * p.in_strides[d];
        continue;
      }
      double c = OriginalCoordinate(p, a, o);
      if (p.transform == Transform::kTfCropAndResize && (c < 0 || c > static_cast<double>(a.in_len - 1))) {
        outside = true;
        break;
      }
      auto clamp = [&](int64_t i) { return i < 0 ? int64_t{0} : (i >= a.in_len ? a.in_len - 1 : i); };
      double f = floor(c);
      if (!p.linear) {
        int64_t i;
        switch (p.nearest) {
          case NearestMode::kFloor: i = static_cast<int64_t>(f); break;
          case NearestMode::kCeil: i = static_cast<int64_t>(ceil(c)); break;
          case NearestMode::kRoundPreferCeil: i = static_cast<int64_t>(floor(c + 0.5)); break;
          default: i = c - f == 0.5 ? static_cast<int64_t>(f) : static_cast<int64_t>(round(c)); break;
        }
        base += clamp(i) * p.in_strides[d];
        continue;
      }
      double w = c - f;
      tap_offset[taps][0] = clamp(static_cast<int64_t>(f)) * p.in_strides[d];
      tap_offset[taps][1] = clamp(static_cast<int64_t>(f) + 1) * p.in_strides[d];
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
  const Attributes& a = init.attrs();
  MF_ASSIGN_OR_RETURN(std::string mode, a.GetString("mode", "nearest"));
  MF_ASSIGN_OR_RETURN(std::string transform, a.GetString("coordinate_transformation_mode", "half_pixel"));
  MF_ASSIGN_OR_RETURN(std::string nearest_mode, a.GetString("nearest_mode", "round_prefer_floor"));
  MF_ASSIGN_OR_RETURN(float extrapolation, a.GetFloat("extrapolation_value", 0.f));
  MF_ASSIGN_OR_RETURN(int64_t antialias, a.GetInt("antialias", 0));
  MF_ASSIGN_OR_RETURN(std::string policy, a.GetString("keep_aspect_ratio_policy", "stretch"));
  if (antialias || policy != "stretch" || a.Has("axes")) {
    return init.Error(StatusCode::kUnimplemented, "antialias, axes and keep_aspect_ratio_policy are not supported");
  }
  if (mode != "nearest" && mode != "linear" && mode != "cubic") {
    return init.Error(StatusCode::kInvalidArgument, "unknown mode '" + mode + "'");
  }
  if (mode == "cubic") return init.Error(StatusCode::kUnimplemented, "cubic Resize is not supported on the GPU");
  ResizePlan plan;
  plan.linear = mode == "linear";
  plan.extrapolation = extrapolation;
  static const std::pair<const char*, Transform> kTransforms[] = {
      {"half_pixel", Transform::kHalfPixel},       {"pytorch_half_pixel", Transform::kPytorchHalfPixel},
      {"align_corners", Transform::kAlignCorners}, {"asymmetric", Transform::kAsymmetric},
      {"tf_half_pixel_for_nn", Transform::kTfHalfPixelForNn}, {"tf_crop_and_resize", Transform::kTfCropAndResize}};
  bool known = false;
  for (const auto& [name, t] : kTransforms) {
    if (transform == name) {
      plan.transform = t;
      known = true;
    }
  }
  if (!known) {
    return init.Error(StatusCode::kUnimplemented, "coordinate_transformation_mode '" + transform + "' is not supported");
  }
  // The CPU kernel treats any other nearest_mode string as round_prefer_floor; so do we.
  if (nearest_mode == "floor") plan.nearest = NearestMode::kFloor;
  else if (nearest_mode == "ceil") plan.nearest = NearestMode::kCeil;
  else if (nearest_mode == "round_prefer_ceil") plan.nearest = NearestMode::kRoundPreferCeil;
  else plan.nearest = NearestMode::kRoundPreferFloor;
  return Bind(
      [plan](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        int rank = x.rank();
        const Tensor* roi = in.size() > 1 ? in[1] : nullptr;
        const Tensor* scales = in.size() > 2 ? in[2] : nullptr;
        const Tensor* sizes = in.size() > 3 ? in[3] : nullptr;
        if (scales && scales->num_elements() == 0) scales = nullptr;
        if (sizes && sizes->num_elements() == 0) sizes = nullptr;
        if ((scales == nullptr) == (sizes == nullptr)) return InvalidArgument("Resize needs exactly one of scales and sizes");
        std::vector<double> scale(static_cast<size_t>(rank));
        Shape out_shape(static_cast<size_t>(rank));
        if (scales) {
          auto s = ReadFloats(*scales, "Resize scales");
          if (!s.ok() || static_cast<int>(s->size()) != rank) return InvalidArgument("Resize scales must be float32, one per dim");
          for (int i = 0; i < rank; ++i) {
            double v = (*s)[static_cast<size_t>(i)];
            if (!(v > 0) || !std::isfinite(v)) return InvalidArgument("Resize scales must be positive");
            double len = std::floor(static_cast<double>(x.dim(i)) * v);
            if (len > static_cast<double>(kMaxTensorBytes)) return InvalidArgument("Resize output is too large");
            scale[static_cast<size_t>(i)] = v;
            out_shape[static_cast<size_t>(i)] = static_cast<int64_t>(len);
          }
        } else {
          MF_ASSIGN_OR_RETURN(std::vector<int64_t> sz, ReadInts(*sizes, "sizes"));
          if (static_cast<int>(sz.size()) != rank) return InvalidArgument("Resize sizes must have one entry per dim");
          for (int i = 0; i < rank; ++i) {
            if (sz[static_cast<size_t>(i)] < 0) return InvalidArgument("Resize sizes must not be negative");
            out_shape[static_cast<size_t>(i)] = sz[static_cast<size_t>(i)];
            scale[static_cast<size_t>(i)] = x.dim(i) ? static_cast<double>(sz[static_cast<size_t>(i)]) / static_cast<double>(x.dim(i)) : 1.0;
          }
        }
        std::vector<double> roi_v;
        if (roi && roi->num_elements() > 0) {
          auto r = ReadFloats(*roi, "Resize roi");
          if (!r.ok() || static_cast<int>(r->size()) != 2 * rank) return InvalidArgument("Resize roi must be float32 with 2 * rank values");
          roi_v = std::move(*r);
        }
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), out_shape));
        ResizePlan p = plan;
        p.rank = rank;
        std::vector<int64_t> strides = RowMajorStrides(x.shape());
        for (int axis = 0; axis < rank; ++axis) {
          AxisResize& ax = p.axes[axis < kMaxDims ? axis : 0];
          int64_t in_len = x.dim(axis), out_len = out_shape[static_cast<size_t>(axis)];
          bool identity = in_len == out_len && p.transform != Transform::kTfCropAndResize && scale[static_cast<size_t>(axis)] == 1.0;
          if (!identity && in_len == 0 && out_len > 0) return InvalidArgument("cannot resize an empty dim");
          if (axis >= kMaxDims) continue;
          ax.in_len = in_len;
          ax.out_len = out_len;
          ax.scale = scale[static_cast<size_t>(axis)];
          ax.roi_start = roi_v.empty() ? 0.0 : roi_v[static_cast<size_t>(axis)];
          ax.roi_end = roi_v.empty() ? 1.0 : roi_v[static_cast<size_t>(axis + rank)];
          ax.identity = identity;
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
