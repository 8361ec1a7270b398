// Conv and ConvTranspose on oneDNN (direct/JIT convolution and deconvolution primitives).
// One primitive is built per input shape and cached; constant weights are reordered once per
// primitive into the layout oneDNN picked. Bias and a fused activation run inside the primitive.
#include <cstring>
#include <optional>
#include <map>
#include <mutex>

#include "runtime/cpu/activation.h"
#include "runtime/cpu/cpu_common.h"
#include "runtime/cpu/dnnl_engine.h"

namespace mf::runtime::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

struct ConvParams {
  bool transpose = false;
  int64_t group = 1;
  std::string auto_pad = "NOTSET";
  std::vector<int64_t> kernel_shape, strides, dilations, pads, output_padding, output_shape;
  ActivationParams act;
  bool fused_sum = false;  // input 3 is added to the output before `act`
  // Physical layouts (channels-last, see Value::nhwc) of the input, the residual and the output.
  bool src_nhwc = false, addend_nhwc = false, dst_nhwc = false;
};

// Per-shape geometry, with 1-D convolutions promoted to 2-D (oneDNN's weight tags for
// transposed 1-D convolutions do not exist).
struct Geometry {
  memory::dims src, weights, bias, dst, strides, dilations, pad_l, pad_r;
  size_t spatial = 0;
};

Tag PlainTag(size_t rank) { return rank == 4 ? Tag::nchw : Tag::ncdhw; }

StatusOr<Geometry> ComputeGeometry(const ConvParams& p, const Shape& x, const Shape& w) {
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
  if (g <= 0 || c != w_in || (p.transpose ? w[0] % g : w[0] % g) != 0) {
    return InvalidArgument("input channels " + std::to_string(c) + " do not match weights " + ShapeToString(w) +
                           " with group " + std::to_string(g));
  }
  // Bounds keep every size computation below far from int64 overflow on hostile attributes.
  constexpr int64_t kMaxAttr = int64_t{1} << 24;
  for (const auto* v : {&p.strides, &p.dilations, &p.pads, &p.output_padding, &p.output_shape}) {
    for (int64_t value : *v) {
      if (value < -kMaxAttr || value > kMaxAttr) {
        return InvalidArgument("strides/dilations/pads/output_padding/output_shape value " + std::to_string(value) + " is out of range");
      }
    }
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i] > kMaxAttr || w[i] > kMaxAttr) return InvalidArgument("input " + ShapeToString(x) + " or weights " + ShapeToString(w) + " are too large for a convolution");
  }
  Geometry geo;
  geo.spatial = sp;
  std::vector<int64_t> out(sp);
  std::vector<int64_t> pl(sp), pr(sp), st(sp), dl(sp);
  for (size_t i = 0; i < sp; ++i) {
    int64_t in = x[2 + i], k = w[2 + i];
    if (!p.kernel_shape.empty() && p.kernel_shape[i] != k) return InvalidArgument("kernel_shape does not match the weights");
    st[i] = get(p.strides, i, 1);
    dl[i] = get(p.dilations, i, 1);
    if (st[i] <= 0 || dl[i] <= 0) return InvalidArgument("strides and dilations must be positive");
    int64_t ek = (k - 1) * dl[i] + 1;
    pl[i] = get(p.pads, i, 0);
    pr[i] = get(p.pads, i + sp, 0);
    if (pl[i] < 0 || pr[i] < 0) return InvalidArgument("pads must not be negative");
    int64_t op = get(p.output_padding, i, 0);
    if (p.transpose) {
      int64_t want = p.output_shape.empty() ? -1 : p.output_shape[p.output_shape.size() - sp + i];
      if (want >= 0 || (p.auto_pad != "NOTSET" && p.auto_pad != "VALID")) {
        int64_t target = want >= 0 ? want : in * st[i];
        // A negative total (output_shape larger than the natural size) extends the end.
        int64_t total = st[i] * (in - 1) + op + ek - target;
        int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor division
        pl[i] = p.auto_pad == "SAME_UPPER" ? half : total - half;
        pr[i] = total - pl[i];
        if (pl[i] < 0) return InvalidArgument("output_shape needs a negative begin padding");
      } else if (p.auto_pad == "VALID") {
        pl[i] = pr[i] = 0;
      }
      out[i] = st[i] * (in - 1) + op + ek - pl[i] - pr[i];
      // oneDNN has no output_padding: the extra rows/cols come from shrinking the end pad.
      pr[i] -= op;
    } else {
      if (p.auto_pad == "SAME_UPPER" || p.auto_pad == "SAME_LOWER") {
        int64_t o = (in + st[i] - 1) / st[i];
        int64_t total = std::max<int64_t>(0, (o - 1) * st[i] + ek - in);
        pl[i] = p.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pr[i] = total - pl[i];
      } else if (p.auto_pad == "VALID") {
        pl[i] = pr[i] = 0;
      } else if (p.auto_pad != "NOTSET") {
        return InvalidArgument("unknown auto_pad '" + p.auto_pad + "'");
      }
      int64_t span = in + pl[i] + pr[i] - ek;
      if (span < 0) return InvalidArgument("the kernel is larger than the padded input " + ShapeToString(x));
      out[i] = span / st[i] + 1;
    }
    if (out[i] <= 0) return InvalidArgument("output would be empty for input " + ShapeToString(x));
  }
  if (sp == 1) {  // promote to 2-D: H = 1
    out.insert(out.begin(), 1);
    pl.insert(pl.begin(), 0);
    pr.insert(pr.begin(), 0);
    st.insert(st.begin(), 1);
    dl.insert(dl.begin(), 1);
  }
  memory::dims src{x[0], c}, dst{x[0], m}, weights;
  if (sp == 1) src.push_back(1);
  for (size_t i = 0; i < sp; ++i) src.push_back(x[2 + i]);
  for (int64_t o : out) dst.push_back(o);
  if (g > 1) weights.push_back(g);
  weights.push_back(m / g);
  weights.push_back(c / g);
  if (sp == 1) weights.push_back(1);
  for (size_t i = 0; i < sp; ++i) weights.push_back(w[2 + i]);
  geo.src = src;
  geo.dst = dst;
  geo.weights = weights;
  geo.bias = {m};
  geo.strides = st;
  for (int64_t d : dl) geo.dilations.push_back(d - 1);  // oneDNN counts dilation from 0
  geo.pad_l = pl;
  geo.pad_r = pr;
  return geo;
}

Tag WeightsTag(const ConvParams& p, size_t rank, bool grouped) {
  // ONNX: Conv weights are [M, C/g, k...] (oihw); ConvTranspose weights are [C, M/g, k...] (iohw).
  if (p.transpose) {
    if (rank == 4) return grouped ? Tag::giohw : Tag::iohw;
    return grouped ? Tag::giodhw : Tag::iodhw;
  }
  if (rank == 4) return grouped ? Tag::goihw : Tag::oihw;
  return grouped ? Tag::goidhw : Tag::oidhw;
}

dnnl::algorithm EltwiseAlgorithm(Activation a) {
  switch (a) {
    case Activation::kRelu:
    case Activation::kLeakyRelu: return dnnl::algorithm::eltwise_relu;
    case Activation::kSigmoid: return dnnl::algorithm::eltwise_logistic;
    case Activation::kTanh: return dnnl::algorithm::eltwise_tanh;
    case Activation::kClip: return dnnl::algorithm::eltwise_clip;
    case Activation::kNone: break;
  }
  return dnnl::algorithm::undef;
}

struct Prepared {
  dnnl::primitive prim;
  // The layouts oneDNN chose (blocked, e.g. nChw16c, where that runs faster) and the plain
  // NCHW layouts our tensors use; reorders convert between them around the primitive.
  memory::desc src_md, weights_md, dst_md, bias_md, scratch_md, plain_src_md, plain_dst_md, addend_md;
  std::optional<dnnl::reorder> src_reorder, dst_reorder;
  memory packed_weights;  // set when the weights are constant
  bool weights_reorder = false;  // runtime weights need a reorder into weights_md
  memory::desc user_weights_md;
};

class ConvKernel final : public Kernel {
 public:
  // `const_w` is the weights tensor when it is a constant: it is then reordered once per shape.
  ConvKernel(ConvParams p, const Tensor* const_w) : p_(std::move(p)), const_w_(const_w) {}

  Status Run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) const override {
    const Tensor& x = *in[0];
    const Tensor& w = *in[1];
    const Tensor* b = in.size() > 2 ? in[2] : nullptr;
    MF_ASSIGN_OR_RETURN(Geometry geo, ComputeGeometry(p_, x.shape(), w.shape()));
    if (b && (b->rank() != 1 || b->dim(0) != geo.bias[0])) {
      return InvalidArgument("bias " + ShapeToString(b->shape()) + " does not match " + std::to_string(geo.bias[0]) + " output channels");
    }
    Shape out_shape(geo.dst.begin(), geo.dst.end());
    if (geo.spatial == 1) out_shape.erase(out_shape.begin() + 2);
    const Tensor* addend = p_.fused_sum && in.size() > 3 ? in[3] : nullptr;
    // The residual is summed inside the primitive when it has the output's shape; a broadcast
    // addend (rare) is added afterwards, and then the activation must wait for it too.
    bool sum_in_primitive = addend && addend->shape() == out_shape;
    bool add_after = addend && !sum_in_primitive;
    MF_ASSIGN_OR_RETURN(std::shared_ptr<const Prepared> prep,
                        Prepare(geo, x.shape(), w, b != nullptr, sum_in_primitive, !add_after));
    MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, out_shape));
    try {
      dnnl::engine& eng = CpuEngine();
      dnnl::stream stream(eng);
      memory user_src(prep->plain_src_md, eng, const_cast<void*>(x.raw_data()));
      memory user_dst(prep->plain_dst_md, eng, out[0].raw_data());
      memory src = user_src, dst = user_dst;
      if (prep->src_reorder) {
        src = memory(prep->src_md, eng);
        prep->src_reorder->execute(stream, user_src, src);
      }
      if (prep->dst_reorder) dst = memory(prep->dst_md, eng);
      if (sum_in_primitive) {
        // The sum post-op accumulates into dst: start it as the residual, in dst's layout.
        memory user_addend(prep->addend_md, eng, const_cast<void*>(addend->raw_data()));
        if (prep->addend_md != prep->dst_md) {
          dnnl::reorder(user_addend, dst).execute(stream, user_addend, dst);
        } else {
          std::memcpy(dst.get_data_handle(), addend->raw_data(), addend->byte_size());
        }
      }
      std::vector<uint8_t> scratch(prep->scratch_md.get_size());
      memory scratch_mem(prep->scratch_md, eng, scratch.data());
      std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratch_mem}};
      memory weights;
      if (prep->packed_weights) {
        weights = prep->packed_weights;
      } else {
        memory user(prep->user_weights_md, eng, const_cast<void*>(w.raw_data()));
        if (prep->weights_reorder) {
          weights = memory(prep->weights_md, eng);
          dnnl::reorder(user, weights).execute(stream, user, weights);
        } else {
          weights = user;
        }
      }
      args[DNNL_ARG_WEIGHTS] = weights;
      if (b) args[DNNL_ARG_BIAS] = memory(prep->bias_md, eng, const_cast<void*>(b->raw_data()));
      prep->prim.execute(stream, args);
      if (prep->dst_reorder) prep->dst_reorder->execute(stream, dst, user_dst);
      stream.wait();
    } catch (const dnnl::error& e) {
      return DnnlError(e, p_.transpose ? "ConvTranspose" : "Conv");
    }
    if (add_after) {
      if (p_.dst_nhwc || p_.addend_nhwc) {
        return InvalidArgument("the residual " + ShapeToString(addend->shape()) + " does not match the output " +
                               ShapeToString(out_shape));
      }
      MF_ASSIGN_OR_RETURN(Shape bs, BroadcastShapes(out_shape, addend->shape()));
      if (bs != out_shape) {
        return InvalidArgument("the residual " + ShapeToString(addend->shape()) + " does not broadcast to the output " +
                               ShapeToString(out_shape));
      }
      std::vector<int64_t> st = BroadcastStrides(addend->shape(), out_shape);
      float* po = out[0].data<float>();
      const float* pa = addend->data<float>();
      for (int64_t i = 0; i < out[0].num_elements(); ++i) {
        int64_t rem = i, off = 0;
        for (size_t d = out_shape.size(); d-- > 0;) {
          off += (rem % out_shape[d]) * st[d];
          rem /= out_shape[d];
        }
        po[i] += pa[off];
      }
      ApplyActivation(p_.act, po, out[0].num_elements());
    }
    return Status::Ok();
  }

 private:
  StatusOr<std::shared_ptr<const Prepared>> Prepare(const Geometry& geo, const Shape& x_shape, const Tensor& w,
                                                    bool has_bias, bool with_sum, bool with_act) const {
    Shape key = x_shape;
    key.insert(key.end(), w.shape().begin(), w.shape().end());
    key.push_back(has_bias);
    key.push_back(with_sum);
    key.push_back(with_act);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(key);
      if (it != cache_.end()) return it->second;
    }
    auto prep = std::make_shared<Prepared>();
    try {
      dnnl::engine& eng = CpuEngine();
      size_t rank = geo.src.size();
      bool grouped = p_.group > 1;
      memory::desc plain_src(geo.src, memory::data_type::f32, p_.src_nhwc ? Tag::nhwc : PlainTag(rank));
      memory::desc plain_dst(geo.dst, memory::data_type::f32, p_.dst_nhwc ? Tag::nhwc : PlainTag(rank));
      prep->addend_md = memory::desc(geo.dst, memory::data_type::f32, p_.addend_nhwc ? Tag::nhwc : PlainTag(rank));
      memory::desc src_md(geo.src, memory::data_type::f32, Tag::any);
      memory::desc dst_md(geo.dst, memory::data_type::f32, Tag::any);
      memory::desc any_w(geo.weights, memory::data_type::f32, Tag::any);
      memory::desc bias_md = has_bias ? memory::desc(geo.bias, memory::data_type::f32, Tag::x) : memory::desc();
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::post_ops ops;
      if (with_sum) ops.append_sum(1.f);
      if (with_act && p_.act.kind != Activation::kNone) {
        float alpha = p_.act.alpha, beta = p_.act.beta;
        if (p_.act.kind == Activation::kRelu) alpha = 0.f;
        ops.append_eltwise(1.f, EltwiseAlgorithm(p_.act.kind), alpha, beta);
      }
      attr.set_post_ops(ops);
      memory::desc weights_md;
      if (p_.transpose) {
        dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                                            src_md, any_w, bias_md, dst_md, geo.strides, geo.dilations, geo.pad_l,
                                            geo.pad_r);
        dnnl::deconvolution_forward::primitive_desc pd(d, attr, eng);
        prep->prim = dnnl::deconvolution_forward(pd);
        weights_md = pd.weights_desc();
        src_md = pd.src_desc();
        dst_md = pd.dst_desc();
        prep->scratch_md = pd.scratchpad_desc();
      } else {
        dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                          src_md, any_w, bias_md, dst_md, geo.strides, geo.dilations, geo.pad_l,
                                          geo.pad_r);
        dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
        prep->prim = dnnl::convolution_forward(pd);
        weights_md = pd.weights_desc();
        src_md = pd.src_desc();
        dst_md = pd.dst_desc();
        prep->scratch_md = pd.scratchpad_desc();
      }
      prep->src_md = src_md;
      prep->dst_md = dst_md;
      prep->plain_src_md = plain_src;
      prep->plain_dst_md = plain_dst;
      if (src_md != plain_src) prep->src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plain_src, eng, src_md));
      if (dst_md != plain_dst) prep->dst_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, dst_md, eng, plain_dst));
      prep->bias_md = bias_md;
      prep->weights_md = weights_md;
      prep->user_weights_md = memory::desc(geo.weights, memory::data_type::f32, WeightsTag(p_, rank, grouped));
      prep->weights_reorder = prep->user_weights_md != weights_md;
      if (const_w_ == &w) {
        dnnl::stream stream(eng);
        memory user(prep->user_weights_md, eng, const_cast<void*>(w.raw_data()));
        prep->packed_weights = memory(weights_md, eng);
        dnnl::reorder(user, prep->packed_weights).execute(stream, user, prep->packed_weights);
        stream.wait();
      }
    } catch (const dnnl::error& e) {
      return DnnlError(e, p_.transpose ? "ConvTranspose" : "Conv");
    }
    std::lock_guard<std::mutex> lock(mu_);
    // Bounded: a client sending ever-new shapes must not grow memory without limit.
    if (cache_.size() >= kMaxCachedShapes) cache_.clear();
    cache_[key] = prep;
    return std::shared_ptr<const Prepared>(prep);
  }

  static constexpr size_t kMaxCachedShapes = 32;
  ConvParams p_;
  const Tensor* const_w_;
  mutable std::mutex mu_;
  mutable std::map<Shape, std::shared_ptr<const Prepared>> cache_;
};

StatusOr<BoundKernel> ConvFactory(const KernelInit& init, bool transpose) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  MF_RETURN_IF_ERROR(RequireFloat(init, 1));
  if (init.has_input(2)) MF_RETURN_IF_ERROR(RequireFloat(init, 2));
  const Attributes& a = init.attrs();
  ConvParams p;
  p.transpose = transpose;
  MF_ASSIGN_OR_RETURN(p.group, a.GetInt("group", 1));
  MF_ASSIGN_OR_RETURN(p.auto_pad, a.GetString("auto_pad", "NOTSET"));
  MF_ASSIGN_OR_RETURN(p.kernel_shape, a.GetInts("kernel_shape", {}));
  MF_ASSIGN_OR_RETURN(p.strides, a.GetInts("strides", {}));
  MF_ASSIGN_OR_RETURN(p.dilations, a.GetInts("dilations", {}));
  MF_ASSIGN_OR_RETURN(p.pads, a.GetInts("pads", {}));
  MF_ASSIGN_OR_RETURN(p.output_padding, a.GetInts("output_padding", {}));
  MF_ASSIGN_OR_RETURN(p.output_shape, a.GetInts("output_shape", {}));
  MF_ASSIGN_OR_RETURN(Activation kind, ActivationFromName(init.node.fused_activation));
  p.act = {kind, init.node.fused_alpha, init.node.fused_beta};
  p.fused_sum = init.node.fused_sum;
  p.src_nhwc = init.input_nhwc.size() > 0 && init.input_nhwc[0];
  p.addend_nhwc = init.input_nhwc.size() > 3 && init.input_nhwc[3];
  p.dst_nhwc = init.output_nhwc;
  if (p.fused_sum && (transpose || init.num_inputs() != 4)) {
    return init.Error(StatusCode::kInternal, "a fused sum needs a Conv with the addend as input 3");
  }
  if (p.fused_sum) MF_RETURN_IF_ERROR(RequireFloat(init, 3));
  if (p.group <= 0) return init.Error(StatusCode::kInvalidArgument, "group must be positive");
  if (p.auto_pad != "NOTSET" && p.auto_pad != "VALID" && p.auto_pad != "SAME_UPPER" && p.auto_pad != "SAME_LOWER") {
    return init.Error(StatusCode::kInvalidArgument, "unknown auto_pad '" + p.auto_pad + "'");
  }
  const Tensor* w = init.constant_inputs.size() > 1 ? init.constant_inputs[1] : nullptr;
  return BoundKernel{std::make_unique<ConvKernel>(std::move(p), w), {DataType::kFloat32}};
}

}  // namespace

void RegisterConvKernels(KernelRegistry* r) {
  r->Register({"Conv", 1, [](const KernelInit& i) { return ConvFactory(i, false); }, "float"});
  r->Register({"ConvTranspose", 1, [](const KernelInit& i) { return ConvFactory(i, true); }, "float"});
}

}  // namespace mf::runtime::cpu
