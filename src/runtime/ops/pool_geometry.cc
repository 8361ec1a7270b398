#include "runtime/ops/pool_geometry.h"

#include <algorithm>

namespace mf::runtime::ops {

StatusOr<PoolAttributes> ReadPoolAttributes(const KernelInit& init) {
  if (init.node.outputs.size() > 1 && init.node.outputs[1] != kNoValue) {
    return init.Error(StatusCode::kUnimplemented, "the Indices output of MaxPool is not supported");
  }
  const Attributes& a = init.attrs();
  PoolAttributes p;
  MF_ASSIGN_OR_RETURN(p.auto_pad, a.GetString("auto_pad", "NOTSET"));
  MF_ASSIGN_OR_RETURN(p.kernel, a.GetInts("kernel_shape", {}));
  MF_ASSIGN_OR_RETURN(p.strides, a.GetInts("strides", {}));
  MF_ASSIGN_OR_RETURN(p.pads, a.GetInts("pads", {}));
  MF_ASSIGN_OR_RETURN(p.dilations, a.GetInts("dilations", {}));
  MF_ASSIGN_OR_RETURN(p.ceil_mode, a.GetInt("ceil_mode", 0));
  MF_ASSIGN_OR_RETURN(p.count_include_pad, a.GetInt("count_include_pad", 0));
  MF_ASSIGN_OR_RETURN(int64_t storage_order, a.GetInt("storage_order", 0));
  (void)storage_order;  // only affects the Indices output, which no kernel produces
  if (p.kernel.empty()) return init.Error(StatusCode::kInvalidArgument, "kernel_shape is required");
  if (p.auto_pad != "NOTSET" && p.auto_pad != "VALID" && p.auto_pad != "SAME_UPPER" && p.auto_pad != "SAME_LOWER") {
    return init.Error(StatusCode::kInvalidArgument, "unknown auto_pad '" + p.auto_pad + "'");
  }
  return p;
}

StatusOr<std::array<PoolDim, 3>> PoolGeometry(const PoolAttributes& p, const Shape& x) {
  if (x.size() < 3 || x.size() > 5) return InvalidArgument("pooling input must be 3-D to 5-D, got " + ShapeToString(x));
  size_t sp = x.size() - 2;
  if (p.kernel.size() != sp)
    return InvalidArgument("kernel_shape has " + std::to_string(p.kernel.size()) + " dims, the input " +
                           ShapeToString(x) + " has " + std::to_string(sp) + " spatial dims");
  if ((!p.strides.empty() && p.strides.size() != sp) || (!p.pads.empty() && p.pads.size() != 2 * sp) ||
      (!p.dilations.empty() && p.dilations.size() != sp)) {
    return InvalidArgument("strides/pads/dilations do not match the spatial rank");
  }
  constexpr int64_t kMaxAttr = int64_t{1} << 24;  // keeps size arithmetic far from overflow
  for (const auto* v : {&p.kernel, &p.strides, &p.pads, &p.dilations}) {
    for (int64_t a : *v) {
      if (a > kMaxAttr || a < -kMaxAttr)
        return InvalidArgument("kernel_shape/strides/pads/dilations value " + std::to_string(a) + " is out of range");
    }
  }
  std::array<PoolDim, 3> dims;
  for (size_t i = 0; i < sp; ++i) {
    PoolDim& d = dims[3 - sp + i];
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

Shape PoolOutputShape(const Shape& x, const std::array<PoolDim, 3>& dims) {
  Shape out{x[0], x[1]};
  for (size_t i = 3 - (x.size() - 2); i < 3; ++i) out.push_back(dims[i].out);
  return out;
}

StatusOr<Shape> GlobalPoolShape(const Shape& x) {
  if (x.size() < 2) return InvalidArgument("global pooling input must be at least 2-D");
  Shape shape(x.size(), 1);
  shape[0] = x[0];
  shape[1] = x[1];
  return shape;
}

}  // namespace mf::runtime::ops
