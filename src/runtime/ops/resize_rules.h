// Resize (opset 11+): attributes, the output shape from scales or sizes, and the ONNX coordinate
// transformation and nearest rounding, shared by the CPU kernel (separable 1-D passes) and the
// CUDA kernel (one pass, coordinates computed per element on the device).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "runtime/kernel.h"
#include "runtime/ops/host_device.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

enum class ResizeMode { kNearest, kLinear, kCubic };
enum class CoordinateTransform {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeAttributes {
  ResizeMode mode = ResizeMode::kNearest;
  CoordinateTransform transform = CoordinateTransform::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;  // any unknown nearest_mode string too
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation = 0.f;
};

// Reads and checks the attributes of `init`'s Resize node (errors carry the node prefix).
StatusOr<ResizeAttributes> ReadResizeAttributes(const KernelInit& init);

// One axis of a resize.
struct ResizeAxis {
  int64_t in_len = 0, out_len = 0;
  double scale = 1, roi_start = 0, roi_end = 1;
  bool identity = true;  // copies the axis unchanged
};

// Reads a float input (scales, roi) as doubles: the backend says which float types and which
// memory it reads.
using ReadFloatsFn = StatusOr<std::vector<double>> (*)(const Tensor& t, const char* what);

// The per-axis plan of resizing `x` as its inputs ask (each may be null; an empty one counts as
// absent): exactly one of `scales` and `sizes`, with `roi` (2 * rank values) for
// tf_crop_and_resize.
StatusOr<std::vector<ResizeAxis>> PlanResize(const Shape& x, const Tensor* roi, const Tensor* scales,
                                             const Tensor* sizes, CoordinateTransform transform,
                                             ReadFloatsFn read_floats);

// The output shape of a plan.
Shape ResizeOutputShape(const std::vector<ResizeAxis>& axes);

// The input coordinate of output index `x` along `a`. As in the ONNX spec, "length_resized" is
// in_len * scale, which is fractional when the output size came from scales.
MF_HOST_DEVICE inline double ResizeSourceCoordinate(CoordinateTransform t, const ResizeAxis& a, int64_t x) {
  double scale = a.scale, out_len = static_cast<double>(a.in_len) * a.scale;
  switch (t) {
    case CoordinateTransform::kHalfPixel:
      return (x + 0.5) / scale - 0.5;
    case CoordinateTransform::kPytorchHalfPixel:
      return out_len > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case CoordinateTransform::kAlignCorners:
      return out_len == 1 ? 0.0 : x * static_cast<double>(a.in_len - 1) / (out_len - 1);
    case CoordinateTransform::kAsymmetric:
      return x / scale;
    case CoordinateTransform::kTfHalfPixelForNn:
      return (x + 0.5) / scale;
    case CoordinateTransform::kTfCropAndResize:
      break;
  }
  if (out_len > 1) return a.roi_start * (a.in_len - 1) + x * (a.roi_end - a.roi_start) * (a.in_len - 1) / (out_len - 1);
  return 0.5 * (a.roi_start + a.roi_end) * (a.in_len - 1);
}

// Whether coordinate `c` falls outside the input (tf_crop_and_resize extrapolates there).
MF_HOST_DEVICE inline bool ResizeOutside(CoordinateTransform t, const ResizeAxis& a, double c) {
  return t == CoordinateTransform::kTfCropAndResize && (c < 0 || c > static_cast<double>(a.in_len - 1));
}

// The input index nearest mode picks for coordinate `c`, clamped into the axis.
MF_HOST_DEVICE inline int64_t ResizeNearestIndex(NearestMode mode, const ResizeAxis& a, double c) {
  double f = floor(c);
  int64_t i;
  switch (mode) {
    case NearestMode::kFloor:
      i = static_cast<int64_t>(f);
      break;
    case NearestMode::kCeil:
      i = static_cast<int64_t>(ceil(c));
      break;
    case NearestMode::kRoundPreferCeil:
      i = static_cast<int64_t>(floor(c + 0.5));
      break;
    default:
      i = c - f == 0.5 ? static_cast<int64_t>(f) : static_cast<int64_t>(round(c));
      break;
  }
  return i < 0 ? 0 : (i >= a.in_len ? a.in_len - 1 : i);
}

// Clamps index `i` into the axis (linear and cubic taps past the border).
MF_HOST_DEVICE inline int64_t ResizeClamp(const ResizeAxis& a, int64_t i) {
  return i < 0 ? 0 : (i >= a.in_len ? a.in_len - 1 : i);
}

}  // namespace mf::runtime::ops
