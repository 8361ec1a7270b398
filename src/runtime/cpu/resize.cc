// Resize (opset 11+): nearest, linear and cubic interpolation with every ONNX coordinate
// transformation mode. The N-d resize is separable, so it runs as one 1-D pass per resized axis,
// each output position being a weighted sum of a few input taps along that axis.
#include <cmath>
#include <string>
#include <vector>

#include "runtime/cpu/cpu_common.h"
#include "runtime/ops/resize_rules.h"

namespace mf::runtime::cpu {
namespace {

// Taps of one output position along one axis; `outside` means tf_crop_and_resize extrapolation.
struct Taps {
  int64_t index[4];
  float weight[4];
  int count = 0;
  bool outside = false;
};

std::vector<Taps> AxisTaps(const ops::ResizeAttributes& p, const ops::ResizeAxis& a) {
  std::vector<Taps> taps(static_cast<size_t>(a.out_len));
  for (int64_t o = 0; o < a.out_len; ++o) {
    Taps& t = taps[static_cast<size_t>(o)];
    double x = ops::ResizeSourceCoordinate(p.transform, a, o);
    if (ops::ResizeOutside(p.transform, a, x)) {
      t.outside = true;
      continue;
    }
    if (p.mode == ops::ResizeMode::kNearest) {
      t.index[0] = ops::ResizeNearestIndex(p.nearest, a, x);
      t.weight[0] = 1.f;
      t.count = 1;
    } else if (p.mode == ops::ResizeMode::kLinear) {
      double f = std::floor(x);
      double w = x - f;
      t.index[0] = ops::ResizeClamp(a, static_cast<int64_t>(f));
      t.index[1] = ops::ResizeClamp(a, static_cast<int64_t>(f) + 1);
      t.weight[0] = static_cast<float>(1 - w);
      t.weight[1] = static_cast<float>(w);
      t.count = 2;
    } else {  // cubic
      double f = std::floor(x), s = x - f, c_a = p.cubic_a;
      double c[4] = {((c_a * (s + 1) - 5 * c_a) * (s + 1) + 8 * c_a) * (s + 1) - 4 * c_a,
                     ((c_a + 2) * s - (c_a + 3)) * s * s + 1, ((c_a + 2) * (1 - s) - (c_a + 3)) * (1 - s) * (1 - s) + 1,
                     ((c_a * (2 - s) - 5 * c_a) * (2 - s) + 8 * c_a) * (2 - s) - 4 * c_a};
      double sum = 0;
      for (int k = 0; k < 4; ++k) {
        int64_t i = static_cast<int64_t>(f) - 1 + k;
        if (p.exclude_outside && (i < 0 || i >= a.in_len)) c[k] = 0;
        sum += c[k];
        t.index[k] = ops::ResizeClamp(a, i);
      }
      for (int k = 0; k < 4; ++k) t.weight[k] = static_cast<float>(p.exclude_outside && sum != 0 ? c[k] / sum : c[k]);
      t.count = 4;
    }
  }
  return taps;
}

// Resizes axis `axis` of `x` to `out_len` using `taps`.
StatusOr<Tensor> ResizeAlongAxis(const ops::ResizeAttributes& p, const Tensor& x, int axis,
                                 const std::vector<Taps>& taps) {
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

// Scales and roi are float32 (the ONNX type); any other type is refused.
StatusOr<std::vector<double>> ReadFloat32s(const Tensor& t, const char* what) {
  if (t.dtype() != DataType::kFloat32) return InvalidArgument(std::string(what) + " must be float32");
  return std::vector<double>(t.data<float>(), t.data<float>() + t.num_elements());
}

StatusOr<BoundKernel> ResizeFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  MF_ASSIGN_OR_RETURN(ops::ResizeAttributes p, ops::ReadResizeAttributes(init));
  return Bind(
      [p](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        const Tensor* roi = in.size() > 1 ? in[1] : nullptr;
        const Tensor* scales = in.size() > 2 ? in[2] : nullptr;
        const Tensor* sizes = in.size() > 3 ? in[3] : nullptr;
        MF_ASSIGN_OR_RETURN(std::vector<ops::ResizeAxis> axes,
                            ops::PlanResize(x.shape(), roi, scales, sizes, p.transform, ReadFloat32s));
        // Validate the final size before any pass allocates.
        MF_RETURN_IF_ERROR(Tensor::AllocateUninitialized(DataType::kFloat32, ops::ResizeOutputShape(axes)).status());
        Tensor cur = x.Clone();
        for (int axis = 0; axis < x.rank(); ++axis) {
          const ops::ResizeAxis& a = axes[static_cast<size_t>(axis)];
          if (a.identity) continue;
          MF_ASSIGN_OR_RETURN(cur, ResizeAlongAxis(p, cur, axis, AxisTaps(p, a)));
        }
        out[0] = std::move(cur);
        return Status::Ok();
      },
      {DataType::kFloat32});
}

}  // namespace

void RegisterResizeKernels(KernelRegistry* r) { r->Register({"Resize", 11, ResizeFactory, "float"}); }

}  // namespace mf::runtime::cpu
