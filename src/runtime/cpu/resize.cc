// Resize (opset 11+): nearest, linear and cubic interpolation with every ONNX coordinate
// transformation mode. The N-d resize is separable, so it runs as one 1-D pass per resized axis,
// each output position being a weighted sum of a few input taps along that axis.
#include <cmath>

#include "runtime/cpu/cpu_common.h"

namespace mf::runtime::cpu {
namespace {

struct ResizeParams {
  std::string mode = "nearest";
  std::string transform = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation = 0.f;
};

// Taps of one output position along one axis; `outside` means tf_crop_and_resize extrapolation.
struct Taps {
  int64_t index[4];
  float weight[4];
  int count = 0;
  bool outside = false;
};

// As in the ONNX spec, "length_resized" is in_len * scale, which is fractional when the
// output size came from scales (the integer output length is its floor).
double OriginalCoordinate(const ResizeParams& p, int64_t x, double scale, int64_t in_len, double out_len,
                          double roi_start, double roi_end) {
  const std::string& t = p.transform;
  if (t == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (t == "pytorch_half_pixel") return out_len > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (t == "align_corners") return out_len == 1 ? 0.0 : x * static_cast<double>(in_len - 1) / (out_len - 1);
  if (t == "asymmetric") return x / scale;
  if (t == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  // tf_crop_and_resize
  if (out_len > 1) return roi_start * (in_len - 1) + x * (roi_end - roi_start) * (in_len - 1) / (out_len - 1);
  return 0.5 * (roi_start + roi_end) * (in_len - 1);
}

std::vector<Taps> AxisTaps(const ResizeParams& p, int64_t in_len, int64_t out_len, double scale, double roi_start,
                           double roi_end) {
  std::vector<Taps> taps(static_cast<size_t>(out_len));
  auto clamp = [in_len](int64_t i) { return std::min(std::max<int64_t>(i, 0), in_len - 1); };
  for (int64_t o = 0; o < out_len; ++o) {
    Taps& t = taps[static_cast<size_t>(o)];
    double x = OriginalCoordinate(p, o, scale, in_len, static_cast<double>(in_len) * scale, roi_start, roi_end);
    if (p.transform == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in_len - 1))) {
      t.outside = true;
      continue;
    }
    if (p.mode == "nearest") {
      double f = std::floor(x);
      int64_t i;
      if (p.nearest_mode == "floor") i = static_cast<int64_t>(f);
      else if (p.nearest_mode == "ceil") i = static_cast<int64_t>(std::ceil(x));
      else if (p.nearest_mode == "round_prefer_ceil") i = static_cast<int64_t>(std::floor(x + 0.5));
      else i = x - f == 0.5 ? static_cast<int64_t>(f) : static_cast<int64_t>(std::round(x));  // round_prefer_floor
      t.index[0] = clamp(i);
      t.weight[0] = 1.f;
      t.count = 1;
    } else if (p.mode == "linear") {
      double f = std::floor(x);
      double w = x - f;
      t.index[0] = clamp(static_cast<int64_t>(f));
      t.index[1] = clamp(static_cast<int64_t>(f) + 1);
      t.weight[0] = static_cast<float>(1 - w);
      t.weight[1] = static_cast<float>(w);
      t.count = 2;
    } else {  // cubic
      double f = std::floor(x), s = x - f, a = p.cubic_a;
      double c[4] = {((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a,
                     ((a + 2) * s - (a + 3)) * s * s + 1,
                     ((a + 2) * (1 - s) - (a + 3)) * (1 - s) * (1 - s) + 1,
                     ((a * (2 - s) - 5 * a) * (2 - s) + 8 * a) * (2 - s) - 4 * a};
      double sum = 0;
      for (int k = 0; k < 4; ++k) {
        int64_t i = static_cast<int64_t>(f) - 1 + k;
        if (p.exclude_outside && (i < 0 || i >= in_len)) c[k] = 0;
        sum += c[k];
        t.index[k] = clamp(i);
      }
      for (int k = 0; k < 4; ++k) t.weight[k] = static_cast<float>(p.exclude_outside && sum != 0 ? c[k] / sum : c[k]);
      t.count = 4;
    }
  }
  return taps;
}

// Resizes axis `axis` of `x` to `out_len` using `taps`.
StatusOr<Tensor> ResizeAxis(const ResizeParams& p, const Tensor& x, int axis, const std::vector<Taps>& taps) {
  Shape shape = x.shape();
  int64_t in_len = shape[static_cast<size_t>(axis)];
  shape[static_cast<size_t>(axis)] = static_cast<int64_t>(taps.size());
  MF_ASSIGN_OR_RETURN(Tensor out, Tensor::AllocateUninitialized(DataType::kFloat32, shape));
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < x.rank(); ++i) {
    if (i < axis) outer *= x.dim(i);
    if (i > axis) inner *= x.dim(i);
  }
  const float* px = x.data<float>();
  float* po = out.data<float>();
  int64_t out_len = static_cast<int64_t>(taps.size());
  ParallelFor(outer, 1, [&](int64_t b, int64_t e) {
    for (int64_t o = b; o < e; ++o) {
      for (int64_t j = 0; j < out_len; ++j) {
        const Taps& t = taps[static_cast<size_t>(j)];
        float* dst = po + (o * out_len + j) * inner;
        if (t.outside) {
          std::fill(dst, dst + inner, p.extrapolation);
          continue;
        }
        std::fill(dst, dst + inner, 0.f);
        for (int k = 0; k < t.count; ++k) {
          const float* src = px + (o * in_len + t.index[k]) * inner;
          float w = t.weight[k];
          for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
        }
      }
    }
  });
  return out;
}

StatusOr<BoundKernel> ResizeFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  const Attributes& a = init.attrs();
  ResizeParams p;
  MF_ASSIGN_OR_RETURN(p.mode, a.GetString("mode", "nearest"));
  MF_ASSIGN_OR_RETURN(p.transform, a.GetString("coordinate_transformation_mode", "half_pixel"));
  MF_ASSIGN_OR_RETURN(p.nearest_mode, a.GetString("nearest_mode", "round_prefer_floor"));
  MF_ASSIGN_OR_RETURN(p.cubic_a, a.GetFloat("cubic_coeff_a", -0.75f));
  MF_ASSIGN_OR_RETURN(int64_t exclude, a.GetInt("exclude_outside", 0));
  MF_ASSIGN_OR_RETURN(p.extrapolation, a.GetFloat("extrapolation_value", 0.f));
  MF_ASSIGN_OR_RETURN(int64_t antialias, a.GetInt("antialias", 0));
  MF_ASSIGN_OR_RETURN(std::string policy, a.GetString("keep_aspect_ratio_policy", "stretch"));
  p.exclude_outside = exclude != 0;
  if (antialias || policy != "stretch" || a.Has("axes")) {
    return init.Error(StatusCode::kUnimplemented, "antialias, axes and keep_aspect_ratio_policy are not supported");
  }
  if (p.mode != "nearest" && p.mode != "linear" && p.mode != "cubic") {
    return init.Error(StatusCode::kInvalidArgument, "unknown mode '" + p.mode + "'");
  }
  static const char* const kTransforms[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                            "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kTransforms), std::end(kTransforms), p.transform) == std::end(kTransforms)) {
    return init.Error(StatusCode::kUnimplemented, "coordinate_transformation_mode '" + p.transform + "' is not supported");
  }
  return Bind(
      [p](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
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
          if (scales->dtype() != DataType::kFloat32 || scales->num_elements() != rank) return InvalidArgument("Resize scales must be float32, one per dim");
          for (int i = 0; i < rank; ++i) {
            double s = scales->data<float>()[i];
            if (!(s > 0) || !std::isfinite(s)) return InvalidArgument("Resize scales must be positive");
            double len = std::floor(static_cast<double>(x.dim(i)) * s);
            if (len > static_cast<double>(kMaxTensorBytes)) return InvalidArgument("Resize output is too large");
            scale[static_cast<size_t>(i)] = s;
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
          if (roi->dtype() != DataType::kFloat32 || roi->num_elements() != 2 * rank) return InvalidArgument("Resize roi must be float32 with 2 * rank values");
          for (int64_t i = 0; i < roi->num_elements(); ++i) roi_v.push_back(roi->data<float>()[i]);
        }
        // Validate the final size before any pass allocates.
        MF_RETURN_IF_ERROR(Tensor::AllocateUninitialized(DataType::kFloat32, out_shape).status());
        Tensor cur = x.Clone();
        for (int axis = 0; axis < rank; ++axis) {
          int64_t in_len = x.dim(axis), out_len = out_shape[static_cast<size_t>(axis)];
          bool identity = in_len == out_len && p.transform != "tf_crop_and_resize" && scale[static_cast<size_t>(axis)] == 1.0;
          if (identity) continue;
          if (in_len == 0 && out_len > 0) return InvalidArgument("cannot resize an empty dim");
          double rs = roi_v.empty() ? 0.0 : roi_v[static_cast<size_t>(axis)];
          double re = roi_v.empty() ? 1.0 : roi_v[static_cast<size_t>(axis + rank)];
          std::vector<Taps> taps = AxisTaps(p, in_len, out_len, scale[static_cast<size_t>(axis)], rs, re);
          MF_ASSIGN_OR_RETURN(cur, ResizeAxis(p, cur, axis, taps));
        }
        out[0] = std::move(cur);
        return Status::Ok();
      },
      {DataType::kFloat32});
}

}  // namespace

void RegisterResizeKernels(KernelRegistry* r) { r->Register({"Resize", 11, ResizeFactory, "float"}); }

}  // namespace mf::runtime::cpu
