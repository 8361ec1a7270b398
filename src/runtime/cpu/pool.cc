// MaxPool, AveragePool and their global forms, in plain loops over (N*C) planes. 1-D and 2-D
// pools are run as 3-D pools with leading unit dims so one implementation covers all ranks.
#include <cmath>
#include <limits>

#include "runtime/cpu/cpu_common.h"
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
              if (p.attrs.count_include_pad) count = ops::PoolPaddedSpan(d0, D) * ops::PoolPaddedSpan(h0, H) * ops::PoolPaddedSpan(w0, W);
              acc = count > 0 ? acc / static_cast<float>(count) : 0.f;
            }
            dst[(od * H.out + oh) * W.out + ow] = acc;
          }
    }
  });
  return Status::Ok();
}

StatusOr<BoundKernel> PoolFactory(const KernelInit& init, bool is_max) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  if (init.node.outputs.size() > 1 && init.node.outputs[1] != kNoValue) {
    return init.Error(StatusCode::kUnimplemented, "the Indices output of MaxPool is not supported");
  }
  PoolParams p;
  p.is_max = is_max;
  MF_ASSIGN_OR_RETURN(p.attrs, ops::ReadPoolAttributes(init));
  std::vector<DataType> outs(init.node.outputs.size(), DataType::kInt64);
  outs[0] = DataType::kFloat32;
  return Bind([p](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return RunPool(p, *in[0], out[0]); },
              outs);
}

// Channels-last input (a 4-D tensor stored NHWC, see Value::nhwc): average over H*W per
// (n, c) reading rows of C contiguous channels.
Status GlobalAveragePoolNhwc(const Tensor& x, Tensor& out) {
  if (x.rank() != 4) return Internal("channels-last GlobalAveragePool needs a 4-D input");
  int64_t n = x.dim(0), c = x.dim(1), hw = x.dim(2) * x.dim(3);
  MF_ASSIGN_OR_RETURN(out, Tensor::Allocate(DataType::kFloat32, {n, c, 1, 1}));
  const float* px = x.data<float>();
  float* po = out.data<float>();
  ParallelFor(n, 1, [&](int64_t b, int64_t e) {
    std::vector<double> acc(static_cast<size_t>(c));
    for (int64_t i = b; i < e; ++i) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t p = 0; p < hw; ++p) {
        const float* row = px + (i * hw + p) * c;
        for (int64_t ch = 0; ch < c; ++ch) acc[static_cast<size_t>(ch)] += row[ch];
      }
      for (int64_t ch = 0; ch < c; ++ch) po[i * c + ch] = hw ? static_cast<float>(acc[static_cast<size_t>(ch)] / static_cast<double>(hw)) : 0.f;
    }
  });
  return Status::Ok();
}

StatusOr<BoundKernel> GlobalPoolFactory(const KernelInit& init, bool is_max) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  if (!init.input_nhwc.empty() && init.input_nhwc[0]) {
    if (is_max) return init.Error(StatusCode::kInternal, "GlobalMaxPool does not take channels-last input");
    return Bind([](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) { return GlobalAveragePoolNhwc(*in[0], out[0]); },
                {DataType::kFloat32});
  }
  return Bind(
      [is_max](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(Shape shape, ops::GlobalPoolShape(x.shape()));
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, shape));
        int64_t planes = x.dim(0) * x.dim(1);
        int64_t size = planes == 0 ? 0 : x.num_elements() / planes;
        const float* px = x.data<float>();
        float* po = out[0].data<float>();
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
      },
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
