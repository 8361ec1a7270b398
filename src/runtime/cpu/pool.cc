// MaxPool, AveragePool and their global forms. NCHW tensors: plain loops over (N*C) planes, 1-D
// and 2-D pools run as 3-D pools with leading unit dims so one implementation covers all ranks.
// Channels-last 2-D tensors (Value::nhwc): oneDNN's pooling primitive in NHWC (MaxPool on CPUs
// without AVX-512: our own loop), so a conv -> pool -> conv chain never goes back to NCHW.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "runtime/cpu/cpu_common.h"
#include "runtime/cpu/dnnl_engine.h"
#include "runtime/cpu/panel_gemm.h"
#include "runtime/ops/pool_geometry.h"

namespace mf::runtime::cpu {
namespace {

// The attributes and which pool it is.
struct PoolParams {
  bool is_max = true;
  ops::PoolAttributes attrs;
};

Status RunPool(const PoolParams& p, const Tensor& x, Tensor& out) {
  MF_ASSIGN_OR_RETURN(auto dims, ops::PoolGeometry(p.attrs, x.shape()));
  Shape out_shape = ops::PoolOutputShape(x.shape(), dims);
  MF_ASSIGN_OR_RETURN(out, Tensor::AllocateUninitialized(DataType::kFloat32, out_shape));
  const ops::PoolDim &D = dims[0], &H = dims[1], &W = dims[2];
  int64_t planes = x.dim(0) * x.dim(1);
  int64_t in_plane = D.in * H.in * W.in, out_plane = D.out * H.out * W.out;
  const float* px = x.data<float>();
  float* po = out.data<float>();
  ParallelFor(planes, 1, [&](int64_t pb, int64_t pe) {
    for (int64_t plane = pb; plane < pe; ++plane) {
      const float* src = px + plane * in_plane;
      float* dst = po + plane * out_plane;
      for (int64_t od = 0; od < D.out; ++od)
        for (int64_t oh = 0; oh < H.out; ++oh)
          for (int64_t ow = 0; ow < W.out; ++ow) {
            int64_t d0 = od * D.s - D.pb, h0 = oh * H.s - H.pb, w0 = ow * W.s - W.pb;
            float acc = p.is_max ? -std::numeric_limits<float>::infinity() : 0.f;
            int64_t valid = 0;
            for (int64_t kd = 0; kd < D.k; ++kd) {
              int64_t id = d0 + kd * D.d;
              if (id < 0 || id >= D.in) continue;
              for (int64_t kh = 0; kh < H.k; ++kh) {
                int64_t ih = h0 + kh * H.d;
                if (ih < 0 || ih >= H.in) continue;
                const float* row = src + (id * H.in + ih) * W.in;
                for (int64_t kw = 0; kw < W.k; ++kw) {
                  int64_t iw = w0 + kw * W.d;
                  if (iw < 0 || iw >= W.in) continue;
                  float v = row[iw];
                  if (p.is_max) {
                    acc = v > acc || std::isnan(v) ? v : acc;
                  } else {
                    acc += v;
                  }
                  ++valid;
                }
              }
            }
            if (!p.is_max) {
              int64_t count = valid;
              if (p.attrs.count_include_pad)
                count = ops::PoolPaddedSpan(d0, D) * ops::PoolPaddedSpan(h0, H) * ops::PoolPaddedSpan(w0, W);
              acc = count > 0 ? acc / static_cast<float>(count) : 0.f;
            }
            dst[(od * H.out + oh) * W.out + ow] = acc;
          }
    }
  });
  return Status::Ok();
}

// GlobalMaxPool / GlobalAveragePool over NCHW planes (averages summed in double).
Status RunGlobalPool(bool is_max, const Tensor& x, Tensor& out) {
  MF_ASSIGN_OR_RETURN(Shape shape, ops::GlobalPoolShape(x.shape()));
  MF_ASSIGN_OR_RETURN(out, Tensor::AllocateUninitialized(DataType::kFloat32, shape));
  int64_t planes = x.dim(0) * x.dim(1);
  int64_t size = planes == 0 ? 0 : x.num_elements() / planes;
  const float* px = x.data<float>();
  float* po = out.data<float>();
  ParallelFor(planes, 16, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) {
      const float* s = px + p * size;
      if (is_max) {
        float m = -std::numeric_limits<float>::infinity();
        for (int64_t i = 0; i < size; ++i) m = std::max(m, s[i]);
        po[p] = m;
      } else {
        double acc = 0;
        for (int64_t i = 0; i < size; ++i) acc += s[i];
        po[p] = size ? static_cast<float>(acc / static_cast<double>(size)) : 0.f;
      }
    }
  });
  return Status::Ok();
}

using dnnl::memory;

// oneDNN's padding_r for `d`: the end padding that makes oneDNN's floor-mode output size equal
// ours. Larger than d.pe when ceil_mode adds a partial last window; clamped at 0 where the floor
// leaves trailing input unread.
int64_t DnnlEndPad(const ops::PoolDim& d) {
  return std::max<int64_t>(0, (d.out - 1) * d.s + (d.k - 1) * d.d + 1 - d.in - d.pb);
}

// Whether oneDNN's pooling computes exactly the ONNX result for these (H, W) dims. Max pooling
// ignores padding, so any geometry works. Average pooling without padding counted divides by
// the taps inside the input, as ONNX does (dilated average windows are left to our loops);
// with count_include_pad oneDNN divides by the whole kernel, which is ONNX's divisor unless a
// ceil-mode window hangs past the end padding. (One difference is accepted: a NaN in a max
// window need not win in oneDNN's max as it does in our loops.)
bool DnnlPoolIsExact(bool is_max, const ops::PoolAttributes& attrs, const ops::PoolDim& h, const ops::PoolDim& w) {
  for (const ops::PoolDim* d : {&h, &w}) {
    int64_t extent = (d->k - 1) * d->d + 1;
    // Padding as wide as the window allows windows wholly in padding: left to our loops.
    if (d->pb >= extent || DnnlEndPad(*d) >= extent) return false;
    if (is_max) continue;
    if (d->d != 1) return false;
    if (attrs.count_include_pad && DnnlEndPad(*d) > d->pe) return false;
  }
  return true;
}

// One output pixel of a channels-last MaxPool: the channel-wise max of its window's pixels
// `taps` (at least one), eight channels at a time in AVX2 registers.
__attribute__((target("avx2"))) void MaxOfPixels(float* out, const float* const* taps, size_t count, int64_t c) {
  int64_t i = 0;
  for (; i + 8 <= c; i += 8) {
    __m256 m = _mm256_loadu_ps(taps[0] + i);
    for (size_t t = 1; t < count; ++t) m = _mm256_max_ps(m, _mm256_loadu_ps(taps[t] + i));
    _mm256_storeu_ps(out + i, m);
  }
  for (; i < c; ++i) {
    float m = taps[0][i];
    for (size_t t = 1; t < count; ++t) m = std::max(m, taps[t][i]);
    out[i] = m;
  }
}

// MaxPool between channels-last tensors: each output pixel is the channel-wise max of its
// window's pixels inside the input (DnnlPoolIsExact: every window has one).
void ChannelsLastMaxPool(const float* x, float* y, int64_t batch, int64_t c, const ops::PoolDim& h,
                         const ops::PoolDim& w) {
  ParallelFor(batch * h.out, 4, [&](int64_t begin, int64_t end) {
    std::vector<const float*> taps;
    taps.reserve(static_cast<size_t>(h.k * w.k));
    for (int64_t row = begin; row < end; ++row) {
      const int64_t n = row / h.out, oy = row % h.out;
      for (int64_t ox = 0; ox < w.out; ++ox) {
        taps.clear();
        for (int64_t ky = 0; ky < h.k; ++ky) {
          const int64_t iy = oy * h.s - h.pb + ky * h.d;
          if (iy < 0 || iy >= h.in) continue;
          for (int64_t kx = 0; kx < w.k; ++kx) {
            const int64_t ix = ox * w.s - w.pb + kx * w.d;
            if (ix >= 0 && ix < w.in) taps.push_back(x + ((n * h.in + iy) * w.in + ix) * c);
          }
        }
        MaxOfPixels(y + (row * w.out + ox) * c, taps.data(), taps.size(), c);
      }
    }
  });
}

// A 2-D pool whose input and/or output is channels-last. It runs in NHWC; a plain NCHW side
// is reordered (in conv chains the pass marks both sides, so that is rare). Geometries oneDNN
// cannot compute exactly run our NCHW loops between reorders. One setup per input shape,
// cached.
class ChannelsLastPoolKernel final : public Kernel {
 public:
  ChannelsLastPoolKernel(PoolParams p, bool global, bool src_nhwc, bool dst_nhwc)
      : p_(std::move(p)), global_(global), src_nhwc_(src_nhwc), dst_nhwc_(dst_nhwc) {}

  Status Run(const std::vector<const Tensor*>& in, std::vector<Tensor>& out) const override {
    const Tensor& x = *in[0];
    if (x.rank() != 4)
      return InvalidArgument("a channels-last pool needs a 4-D input, got " + ShapeToString(x.shape()));
    MF_ASSIGN_OR_RETURN(std::shared_ptr<const Prepared> prep, Prepare(x.shape()));
    if (prep->channels_last_max) {
      MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, prep->out_shape));
      ChannelsLastMaxPool(x.data<float>(), out[0].data<float>(), x.dim(0), x.dim(1), prep->h, prep->w);
      return Status::Ok();
    }
    if (!prep->pool) return RunWithLoops(*prep, x, out[0]);
    MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, prep->out_shape));
    try {
      dnnl::engine& eng = CpuEngine();
      dnnl::stream& stream = ThreadStream();
      memory user_src(prep->user_src_md, eng, const_cast<void*>(x.raw_data()));
      memory user_dst(prep->user_dst_md, eng, out[0].raw_data());
      memory src = user_src, dst = user_dst;
      Tensor src_buffer, dst_buffer;
      if (prep->user_src_md != prep->src_md) {
        MF_ASSIGN_OR_RETURN(src, TemporaryMemory(prep->src_md, &src_buffer));
        dnnl::reorder(user_src, src).execute(stream, user_src, src);
      }
      if (prep->user_dst_md != prep->dst_md) {
        MF_ASSIGN_OR_RETURN(dst, TemporaryMemory(prep->dst_md, &dst_buffer));
      }
      memory scratch_mem(prep->scratch_md, eng, ThreadScratchpad(prep->scratch_md.get_size()));
      Execute(*prep->pool, {{DNNL_ARG_SRC, &src}, {DNNL_ARG_DST, &dst}, {DNNL_ARG_SCRATCHPAD, &scratch_mem}});
      if (prep->user_dst_md != prep->dst_md) dnnl::reorder(dst, user_dst).execute(stream, dst, user_dst);
      stream.wait();
    } catch (const dnnl::error& e) {
      return DnnlError(e, "pooling");
    }
    return Status::Ok();
  }

 private:
  struct Prepared {
    Shape out_shape;
    // The tensors' own layouts, the layouts the primitive runs in, and NCHW for our loops.
    memory::desc user_src_md, user_dst_md, src_md, dst_md, plain_src_md, plain_dst_md, scratch_md;
    std::optional<dnnl::pooling_v2_forward> pool;  // unset: our loops
    // Our channels-last MaxPool, in place of oneDNN's: on CPUs with AVX2 but not AVX-512,
    // oneDNN 2.6's pooling took 0.7-0.9 ms for ResNet's stem MaxPool at batch 1 on AMD Zen 3,
    // against ONNX Runtime's 0.21-0.26 (on AVX-512 it is the faster one).
    bool channels_last_max = false;
    ops::PoolDim h, w;
  };

  // The NCHW loops between reorders, for what oneDNN cannot compute exactly.
  Status RunWithLoops(const Prepared& prep, const Tensor& x, Tensor& out) const {
    try {
      dnnl::engine& eng = CpuEngine();
      dnnl::stream stream(eng);
      Tensor plain_x, plain_out;
      const Tensor* src = &x;
      if (src_nhwc_) {
        MF_ASSIGN_OR_RETURN(plain_x, Tensor::AllocateUninitialized(DataType::kFloat32, x.shape()));
        memory from(prep.user_src_md, eng, const_cast<void*>(x.raw_data())),
            to(prep.plain_src_md, eng, plain_x.raw_data());
        dnnl::reorder(from, to).execute(stream, from, to);
        stream.wait();
        src = &plain_x;
      }
      if (global_) {
        MF_RETURN_IF_ERROR(RunGlobalPool(p_.is_max, *src, plain_out));
      } else {
        MF_RETURN_IF_ERROR(RunPool(p_, *src, plain_out));
      }
      if (!dst_nhwc_) {
        out = std::move(plain_out);
        return Status::Ok();
      }
      MF_ASSIGN_OR_RETURN(out, Tensor::AllocateUninitialized(DataType::kFloat32, prep.out_shape));
      memory from(prep.plain_dst_md, eng, plain_out.raw_data()), to(prep.user_dst_md, eng, out.raw_data());
      dnnl::reorder(from, to).execute(stream, from, to);
      stream.wait();
    } catch (const dnnl::error& e) {
      return DnnlError(e, "pooling");
    }
    return Status::Ok();
  }

  StatusOr<std::shared_ptr<const Prepared>> Prepare(const Shape& x) const {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cache_.find(x);
      if (it != cache_.end()) return it->second;
    }
    std::array<ops::PoolDim, 3> dims;
    if (global_) {
      for (size_t i = 1; i < 3; ++i) dims[i] = ops::PoolDim{x[i + 1], 1, x[i + 1], 1, 1, 0, 0};
    } else {
      MF_ASSIGN_OR_RETURN(dims, ops::PoolGeometry(p_.attrs, x));
    }
    const ops::PoolDim &h = dims[1], &w = dims[2];
    auto prep = std::make_shared<Prepared>();
    prep->out_shape = {x[0], x[1], h.out, w.out};
    memory::dims src_dims(x.begin(), x.end()), dst_dims(prep->out_shape.begin(), prep->out_shape.end());
    using Tag = memory::format_tag;
    auto md = [](const memory::dims& d, Tag tag) { return memory::desc(d, memory::data_type::f32, tag); };
    prep->plain_src_md = md(src_dims, Tag::nchw);
    prep->plain_dst_md = md(dst_dims, Tag::nchw);
    prep->user_src_md = src_nhwc_ ? md(src_dims, Tag::nhwc) : prep->plain_src_md;
    prep->user_dst_md = dst_nhwc_ ? md(dst_dims, Tag::nhwc) : prep->plain_dst_md;
    prep->src_md = md(src_dims, Tag::nhwc);
    prep->dst_md = md(dst_dims, Tag::nhwc);
    // A [N, C, 1, 1] result has the same bytes in NHWC and NCHW: a global pool writes its
    // NCHW output directly.
    if (global_) prep->user_dst_md = prep->dst_md;
    // Empty tensors and empty windows (a global pool over 0 x 0) are our loops' business.
    bool empty = x[0] == 0 || x[1] == 0 || x[2] == 0 || x[3] == 0 || h.out <= 0 || w.out <= 0;
    prep->h = h;
    prep->w = w;
    const bool avx2_only = PanelGemm::Best() == PanelGemm::Isa::kAvx2;  // one source for the CPU's kind
    prep->channels_last_max = avx2_only && p_.is_max && !global_ && src_nhwc_ && dst_nhwc_ && !empty &&
                              DnnlPoolIsExact(p_.is_max, p_.attrs, h, w);
    if (!prep->channels_last_max && !empty && DnnlPoolIsExact(p_.is_max, p_.attrs, h, w)) {
      try {
        dnnl::algorithm alg = p_.is_max                    ? dnnl::algorithm::pooling_max
                              : p_.attrs.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                                           : dnnl::algorithm::pooling_avg_exclude_padding;
        dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, prep->src_md, prep->dst_md,
                                         {h.s, w.s}, {h.k, w.k}, {h.d - 1, w.d - 1}, {h.pb, w.pb},
                                         {DnnlEndPad(h), DnnlEndPad(w)});
        dnnl::primitive_attr attr;
        attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
        dnnl::pooling_v2_forward::primitive_desc pd(d, attr, CpuEngine());
        prep->scratch_md = pd.scratchpad_desc();
        prep->pool = dnnl::pooling_v2_forward(pd);
      } catch (const dnnl::error& e) {
        // Refused geometry: our loops then; anything else is a real failure.
        if (e.status != dnnl_unimplemented && e.status != dnnl_invalid_arguments) return DnnlError(e, "pooling");
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    // Bounded: a client sending ever-new shapes must not grow memory without limit.
    if (cache_.size() >= kMaxCachedShapes) cache_.clear();
    cache_[x] = prep;
    return std::shared_ptr<const Prepared>(prep);
  }

  static constexpr size_t kMaxCachedShapes = 32;
  PoolParams p_;
  bool global_, src_nhwc_, dst_nhwc_;
  mutable std::mutex mu_;
  mutable std::map<Shape, std::shared_ptr<const Prepared>> cache_;
};

StatusOr<BoundKernel> PoolFactory(const KernelInit& init, bool is_max) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  PoolParams p;
  p.is_max = is_max;
  MF_ASSIGN_OR_RETURN(p.attrs, ops::ReadPoolAttributes(init));
  if (init.input_is_nhwc(0) || init.output_nhwc) {
    if (p.attrs.kernel.size() != 2) return init.Error(StatusCode::kInternal, "channels-last pooling must be 2-D");
    return BoundKernel{
        std::make_unique<ChannelsLastPoolKernel>(std::move(p), false, init.input_is_nhwc(0), init.output_nhwc),
        {DataType::kFloat32}};
  }
  std::vector<DataType> outs(init.node.outputs.size(), DataType::kInt64);
  outs[0] = DataType::kFloat32;
  return Bind(
      [p](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return RunPool(p, *in[0], out[0]); }, outs);
}

StatusOr<BoundKernel> GlobalPoolFactory(const KernelInit& init, bool is_max) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  if (init.input_is_nhwc(0)) {
    PoolParams p;
    p.is_max = is_max;
    return BoundKernel{std::make_unique<ChannelsLastPoolKernel>(std::move(p), true, true, false), {DataType::kFloat32}};
  }
  return Bind([is_max](const std::vector<const Tensor*>& in,
                       std::vector<Tensor>& out) { return RunGlobalPool(is_max, *in[0], out[0]); },
              {DataType::kFloat32});
}

}  // namespace

void RegisterPoolKernels(KernelRegistry* r) {
  r->Register({"MaxPool", 1, [](const KernelInit& i) { return PoolFactory(i, true); }, "float"});
  // AveragePool 7 added count_include_pad; 10 added ceil_mode (defaults keep 7's behaviour).
  r->Register({"AveragePool", 1, [](const KernelInit& i) { return PoolFactory(i, false); }, "float"});
  r->Register({"GlobalAveragePool", 1, [](const KernelInit& i) { return GlobalPoolFactory(i, false); }, "float"});
  r->Register({"GlobalMaxPool", 1, [](const KernelInit& i) { return GlobalPoolFactory(i, true); }, "float"});
}

}  // namespace mf::runtime::cpu
