// Conv and ConvTranspose on oneDNN (direct/JIT convolution and deconvolution primitives).
// One primitive is built per input shape and cached; constant weights are reordered once per
// primitive into the layout oneDNN picked. Bias and a fused activation run inside the primitive.
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "runtime/cpu/activation.h"
#include "runtime/cpu/cpu_common.h"
#include "runtime/cpu/dnnl_engine.h"
#include "runtime/cpu/panel_gemm.h"
#include "runtime/cpu/winograd_conv.h"
#include "runtime/ops/conv_geometry.h"

namespace mf::runtime::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

struct ConvParams {
  ops::ConvAttributes attrs;
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

// oneDNN's view of the ONNX geometry: 1-D promoted to 2-D, dilations counted from 0, and no
// output_padding (ConvTranspose gets it by shrinking the end pad).
StatusOr<Geometry> ComputeGeometry(const ConvParams& p, const Shape& x, const Shape& w) {
  MF_ASSIGN_OR_RETURN(ops::ConvGeometry onnx, ops::ComputeConvGeometry(p.attrs, x, w));
  size_t sp = onnx.spatial;
  int64_t g = p.attrs.group, c = onnx.c, m = onnx.m;
  std::vector<int64_t> out = onnx.out, pl = onnx.pl, pr = onnx.pr, st = onnx.st, dl = onnx.dl;
  if (p.attrs.transpose) {
    for (size_t i = 0; i < sp; ++i) pr[i] -= onnx.op[i];
  }
  if (sp == 1) {  // promote to 2-D: H = 1
    out.insert(out.begin(), 1);
    pl.insert(pl.begin(), 0);
    pr.insert(pr.begin(), 0);
    st.insert(st.begin(), 1);
    dl.insert(dl.begin(), 1);
  }
  Geometry geo;
  geo.spatial = sp;
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
  if (p.attrs.transpose) {
    if (rank == 4) return grouped ? Tag::giohw : Tag::iohw;
    return grouped ? Tag::giodhw : Tag::iodhw;
  }
  if (rank == 4) return grouped ? Tag::goihw : Tag::oihw;
  return grouped ? Tag::goidhw : Tag::oidhw;
}

struct PreparedConv {
  dnnl::primitive prim;
  // The layouts oneDNN chose (blocked, e.g. nChw16c, where that runs faster) and the plain
  // NCHW layouts our tensors use; reorders convert between them around the primitive.
  memory::desc src_md, weights_md, dst_md, bias_md, scratch_md, plain_src_md, plain_dst_md, addend_md;
  std::optional<dnnl::reorder> src_reorder, dst_reorder;
  memory packed_weights;         // set when the weights are constant: one of the kernel's packed copies
  bool weights_reorder = false;  // runtime weights need a reorder into weights_md
  memory::desc user_weights_md;
  bool on_panels = false;    // runs on PanelGemm (ConvKernel::UsesPanelGemm), not on oneDNN
  bool on_winograd = false;  // runs as WinogradConv (ConvKernel::UsesWinograd), not on oneDNN
  bool gather = false;       // a strided 1x1 on a matmul: its input pixels gathered into rows first
};

// A 2-D convolution's rows for PanelGemm, over a channels-last input: output pixel r = (n, y, x)
// reads k = tap * C + c as input channel c where tap (ky, kx) lands, or zeros in the padding.
// Chunks of K never straddle taps (UsesPanelGemm).
class TapRows final : public PanelGemm::Rows {
 public:
  TapRows(const Geometry& geo, const float* x) : x_(x) {
    c_ = geo.src[1], h_ = geo.src[2], w_ = geo.src[3], oh_ = geo.dst[2], ow_ = geo.dst[3], kw_ = geo.weights[3];
    sy_ = geo.strides[0], sx_ = geo.strides[1], py_ = geo.pad_l[0], px_ = geo.pad_l[1];
    dy_ = geo.dilations[0] + 1, dx_ = geo.dilations[1] + 1;  // oneDNN's dilations count from 0
  }

  const float* Chunk(int64_t row, int64_t k0) const override {
    const float* chunk;
    Chunks(row, 1, k0, &chunk);
    return chunk;
  }

  // Divides once for the first row, then steps from pixel to pixel (PanelGemm asks for every
  // chunk of every row: dividing each time cost a third of ResNet-18's 3x3 layers on AVX2).
  void Chunks(int64_t first, int64_t count, int64_t k0, const float** out) const override {
    const int64_t tap = k0 / c_, channel = k0 % c_;
    const int64_t ky = tap / kw_ * dy_ - py_, kx = tap % kw_ * dx_ - px_;
    int64_t ox = first % ow_, oy = first / ow_ % oh_, n = first / ow_ / oh_;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t iy = oy * sy_ + ky, ix = ox * sx_ + kx;
      const bool inside = iy >= 0 && iy < h_ && ix >= 0 && ix < w_;
      out[i] = inside ? x_ + ((n * h_ + iy) * w_ + ix) * c_ + channel : kZeros;
      if (++ox == ow_) {
        ox = 0;
        if (++oy == oh_) oy = 0, ++n;
      }
    }
  }

 private:
  alignas(64) static constexpr float kZeros[PanelGemm::kMaxChunk] = {};
  const float* x_;
  int64_t c_, h_, w_, oh_, ow_, kw_, sy_, sx_, py_, px_, dy_, dx_;
};

// The input pixels a strided 1x1 convolution reads, channels-last, as contiguous [N*OH*OW, C]
// rows (a 1x1 convolution's TapRows, each row one pixel).
StatusOr<Tensor> GatherStridedPixels(const Geometry& geo, const Tensor& x) {
  const int64_t rows = geo.dst[0] * geo.dst[2] * geo.dst[3], c = geo.src[1];
  MF_ASSIGN_OR_RETURN(Tensor gathered, Tensor::AllocateUninitialized(DataType::kFloat32, {rows, c}));
  const TapRows pixels(geo, x.data<float>());
  float* out = gathered.data<float>();
  ParallelFor(rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      std::memcpy(out + row * c, pixels.Chunk(row, 0), static_cast<size_t>(c) * sizeof(float));
    }
  });
  return gathered;
}

class ConvKernel final : public Kernel {
 public:
  // `weights_constant`: the weights are a constant of the graph. They are then reordered once
  // per oneDNN weights layout (input shapes usually share one) and kept here; once a packed copy
  // exists the plan may drop the graph's plain copy (OwnsCopyOfInput), and later layouts are
  // made from a packed copy.
  // `weights_consumable`: this node alone reads them (KernelInit::constant_consumable), so the
  // first packing hands the plain copy's pages back as it goes.
  ConvKernel(ConvParams p, bool weights_constant, bool weights_consumable)
      : p_(std::move(p)), weights_constant_(weights_constant), weights_consumable_(weights_consumable) {}

  bool OwnsCopyOfInput(size_t index) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return index == 1 && weights_constant_ && (!packed_.empty() || panel_ || winograd_);
  }

  // The residual: its buffer becomes the output's, and the sum post-op accumulates into it in
  // place of a copy (at ResNet-50's widest activations the copy took as long as the
  // convolution's own reads and writes).
  int in_place_input() const override { return p_.fused_sum ? 3 : -1; }

  size_t owned_bytes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    size_t bytes = 0;
    for (const PackedCopy& copy : packed_) {
      if (!panel_ || copy.storage != panel_->storage()) bytes += copy.weights.get_desc().get_size();
    }
    if (panel_) bytes += panel_->bytes();
    if (winograd_) bytes += winograd_->bytes();
    return bytes;
  }

  Status Run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) const override {
    const Tensor& x = *in[0];
    const Tensor& w = *in[1];
    const Tensor* b = in.size() > 2 ? in[2] : nullptr;
    MF_ASSIGN_OR_RETURN(Geometry geo, ComputeGeometry(p_, x.shape(), w.shape()));
    if (b && (b->rank() != 1 || b->dim(0) != geo.bias[0])) {
      return InvalidArgument("bias " + ShapeToString(b->shape()) + " does not match " + std::to_string(geo.bias[0]) +
                             " output channels");
    }
    Shape out_shape(geo.dst.begin(), geo.dst.end());
    if (geo.spatial == 1) out_shape.erase(out_shape.begin() + 2);
    const Tensor* addend = p_.fused_sum && in.size() > 3 ? in[3] : nullptr;
    // The residual's own tensor, when the plan handed it over (Kernel::in_place_input).
    Tensor donated;
    if (out[0].raw_data() != nullptr) {
      donated = std::move(out[0]);
      addend = &donated;
    }
    // The residual is summed inside the primitive when it has the output's shape; a broadcast
    // addend (rare) is added afterwards, and then the activation must wait for it too.
    bool sum_in_primitive = addend && addend->shape() == out_shape;
    bool add_after = addend && !sum_in_primitive;
    MF_ASSIGN_OR_RETURN(std::shared_ptr<const PreparedConv> prep,
                        Prepare(geo, x.shape(), w, b != nullptr, sum_in_primitive, !add_after));
    if (prep->on_panels || prep->on_winograd) {
      return RunOnPanels(*prep, geo, x, b, sum_in_primitive ? addend : nullptr, std::move(donated), out[0]);
    }
    // In place: the primitive writes dst as it is, which holds the residual already.
    const bool in_place = sum_in_primitive && donated.raw_data() != nullptr && donated.dtype() == DataType::kFloat32 &&
                          prep->addend_md == prep->dst_md && !prep->dst_reorder;
    if (in_place) {
      out[0] = std::move(donated);
    } else {
      MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, out_shape));
    }
    Tensor gathered;
    if (prep->gather) {
      MF_ASSIGN_OR_RETURN(gathered, GatherStridedPixels(geo, x));
    }
    try {
      dnnl::engine& eng = CpuEngine();
      dnnl::stream& stream = ThreadStream();
      memory user_src(prep->plain_src_md, eng, const_cast<void*>(prep->gather ? gathered.raw_data() : x.raw_data()));
      memory user_dst(prep->plain_dst_md, eng, out[0].raw_data());
      memory src = user_src, dst = user_dst;
      Tensor src_buffer, dst_buffer;
      if (prep->src_reorder) {
        MF_ASSIGN_OR_RETURN(src, TemporaryMemory(prep->src_md, &src_buffer));
        prep->src_reorder->execute(stream, user_src, src);
      }
      if (prep->dst_reorder) {
        MF_ASSIGN_OR_RETURN(dst, TemporaryMemory(prep->dst_md, &dst_buffer));
      }
      if (sum_in_primitive && !in_place) {
        // The sum post-op accumulates into dst: start it as the residual, in dst's layout.
        memory user_addend(prep->addend_md, eng, const_cast<void*>(addend->raw_data()));
        if (prep->addend_md != prep->dst_md) {
          dnnl::reorder(user_addend, dst).execute(stream, user_addend, dst);
        } else {
          std::memcpy(dst.get_data_handle(), addend->raw_data(), addend->byte_size());
        }
      }
      memory scratch_mem(prep->scratch_md, eng, ThreadScratchpad(prep->scratch_md.get_size()));
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
      memory bias;
      if (b) bias = memory(prep->bias_md, eng, const_cast<void*>(b->raw_data()));
      Execute(prep->prim, {{DNNL_ARG_SRC, &src},
                           {DNNL_ARG_DST, &dst},
                           {DNNL_ARG_SCRATCHPAD, &scratch_mem},
                           {DNNL_ARG_WEIGHTS, &weights},
                           {DNNL_ARG_BIAS, &bias}});
      if (prep->dst_reorder) prep->dst_reorder->execute(stream, dst, user_dst);
      stream.wait();
    } catch (const dnnl::error& e) {
      return DnnlError(e, p_.attrs.transpose ? "ConvTranspose" : "Conv");
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
  StatusOr<std::shared_ptr<const PreparedConv>> Prepare(const Geometry& geo, const Shape& x_shape, const Tensor& w,
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
    auto prep = std::make_shared<PreparedConv>();
    try {
      dnnl::engine& eng = CpuEngine();
      size_t rank = geo.src.size();
      bool grouped = p_.attrs.group > 1;
      auto layout = [&](const memory::dims& dims, bool channels_last) {
        return memory::desc(dims, memory::data_type::f32, channels_last ? Tag::nhwc : PlainTag(rank));
      };
      memory::desc plain_src = layout(geo.src, p_.src_nhwc);
      memory::desc plain_dst = layout(geo.dst, p_.dst_nhwc);
      prep->addend_md = layout(geo.dst, p_.addend_nhwc);
      memory::desc any_src(geo.src, memory::data_type::f32, Tag::any);
      memory::desc any_dst(geo.dst, memory::data_type::f32, Tag::any);
      memory::desc bias_md = has_bias ? memory::desc(geo.bias, memory::data_type::f32, Tag::x) : memory::desc();
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::post_ops ops;
      if (with_sum) ops.append_sum(1.f);
      if (with_act) AppendActivation(p_.act, ops);
      attr.set_post_ops(ops);
      // Channels-last activations are handed to oneDNN as NHWC, so a chain of convolutions
      // runs without reorders even where oneDNN, left to pick, would choose a blocked layout
      // (depthwise convolutions) and reorder around every one. NCHW sides let oneDNN pick and
      // are reordered. Should oneDNN have only its reference code for NHWC here, it picks
      // freely instead: reorders are cheaper than reference convolutions.
      std::optional<ConvPrimitive> made;
      if (with_act && UsesWinograd(geo, with_sum)) {  // !with_act: a broadcast residual comes after
        prep->on_winograd = true;
        return Finish(std::move(prep), key, w);
      }
      if (with_act && UsesPanelGemm(geo, with_sum)) {
        prep->on_panels = true;
        return Finish(std::move(prep), key, w);
      }
      if (std::optional<PointwiseMatMul> mm = MakePointwiseMatMul(geo, has_bias, with_sum, attr)) {
        // Every description, plain ones included, is the matmul's 2-D view of the same bytes.
        prep->prim = mm->made.prim;
        prep->scratch_md = mm->made.scratch_md;
        prep->src_md = prep->plain_src_md = mm->made.src_md;
        prep->dst_md = prep->plain_dst_md = prep->addend_md = mm->made.dst_md;
        prep->bias_md = mm->bias_md;
        prep->weights_md = mm->made.weights_md;
        prep->user_weights_md = mm->user_weights_md;
        prep->weights_reorder = prep->user_weights_md != prep->weights_md;
        prep->gather = mm->gather;
        return Finish(std::move(prep), key, w);
      }
      if (p_.src_nhwc || p_.dst_nhwc) {
        made = MakePrimitive(geo, p_.src_nhwc ? plain_src : any_src, p_.dst_nhwc ? plain_dst : any_dst, bias_md, attr,
                             /*fail_on_reference=*/true);
      }
      if (!made) made = MakePrimitive(geo, any_src, any_dst, bias_md, attr, /*fail_on_reference=*/false);
      prep->prim = made->prim;
      memory::desc weights_md = made->weights_md, src_md = made->src_md, dst_md = made->dst_md;
      prep->scratch_md = made->scratch_md;
      prep->src_md = src_md;
      prep->dst_md = dst_md;
      prep->plain_src_md = plain_src;
      prep->plain_dst_md = plain_dst;
      if (src_md != plain_src)
        prep->src_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, plain_src, eng, src_md));
      if (dst_md != plain_dst)
        prep->dst_reorder = dnnl::reorder(dnnl::reorder::primitive_desc(eng, dst_md, eng, plain_dst));
      prep->bias_md = bias_md;
      prep->weights_md = weights_md;
      prep->user_weights_md = memory::desc(geo.weights, memory::data_type::f32, WeightsTag(p_, rank, grouped));
      prep->weights_reorder = prep->user_weights_md != weights_md;
    } catch (const dnnl::error& e) {
      return DnnlError(e, p_.attrs.transpose ? "ConvTranspose" : "Conv");
    }
    return Finish(std::move(prep), key, w);
  }

  // Packs the constant weights for `prep` (once per layout) and caches it under `key`.
  StatusOr<std::shared_ptr<const PreparedConv>> Finish(std::shared_ptr<PreparedConv> prep, const Shape& key,
                                                       const Tensor& w) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (weights_constant_) {
      if (weights_lost_) return Internal("the constant weights were lost when packing them failed midway");
      try {
        if (prep->on_winograd) {
          MF_RETURN_IF_ERROR(WinogradWeightsLocked(w));
        } else if (prep->on_panels) {
          MF_RETURN_IF_ERROR(PanelWeightsLocked(w));
        } else {
          prep->packed_weights = PackedWeightsLocked(prep->weights_md, prep->user_weights_md, w);
        }
      } catch (const dnnl::error& e) {
        return DnnlError(e, p_.attrs.transpose ? "ConvTranspose" : "Conv");
      }
    }
    // Bounded: a client sending ever-new shapes must not grow memory without limit.
    if (cache_.size() >= kMaxCachedShapes) cache_.clear();
    cache_[key] = prep;
    return std::shared_ptr<const PreparedConv>(prep);
  }

  // The constant weights in layout `md`, reordered on first use: the first copy from the
  // graph's plain one (consuming it when allowed), later ones from that first packed copy (the
  // plain one may be gone by then). Caller holds mu_.
  memory PackedWeightsLocked(const memory::desc& md, const memory::desc& plain_md, const Tensor& w) const {
    for (const PackedCopy& copy : packed_) {
      if (copy.weights.get_desc() == md) return copy.weights;
    }
    dnnl::engine& eng = CpuEngine();
    if (panel_ && panel_->isa() == PanelGemm::Isa::kAvx512 &&
        md == PanelLayout(panel_->k(), panel_->n())) {  // the panels are this layout's bytes already
      memory shared(md, eng, panel_->storage().get());
      packed_.push_back({shared, panel_->storage()});
      return shared;
    }
    dnnl::stream stream(eng);
    std::shared_ptr<void> storage = AllocateWeightBuffer(md.get_size());
    if (!storage) throw dnnl::error(dnnl_out_of_memory, "allocating the packed weights");
    memory packed(md, eng, storage.get());
    if (!packed_.empty()) {
      memory first = packed_.front().weights;
      dnnl::reorder(first, packed).execute(stream, first, packed);
      stream.wait();
    } else if (panel_ || winograd_) {  // the plain copy went when these were packed: unpack them
      std::vector<float> plain;
      // Without a oneDNN copy to reorder from, unpacking cannot fail.
      memory user(plain_md, eng, const_cast<float*>(*PlainWeightsLocked(w, plain)));
      dnnl::reorder(user, packed).execute(stream, user, packed);
      stream.wait();
    } else {
      try {
        ReorderPlain(plain_md, const_cast<void*>(w.raw_data()), packed, stream, weights_consumable_);
      } catch (...) {
        // Consumed, some plain pages may be gone: never pack from them again.
        if (weights_consumable_) weights_lost_ = true;
        throw;
      }
    }
    packed_.push_back({packed, std::move(storage)});
    return packed;
  }

  // Reorders the plain weights into `packed`. With `consume`, in slices along dim 0 (output
  // channels, or groups), handing each slice's plain pages back once it is packed, so the two
  // copies are never both resident whole. Slices need dim 0 outermost in both layouts and no
  // padding in the packed one (its padding would have to be zeroed first, which touches all of
  // it); otherwise one reorder, and the plain pages go after it.
  static void ReorderPlain(const memory::desc& plain_md, void* plain_data, memory packed, dnnl::stream& stream,
                           bool consume) {
    dnnl::engine& eng = CpuEngine();
    const memory::desc packed_md = packed.get_desc();
    const int64_t block = consume ? SlicableBlock(plain_md, packed_md) : 0;
    const memory::dims dims = plain_md.dims();
    const size_t bytes = plain_md.get_size();
    if (block <= 0) {
      memory plain(plain_md, eng, plain_data);
      dnnl::reorder(plain, packed).execute(stream, plain, packed);
      stream.wait();
      if (consume) ReleaseResidentPages(plain_data, bytes);
      return;
    }
    ConsumedPages plain_pages(plain_data, bytes);
    const size_t row_bytes = bytes / static_cast<size_t>(dims[0]);
    constexpr size_t kSliceBytes = size_t{1} << 20;
    const int64_t rows =
        std::max<int64_t>(block, static_cast<int64_t>(kSliceBytes / std::max<size_t>(row_bytes, 1)) / block * block);
    for (int64_t first = 0; first < dims[0]; first += rows) {
      memory::dims slice = dims, offsets(dims.size(), 0);
      slice[0] = std::min(rows, dims[0] - first);
      offsets[0] = first;
      memory src(plain_md.submemory_desc(slice, offsets), eng, plain_data);
      memory dst(packed_md.submemory_desc(slice, offsets), eng, packed.get_data_handle());
      dnnl::reorder(src, dst).execute(stream, src, dst);
      stream.wait();
      plain_pages.Consumed(static_cast<size_t>(first + slice[0]) * row_bytes);
    }
  }

  // The dim-0 block of the packed layout when both layouts can be reordered in dim-0 slices
  // (see ReorderPlain), else 0.
  static int64_t SlicableBlock(const memory::desc& plain, const memory::desc& packed) {
    const dnnl_memory_desc_t& p = plain.data;
    const dnnl_memory_desc_t& q = packed.data;
    if (p.format_kind != dnnl_blocked || q.format_kind != dnnl_blocked || q.extra.flags != 0 || p.ndims != q.ndims) {
      return 0;
    }
    if (p.format_desc.blocking.inner_nblks != 0) return 0;
    int64_t elements = 1;
    for (int d = 0; d < q.ndims; ++d) {
      if (q.padded_dims[d] != q.dims[d] || q.padded_offsets[d] != 0) return 0;
      elements *= q.dims[d];
    }
    int64_t block = 1;
    for (int i = 0; i < q.format_desc.blocking.inner_nblks; ++i) {
      if (q.format_desc.blocking.inner_idxs[i] == 0) block *= q.format_desc.blocking.inner_blks[i];
    }
    // Dim 0 outermost: one step of it spans everything else.
    if (p.format_desc.blocking.strides[0] * p.dims[0] != elements) return 0;
    if (q.format_desc.blocking.strides[0] * (q.dims[0] / block) != elements) return 0;
    return q.dims[0] % block == 0 ? block : 0;
  }

  // Few rows by large weights (ResNet's last stage at batch 1: 49 output pixels, 1-9 MiB of
  // weights) run on PanelGemm, which reads weights from DRAM at full speed where oneDNN stalls on
  // them (see panel_gemm.h): 0.43 against 0.52 ms for 2048x512 at 49 rows. On AVX-512, more rows
  // stay on oneDNN: for 1x1 kernels its matmul reads the panels' own bytes (PanelLayout); wider
  // kernels get a second copy in oneDNN's layout when a server sees both few and many rows
  // (owned_bytes() counts both). Run on panels at batch 8 instead, ResNet-50's 3x3 convolutions
  // took twice as long there. A kernel wider than 1x1 needs whole chunks of K per tap (input
  // channels a multiple of 128). On AVX2 alone every kernel wider than 1x1 runs on panels,
  // whatever its rows and weights: oneDNN 2.6 has only its older direct kernels there
  // (ResNet-18's 3x3 layers at batch 1 on AMD Zen 3: 1.7-3.0 ms each against ONNX Runtime's
  // 1.5-2.1), and they need input channels in multiples of 8 (PanelGemm::ChunkFor). 1x1 kernels
  // run there as on AVX-512, by few rows (up to 256 there) by large weights: ResNet-50's last
  // stage at batch 1 took 1.0 against 1.5-1.8 ms each on oneDNN's matmul, its strided
  // downsamples 1.8-2.0 against 3.3-3.5 ms. Other 1x1 kernels stay on oneDNN's 1x1
  // convolution, which ran MobileNetV2 and ResNet-50 at batch 8 as fast or faster.
  bool UsesPanelGemm(const Geometry& geo, bool with_sum) const {
    constexpr int64_t kMaxRows = 100, kMaxRowsAvx2 = 256, kMinWeightElements = int64_t{256} * 1024;
    const PanelGemm::Isa isa = PanelGemm::Best();
    if (!weights_constant_ || isa == PanelGemm::Isa::kNone || p_.attrs.transpose || p_.attrs.group != 1 ||
        geo.spatial != 2 || !p_.src_nhwc || !p_.dst_nhwc || (with_sum && !p_.addend_nhwc)) {
      return false;
    }
    const int64_t rows = geo.dst[0] * geo.dst[2] * geo.dst[3], taps = geo.weights[2] * geo.weights[3];
    const int64_t channels = geo.src[1], weights = geo.weights[0] * channels * taps;
    if (rows <= 0 || PanelGemm::ChunkFor(channels * taps, taps) == 0) return false;
    if (isa == PanelGemm::Isa::kAvx2) return taps > 1 || (rows <= kMaxRowsAvx2 && weights >= kMinWeightElements);
    return rows <= kMaxRows && weights >= kMinWeightElements && (taps == 1 || channels % PanelGemm::kMaxChunk == 0);
  }

  // On AVX2, the 3x3 convolutions of stride 1 that would run on panels run as WinogradConv, at
  // every input size (so that one copy of the weights serves every run). On AVX-512 they stay on
  // oneDNN's brgemm convolution or panels.
  bool UsesWinograd(const Geometry& geo, bool with_sum) const {
    if (PanelGemm::Best() != PanelGemm::Isa::kAvx2 || !UsesPanelGemm(geo, with_sum)) return false;
    for (size_t i = 0; i < 2; ++i) {
      if (geo.weights[2 + i] != 3 || geo.strides[i] != 1 || geo.dilations[i] != 0) return false;
    }
    return true;
  }

  static WinogradConv::Shape WinogradShape(const Geometry& geo) {
    return {geo.dst[0], geo.src[2], geo.src[3], geo.dst[2], geo.dst[3], geo.pad_l[0], geo.pad_l[1]};
  }

  // oneDNN's name for the panels' layout of [K, N] weights, as its matmul sees them: BA16a64b is
  // 64-column blocks of K rows in 16-row blocks, the same bytes when K is a multiple of 16 (else
  // oneDNN pads K, and no layout matches).
  static memory::desc PanelLayout(int64_t k, int64_t n) {
    if (k % 16 != 0) return memory::desc();
    return memory::desc({k, n}, memory::data_type::f32, Tag::BA16a64b);
  }

  // The constant weights packed for PanelGemm, on first use: from the graph's plain copy while
  // it is there (handing its pages back when allowed), else from a packed copy, unpacked first.
  // Caller holds mu_.
  Status PanelWeightsLocked(const Tensor& w) const {
    if (panel_) return Status::Ok();
    const int64_t m = w.dim(0), taps = w.dim(2) * w.dim(3), k = w.dim(1) * taps;
    if (taps == 1 && PanelGemm::Best() == PanelGemm::Isa::kAvx512) {
      for (const PackedCopy& copy : packed_) {
        if (copy.weights.get_desc() == PanelLayout(k, m)) {  // a matmul's copy: the panels' bytes
          panel_ = PanelGemm::Over(copy.storage, k, m);
          return Status::Ok();
        }
      }
    }
    std::vector<float> unpacked;
    MF_ASSIGN_OR_RETURN(const float* plain, PlainWeightsLocked(w, unpacked));
    std::unique_ptr<PanelGemm> panel = PanelGemm::Pack(plain, k, m, taps);
    if (!panel) return ResourceExhausted("Conv: out of memory packing the weights");
    if (packed_.empty() && !winograd_ && weights_consumable_) ReleaseResidentPages(w.raw_data(), w.byte_size());
    panel_ = std::move(panel);
    return Status::Ok();
  }

  // The constant weights transformed for WinogradConv, on first use, like PanelWeightsLocked.
  // Caller holds mu_.
  Status WinogradWeightsLocked(const Tensor& w) const {
    if (winograd_) return Status::Ok();
    std::vector<float> unpacked;
    MF_ASSIGN_OR_RETURN(const float* plain, PlainWeightsLocked(w, unpacked));
    std::unique_ptr<WinogradConv> winograd = WinogradConv::Pack(plain, w.dim(0), w.dim(1));
    if (!winograd) return ResourceExhausted("Conv: out of memory transforming the weights");
    if (packed_.empty() && !panel_ && weights_consumable_) ReleaseResidentPages(w.raw_data(), w.byte_size());
    winograd_ = std::move(winograd);
    return Status::Ok();
  }

  // The constant weights in the graph's plain [M, C, kh, kw] layout: the graph's copy while no
  // packing may have consumed it, else unpacked from a packed copy into `scratch`. Caller holds
  // mu_.
  StatusOr<const float*> PlainWeightsLocked(const Tensor& w, std::vector<float>& scratch) const {
    if (packed_.empty() && !panel_ && !winograd_) return w.data<float>();
    scratch.resize(static_cast<size_t>(w.num_elements()));
    if (panel_) {
      panel_->Unpack(scratch.data());
      return scratch.data();
    }
    if (packed_.empty()) {
      winograd_->Unpack(scratch.data());
      return scratch.data();
    }
    try {
      dnnl::engine& eng = CpuEngine();
      dnnl::stream stream(eng);
      memory first = packed_.front().weights;
      memory to(memory::desc({w.dim(0), w.dim(1), w.dim(2), w.dim(3)}, memory::data_type::f32, Tag::oihw), eng,
                scratch.data());
      dnnl::reorder(first, to).execute(stream, first, to);
      stream.wait();
    } catch (const dnnl::error& e) {
      return DnnlError(e, "Conv");
    }
    return scratch.data();
  }

  // The PanelGemm and WinogradConv paths of Run. `addend`, when set, is summed before the
  // activation; `donated` is its buffer when the plan handed it over, which then becomes the
  // output.
  Status RunOnPanels(const PreparedConv& prep, const Geometry& geo, const Tensor& x, const Tensor* b,
                     const Tensor* addend, Tensor donated, Tensor& out) const {
    const Shape out_shape(geo.dst.begin(), geo.dst.end());
    if (addend && donated.raw_data() != nullptr && donated.dtype() == DataType::kFloat32) {
      out = std::move(donated);  // holds the residual already
    } else {
      MF_ASSIGN_OR_RETURN(out, Tensor::AllocateUninitialized(DataType::kFloat32, out_shape));
      if (addend) std::memcpy(out.raw_data(), addend->raw_data(), addend->byte_size());
    }
    std::shared_ptr<const PanelGemm> panel;
    std::shared_ptr<const WinogradConv> winograd;
    {
      std::lock_guard<std::mutex> lock(mu_);
      panel = panel_;
      winograd = winograd_;
    }
    PanelGemm::Epilogue epilogue;
    epilogue.bias = b ? b->data<float>() : nullptr;
    epilogue.accumulate = addend != nullptr;
    epilogue.act = p_.act;
    if (prep.on_winograd) {
      winograd->Run(WinogradShape(geo), x.data<float>(), out.data<float>(), epilogue);
      return Status::Ok();
    }
    panel->Run(geo.dst[0] * geo.dst[2] * geo.dst[3], TapRows(geo, x.data<float>()), out.data<float>(), geo.dst[1],
               epilogue);
    return Status::Ok();
  }

  struct ConvPrimitive {
    dnnl::primitive prim;
    memory::desc src_md, weights_md, dst_md, scratch_md;
  };

  // A 1x1 convolution with no padding and one group, between channels-last activations (and
  // residual), is a product of [N*OH*OW, C] rows by [C, M] weights: over the same bytes with
  // stride 1; strided, over the input pixels the stride picks, gathered first into contiguous
  // rows (ResNet-50's stride-2 1024 -> 2048 at batch 8: 5.5 against 5.9 ms as a convolution,
  // the copy included). Where the weights outgrow a core's L2 (2 MiB), oneDNN's matmul runs it
  // about 10 % faster than its 1x1 convolution (ResNet-50's last stage, 512 <-> 2048 channels at
  // 7x7, batch 8: 2.8 against 3.15 ms); with smaller weights the two are even, or the
  // convolution is ahead (MobileNetV2). The bias, residual and activation run as the same
  // post-ops. nullopt when the convolution is not one of these, or oneDNN has only reference code
  // for the product.
  struct PointwiseMatMul {
    ConvPrimitive made;
    memory::desc bias_md, user_weights_md;
    bool gather = false;  // strided: the input pixels are gathered into rows first
  };
  std::optional<PointwiseMatMul> MakePointwiseMatMul(const Geometry& geo, bool has_bias, bool with_sum,
                                                     const dnnl::primitive_attr& attr) const {
    if (p_.attrs.transpose || p_.attrs.group != 1 || geo.spatial != 2 || !p_.src_nhwc || !p_.dst_nhwc ||
        (with_sum && !p_.addend_nhwc)) {
      return std::nullopt;
    }
    for (size_t i = 0; i < 2; ++i) {
      if (geo.weights[2 + i] != 1 || geo.pad_l[i] != 0 || geo.pad_r[i] != 0) return std::nullopt;
    }
    const int64_t rows = geo.dst[0] * geo.dst[2] * geo.dst[3], c = geo.src[1], m = geo.dst[1];
    constexpr int64_t kMinWeightElements = int64_t{512} * 1024;
    if (rows == 0 || c * m < kMinWeightElements) return std::nullopt;
    dnnl::engine& eng = CpuEngine();
    const auto f32 = memory::data_type::f32;
    PointwiseMatMul mm;
    mm.gather = geo.strides[0] != 1 || geo.strides[1] != 1;
    memory::desc src({rows, c}, f32, Tag::ab), dst({rows, m}, f32, Tag::ab), any_w({c, m}, f32, Tag::any);
    if (has_bias) mm.bias_md = memory::desc({1, m}, f32, Tag::ab);
    // ONNX's [M, C, 1, 1] weights read as [C, M]: column-major.
    mm.user_weights_md = memory::desc({c, m}, f32, Tag::ba);
    try {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, any_w, mm.bias_md, dst), attr, eng);
      if (std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return std::nullopt;
      mm.made =
          ConvPrimitive{dnnl::primitive(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.scratchpad_desc()};
    } catch (const dnnl::error&) {
      return std::nullopt;
    }
    return mm;
  }

  // The (de)convolution primitive for the given src/dst layouts (either may be format any).
  // With `fail_on_reference`, nullopt when oneDNN would run it only with its reference code or
  // cannot run it in these layouts at all; other errors throw.
  std::optional<ConvPrimitive> MakePrimitive(const Geometry& geo, const memory::desc& src, const memory::desc& dst,
                                             const memory::desc& bias, const dnnl::primitive_attr& attr,
                                             bool fail_on_reference) const {
    dnnl::engine& eng = CpuEngine();
    memory::desc any_w(geo.weights, memory::data_type::f32, Tag::any);
    // The implementation is known from the descriptor: no JIT compile for a rejected one.
    auto finish = [&](const auto& pd) -> std::optional<ConvPrimitive> {
      if (fail_on_reference && std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return std::nullopt;
      return ConvPrimitive{dnnl::primitive(pd), pd.src_desc(), pd.weights_desc(), pd.dst_desc(), pd.scratchpad_desc()};
    };
    try {
      if (p_.attrs.transpose) {
        dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                                            src, any_w, bias, dst, geo.strides, geo.dilations, geo.pad_l, geo.pad_r);
        dnnl::deconvolution_forward::primitive_desc pd(d, attr, eng);
        return finish(pd);
      }
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
                                        any_w, bias, dst, geo.strides, geo.dilations, geo.pad_l, geo.pad_r);
      dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
      return finish(pd);
    } catch (const dnnl::error& e) {
      if (fail_on_reference && e.status == dnnl_unimplemented) return std::nullopt;
      throw;
    }
  }

  static constexpr size_t kMaxCachedShapes = 32;
  ConvParams p_;
  const bool weights_constant_;
  const bool weights_consumable_;
  mutable std::mutex mu_;
  mutable bool weights_lost_ = false;  // guarded by mu_
  mutable std::map<Shape, std::shared_ptr<const PreparedConv>> cache_;
  // The constant weights, one copy per layout a primitive asked for; never cleared with
  // cache_ (after the plain copy is dropped, they are the weights).
  struct PackedCopy {
    memory weights;
    std::shared_ptr<void> storage;  // what `weights` points into
  };
  mutable std::vector<PackedCopy> packed_;
  mutable std::shared_ptr<const PanelGemm> panel_;        // the constant weights packed for PanelGemm
  mutable std::shared_ptr<const WinogradConv> winograd_;  // and transformed for WinogradConv
};

StatusOr<BoundKernel> ConvFactory(const KernelInit& init, bool transpose) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  MF_RETURN_IF_ERROR(RequireFloat(init, 1));
  if (init.has_input(2)) MF_RETURN_IF_ERROR(RequireFloat(init, 2));
  ConvParams p;
  MF_ASSIGN_OR_RETURN(p.attrs, ops::ReadConvAttributes(init, transpose));
  MF_ASSIGN_OR_RETURN(Activation kind, ActivationFromName(init.node.fused_activation));
  p.act = {kind, init.node.fused_alpha, init.node.fused_beta};
  p.fused_sum = init.node.fused_sum;
  p.src_nhwc = init.input_is_nhwc(0);
  p.addend_nhwc = init.input_is_nhwc(3);
  p.dst_nhwc = init.output_nhwc;
  MF_RETURN_IF_ERROR(ops::CheckConvFusedSum(init, transpose));
  if (p.fused_sum) MF_RETURN_IF_ERROR(RequireFloat(init, 3));
  const bool weights_constant = init.constant_inputs.size() > 1 && init.constant_inputs[1] != nullptr;
  return BoundKernel{
      std::make_unique<ConvKernel>(std::move(p), weights_constant, weights_constant && init.consumable(1)),
      {DataType::kFloat32}};
}

}  // namespace

void RegisterConvKernels(KernelRegistry* r) {
  r->Register({"Conv", 1, [](const KernelInit& i) { return ConvFactory(i, false); }, "float"});
  r->Register({"ConvTranspose", 1, [](const KernelInit& i) { return ConvFactory(i, true); }, "float"});
}

}  // namespace mf::runtime::cpu
