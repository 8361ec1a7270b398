#include "runtime/ops/conv_geometry.h"

#include <algorithm>

namespace mf::runtime::ops {

Status CheckConvFusedSum(const KernelInit& init, bool transpose) {
  if (init.node.fused_sum && (transpose || init.num_inputs() != 4)) {
    return init.Error(StatusCode::kInternal, "a fused sum needs a Conv with the addend as input 3");
  }
  return Status::Ok();
}

StatusOr<ConvAttributes> ReadConvAttributes(const KernelInit& init, bool transpose) {
  const Attributes& a = init.attrs();
  ConvAttributes p;
  p.transpose = transpose;
  MF_ASSIGN_OR_RETURN(p.group, a.GetInt("group", 1));
  MF_ASSIGN_OR_RETURN(p.auto_pad, a.GetString("auto_pad", "NOTSET"));
  MF_ASSIGN_OR_RETURN(p.kernel_shape, a.GetInts("kernel_shape", {}));
  MF_ASSIGN_OR_RETURN(p.strides, a.GetInts("strides", {}));
  MF_ASSIGN_OR_RETURN(p.dilations, a.GetInts("dilations", {}));
  MF_ASSIGN_OR_RETURN(p.pads, a.GetInts("pads", {}));
  MF_ASSIGN_OR_RETURN(p.output_padding, a.GetInts("output_padding", {}));
  MF_ASSIGN_OR_RETURN(p.output_shape, a.GetInts("output_shape", {}));
  if (p.group <= 0) return init.Error(StatusCode::kInvalidArgument, "group must be positive");
  // Bounded like every other attribute: channel arithmetic with the group must not overflow.
  if (p.group > (int64_t{1} << 24)) return init.Error(StatusCode::kInvalidArgument, "group is out of range");
  if (p.auto_pad != "NOTSET" && p.auto_pad != "VALID" && p.auto_pad != "SAME_UPPER" && p.auto_pad != "SAME_LOWER") {
    return init.Error(StatusCode::kInvalidArgument, "unknown auto_pad '" + p.auto_pad + "'");
  }
  return p;
}

StatusOr<ConvGeometry> ComputeConvGeometry(const ConvAttributes& p, const Shape& x, const Shape& w) {
  if (x.size() < 3 || x.size() > 5 || w.size() != x.size()) {
    return InvalidArgument("input " + ShapeToString(x) + " and weights " + ShapeToString(w) +
                           " must both be 3-D to 5-D (N, C, spatial...)");
  }
  size_t sp = x.size() - 2;
  auto get = [&](const std::vector<int64_t>& v, size_t i, int64_t dflt) { return v.empty() ? dflt : v[i]; };
  if ((!p.strides.empty() && p.strides.size() != sp) || (!p.dilations.empty() && p.dilations.size() != sp) ||
      (!p.pads.empty() && p.pads.size() != 2 * sp) || (!p.kernel_shape.empty() && p.kernel_shape.size() != sp)) {
    return InvalidArgument("strides/dilations/pads/kernel_shape do not match " + std::to_string(sp) + " spatial dims");
  }
  int64_t g = p.group;
  int64_t c = x[1];
  int64_t m = p.transpose ? w[1] * g : w[0];
  int64_t w_in = p.transpose ? w[0] : w[1] * g;
  if (g <= 0 || c != w_in || w[0] % g != 0) {
    return InvalidArgument("input channels " + std::to_string(c) + " do not match weights " + ShapeToString(w) +
                           " with group " + std::to_string(g));
  }
  // Bounds keep every size computation below far from int64 overflow on hostile attributes.
  constexpr int64_t kMaxAttr = int64_t{1} << 24;
  for (const auto* v : {&p.strides, &p.dilations, &p.pads, &p.output_padding, &p.output_shape}) {
    for (int64_t value : *v) {
      if (value < -kMaxAttr || value > kMaxAttr) {
        return InvalidArgument("strides/dilations/pads/output_padding/output_shape value " + std::to_string(value) +
                               " is out of range");
      }
    }
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] > kMaxAttr || w[i] > kMaxAttr)
      return InvalidArgument("input " + ShapeToString(x) + " or weights " + ShapeToString(w) +
                             " are too large for a convolution");
  }
  ConvGeometry geo;
  geo.spatial = sp;
  geo.n = x[0];
  geo.c = c;
  geo.m = m;
  for (size_t i = 0; i < sp; ++i) {
    int64_t in = x[2 + i], k = w[2 + i];
    if (!p.kernel_shape.empty() && p.kernel_shape[i] != k)
      return InvalidArgument("kernel_shape does not match the weights");
    int64_t st = get(p.strides, i, 1), dl = get(p.dilations, i, 1);
    if (st <= 0 || dl <= 0) return InvalidArgument("strides and dilations must be positive");
    int64_t ek = (k - 1) * dl + 1;
    int64_t pl = get(p.pads, i, 0), pr = get(p.pads, i + sp, 0);
    if (pl < 0 || pr < 0) return InvalidArgument("pads must not be negative");
    int64_t op = get(p.output_padding, i, 0);
    int64_t out = 0;
    if (p.transpose) {
      int64_t want = p.output_shape.empty() ? -1 : p.output_shape[p.output_shape.size() - sp + i];
      if (want >= 0 || (p.auto_pad != "NOTSET" && p.auto_pad != "VALID")) {
        int64_t target = want >= 0 ? want : in * st;
        int64_t total = st * (in - 1) + op + ek - target;             // negative: the output extends past the end
        int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor division
        pl = p.auto_pad == "SAME_UPPER" ? half : total - half;
        pr = total - pl;
        if (pl < 0) return InvalidArgument("output_shape needs a negative begin padding");
      } else if (p.auto_pad == "VALID") {
        pl = pr = 0;
      }
      out = st * (in - 1) + op + ek - pl - pr;
    } else {
      if (p.auto_pad == "SAME_UPPER" || p.auto_pad == "SAME_LOWER") {
        int64_t o = (in + st - 1) / st;
        int64_t total = std::max<int64_t>(0, (o - 1) * st + ek - in);
        pl = p.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pr = total - pl;
      } else if (p.auto_pad == "VALID") {
        pl = pr = 0;
      } else if (p.auto_pad != "NOTSET") {
        return InvalidArgument("unknown auto_pad '" + p.auto_pad + "'");
      }
      int64_t span = in + pl + pr - ek;
      if (span < 0) return InvalidArgument("the kernel is larger than the padded input " + ShapeToString(x));
      out = span / st + 1;
    }
    if (out <= 0) return InvalidArgument("output would be empty for input " + ShapeToString(x));
    geo.in.push_back(in);
    geo.k.push_back(k);
    geo.st.push_back(st);
    geo.dl.push_back(dl);
    geo.pl.push_back(pl);
    geo.pr.push_back(pr);
    geo.op.push_back(op);
    geo.out.push_back(out);
  }
  return geo;
}

Shape ConvOutputShape(const ConvGeometry& geo) {
  Shape s{geo.n, geo.m};
  s.insert(s.end(), geo.out.begin(), geo.out.end());
  return s;
}

}  // namespace mf::runtime::ops
