#include "runtime/ops/resize_rules.h"

#include <string>
#include <utility>

#include "runtime/ops/indexing.h"

namespace mf::runtime::ops {

StatusOr<ResizeAttributes> ReadResizeAttributes(const KernelInit& init) {
  const Attributes& a = init.attrs();
  ResizeAttributes p;
  MF_ASSIGN_OR_RETURN(std::string mode, a.GetString("mode", "nearest"));
  MF_ASSIGN_OR_RETURN(std::string transform, a.GetString("coordinate_transformation_mode", "half_pixel"));
  MF_ASSIGN_OR_RETURN(std::string nearest_mode, a.GetString("nearest_mode", "round_prefer_floor"));
  MF_ASSIGN_OR_RETURN(p.cubic_a, a.GetFloat("cubic_coeff_a", -0.75f));
  MF_ASSIGN_OR_RETURN(int64_t exclude, a.GetInt("exclude_outside", 0));
  MF_ASSIGN_OR_RETURN(p.extrapolation, a.GetFloat("extrapolation_value", 0.f));
  MF_ASSIGN_OR_RETURN(int64_t antialias, a.GetInt("antialias", 0));
  MF_ASSIGN_OR_RETURN(std::string policy, a.GetString("keep_aspect_ratio_policy", "stretch"));
  p.exclude_outside = exclude != 0;
  if (antialias || policy != "stretch" || a.Has("axes")) {
    return init.Error(StatusCode::kUnimplemented, "antialias, axes and keep_aspect_ratio_policy are not supported");
  }
  if (mode == "nearest")
    p.mode = ResizeMode::kNearest;
  else if (mode == "linear")
    p.mode = ResizeMode::kLinear;
  else if (mode == "cubic")
    p.mode = ResizeMode::kCubic;
  else
    return init.Error(StatusCode::kInvalidArgument, "unknown mode '" + mode + "'");
  static const std::pair<const char*, CoordinateTransform> kTransforms[] = {
      {"half_pixel", CoordinateTransform::kHalfPixel},
      {"pytorch_half_pixel", CoordinateTransform::kPytorchHalfPixel},
      {"align_corners", CoordinateTransform::kAlignCorners},
      {"asymmetric", CoordinateTransform::kAsymmetric},
      {"tf_half_pixel_for_nn", CoordinateTransform::kTfHalfPixelForNn},
      {"tf_crop_and_resize", CoordinateTransform::kTfCropAndResize}};
  bool known = false;
  for (const auto& [name, t] : kTransforms) {
    if (transform == name) {
      p.transform = t;
      known = true;
    }
  }
  if (!known) {
    return init.Error(StatusCode::kUnimplemented,
                      "coordinate_transformation_mode '" + transform + "' is not supported");
  }
  // Any other nearest_mode string means the default, round_prefer_floor.
  if (nearest_mode == "floor")
    p.nearest = NearestMode::kFloor;
  else if (nearest_mode == "ceil")
    p.nearest = NearestMode::kCeil;
  else if (nearest_mode == "round_prefer_ceil")
    p.nearest = NearestMode::kRoundPreferCeil;
  else
    p.nearest = NearestMode::kRoundPreferFloor;
  return p;
}

namespace {

// PlanResize with the inputs read: `scales` or `sizes` (exactly one of them non-null), `roi`
// empty or 2 * rank values.
StatusOr<std::vector<ResizeAxis>> PlanFromValues(const Shape& x, const std::vector<double>* scales,
                                                 const std::vector<int64_t>* sizes, const std::vector<double>& roi,
                                                 CoordinateTransform transform) {
  size_t rank = x.size();
  if ((scales == nullptr) == (sizes == nullptr)) return InvalidArgument("Resize needs exactly one of scales and sizes");
  std::vector<ResizeAxis> axes(rank);
  for (size_t i = 0; i < rank; ++i) axes[i].in_len = x[i];
  if (scales) {
    if (scales->size() != rank) return InvalidArgument("Resize scales must be float32, one per dim");
    for (size_t i = 0; i < rank; ++i) {
      double s = (*scales)[i];
      if (!(s > 0) || !std::isfinite(s)) return InvalidArgument("Resize scales must be positive");
      double len = std::floor(static_cast<double>(x[i]) * s);
      if (len > static_cast<double>(kMaxTensorBytes)) return InvalidArgument("Resize output is too large");
      axes[i].scale = s;
      axes[i].out_len = static_cast<int64_t>(len);
    }
  } else {
    if (sizes->size() != rank) return InvalidArgument("Resize sizes must have one entry per dim");
    for (size_t i = 0; i < rank; ++i) {
      int64_t size = (*sizes)[i];
      if (size < 0) return InvalidArgument("Resize sizes must not be negative");
      axes[i].out_len = size;
      axes[i].scale = x[i] ? static_cast<double>(size) / static_cast<double>(x[i]) : 1.0;
    }
  }
  if (!roi.empty() && roi.size() != 2 * rank) return InvalidArgument("Resize roi must be float32 with 2 * rank values");
  for (size_t i = 0; i < rank; ++i) {
    ResizeAxis& a = axes[i];
    a.roi_start = roi.empty() ? 0.0 : roi[i];
    a.roi_end = roi.empty() ? 1.0 : roi[i + rank];
    a.identity = a.in_len == a.out_len && transform != CoordinateTransform::kTfCropAndResize && a.scale == 1.0;
    if (!a.identity && a.in_len == 0 && a.out_len > 0) return InvalidArgument("cannot resize an empty dim");
  }
  return axes;
}

}  // namespace

StatusOr<std::vector<ResizeAxis>> PlanResize(const Shape& x, const Tensor* roi, const Tensor* scales,
                                             const Tensor* sizes, CoordinateTransform transform,
                                             ReadFloatsFn read_floats) {
  if (scales && scales->num_elements() == 0) scales = nullptr;
  if (sizes && sizes->num_elements() == 0) sizes = nullptr;
  // Read only an unambiguous request: PlanFromValues refuses both or neither.
  std::vector<double> scale_v, roi_v;
  std::vector<int64_t> size_v;
  if (scales && !sizes) {
    auto s = read_floats(*scales, "Resize scales");
    if (!s.ok()) return InvalidArgument("Resize scales must be float32, one per dim");
    scale_v = std::move(*s);
  }
  if (sizes && !scales) {
    MF_ASSIGN_OR_RETURN(size_v, ReadInts(*sizes, "sizes"));
  }
  if (roi && roi->num_elements() > 0) {
    auto r = read_floats(*roi, "Resize roi");
    if (!r.ok()) return InvalidArgument("Resize roi must be float32 with 2 * rank values");
    roi_v = std::move(*r);
  }
  return PlanFromValues(x, scales ? &scale_v : nullptr, sizes ? &size_v : nullptr, roi_v, transform);
}

Shape ResizeOutputShape(const std::vector<ResizeAxis>& axes) {
  Shape shape;
  for (const ResizeAxis& a : axes) shape.push_back(a.out_len);
  return shape;
}

}  // namespace mf::runtime::ops
