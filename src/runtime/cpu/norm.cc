// Normalisations: BatchNormalization (inference form), LayerNormalization, Softmax, LogSoftmax.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "runtime/cpu/activation.h"
#include "runtime/cpu/cpu_common.h"
#include "runtime/ops/norm_rules.h"
#include "runtime/ops/softmax_rules.h"

namespace mf::runtime::cpu {
namespace {

StatusOr<BoundKernel> BatchNormFactory(const KernelInit& init) {
  for (size_t i = 0; i < 5; ++i) MF_RETURN_IF_ERROR(RequireFloat(init, i));
  MF_ASSIGN_OR_RETURN(float eps, ops::ReadBatchNormEpsilon(init));
  std::vector<DataType> outs(init.node.outputs.size(), DataType::kFloat32);
  return Bind(
      [eps](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        const Tensor* const params[4] = {in[1], in[2], in[3], in[4]};
        MF_ASSIGN_OR_RETURN(ops::BatchNormShape bn, ops::CheckBatchNorm(x, params));
        int64_t n = bn.n, c = bn.c, inner = bn.inner;
        std::vector<float> scale(static_cast<size_t>(c)), shift(static_cast<size_t>(c));
        for (int64_t ch = 0; ch < c; ++ch) {
          float s = in[1]->data<float>()[ch] / std::sqrt(in[4]->data<float>()[ch] + eps);
          scale[static_cast<size_t>(ch)] = s;
          shift[static_cast<size_t>(ch)] = in[2]->data<float>()[ch] - in[3]->data<float>()[ch] * s;
        }
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, x.shape()));
        const float* px = x.data<float>();
        float* po = out[0].data<float>();
        ParallelFor(n * c, std::max<int64_t>(1, 4096 / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
          for (int64_t p = b; p < e; ++p) {
            float s = scale[static_cast<size_t>(p % c)], t = shift[static_cast<size_t>(p % c)];
            for (int64_t i = 0; i < inner; ++i) po[p * inner + i] = px[p * inner + i] * s + t;
          }
        });
        return Status::Ok();
      },
      outs);
}

// One row of LayerNormalization: the mean, the variance about it (two passes: the one-pass form
// loses precision), then the scaled and shifted values; returns (mean, 1 / stddev). Vectorized,
// and compiled for AVX-512 and AVX2 as well.
MF_CPU_CLONES std::pair<float, float> LayerNormRow(const float* s, float* d, int64_t cols, const float* scale,
                                                   const float* bias, float epsilon) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < cols; ++i) sum += s[i];
  const float mean = sum / static_cast<float>(cols);
  float var = 0.f;
#pragma omp simd reduction(+ : var)
  for (int64_t i = 0; i < cols; ++i) var += (s[i] - mean) * (s[i] - mean);
  const float inv = 1.f / std::sqrt(var / static_cast<float>(cols) + epsilon);
#pragma omp simd
  for (int64_t i = 0; i < cols; ++i) d[i] = (s[i] - mean) * inv * scale[i] + bias[i];
  return {mean, inv};
}

StatusOr<BoundKernel> LayerNormFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  MF_RETURN_IF_ERROR(RequireFloat(init, 1));
  if (init.has_input(2)) MF_RETURN_IF_ERROR(RequireFloat(init, 2));
  MF_ASSIGN_OR_RETURN(ops::LayerNormAttributes attrs, ops::ReadLayerNormAttributes(init));
  std::vector<DataType> outs(init.node.outputs.size(), DataType::kFloat32);
  return Bind(
      [attrs](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(ops::LayerNormPlan plan, ops::PlanLayerNorm(x.shape(), attrs.axis));
        int64_t rows = plan.rows, cols = plan.cols;
        const Shape& norm_shape = plan.norm_shape;
        // Scale and bias broadcast over the normalised dims ([cols] in the common case).
        auto expand = [&](const Tensor* t, std::vector<float>* v) -> Status {
          v->assign(static_cast<size_t>(cols), 0.f);
          if (!t) return Status::Ok();
          MF_RETURN_IF_ERROR(ops::CheckLayerNormParameter(t->shape(), norm_shape));
          std::vector<int64_t> st = BroadcastStrides(t->shape(), norm_shape);
          for (int64_t i = 0; i < cols; ++i) {
            int64_t rem = i, off = 0;
            for (size_t d = norm_shape.size(); d-- > 0;) {
              off += (rem % norm_shape[d]) * st[d];
              rem /= norm_shape[d];
            }
            (*v)[static_cast<size_t>(i)] = t->data<float>()[off];
          }
          return Status::Ok();
        };
        std::vector<float> scale, bias;
        MF_RETURN_IF_ERROR(expand(in[1], &scale));
        MF_RETURN_IF_ERROR(expand(in.size() > 2 ? in[2] : nullptr, &bias));
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, x.shape()));
        const Shape& stat_shape = plan.stat_shape;
        float* mean_out = nullptr;
        float* inv_out = nullptr;
        if (out.size() > 1) {
          MF_ASSIGN_OR_RETURN(out[1], Tensor::AllocateUninitialized(DataType::kFloat32, stat_shape));
          mean_out = out[1].data<float>();
        }
        if (out.size() > 2) {
          MF_ASSIGN_OR_RETURN(out[2], Tensor::AllocateUninitialized(DataType::kFloat32, stat_shape));
          inv_out = out[2].data<float>();
        }
        const float* px = x.data<float>();
        float* po = out[0].data<float>();
        // Rows of a few hundred values (a transformer's hidden size) are microseconds each: a
        // thread team only for many of them.
        ParallelFor(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) {
            const auto [mean, inv] =
                LayerNormRow(px + r * cols, po + r * cols, cols, scale.data(), bias.data(), attrs.epsilon);
            if (mean_out) mean_out[r] = mean;
            if (inv_out) inv_out[r] = inv;
          }
        });
        return Status::Ok();
      },
      outs);
}

// The max and the sum of a row, kept in 16 lanes spelled out: GCC vectorizes these loops in
// every clone below, where an `omp simd` max reduction stayed a scalar vmaxss loop in the AVX2
// clone (a row of 32 attention scores took as long to scan for its max as to exponentiate).
// std::max(lane, x) is maxps(x, lane) to the bit, NaN included.
constexpr int64_t kLanes = 16;

inline __attribute__((always_inline)) float RowMax(const float* s, int64_t len) {
  float lanes[kLanes];
  std::fill(lanes, lanes + kLanes, -std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + kLanes <= len; j += kLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] = std::max(lanes[l], s[j + l]);
  }
  float mx = -std::numeric_limits<float>::infinity();
  for (; j < len; ++j) mx = std::max(mx, s[j]);
  for (int64_t l = 0; l < kLanes; ++l) mx = std::max(mx, lanes[l]);
  return mx;
}

inline __attribute__((always_inline)) float RowSum(const float* s, int64_t len) {
  float lanes[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= len; j += kLanes) {
#pragma omp simd
    for (int64_t l = 0; l < kLanes; ++l) lanes[l] += s[j + l];
  }
  float sum = 0.f;
  for (; j < len; ++j) sum += s[j];
  for (int64_t l = 0; l < kLanes; ++l) sum += lanes[l];
  return sum;
}

// Softmax (or LogSoftmax) of one contiguous row, the common case (the last axis): max, exp and
// sum are each one vectorized loop, compiled for AVX-512 and AVX2 as well (the CPU picks one).
// LogSoftmax's exponentials go through `d`, which its last loop overwrites.
MF_CPU_CLONES void SoftmaxRow(const float* s, float* d, int64_t len, bool log) {
  const float mx = RowMax(s, len);
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) d[j] = Exp(s[j] - mx);
  const float sum = RowSum(d, len);
  if (log) {
    const float lse = mx + std::log(sum);
#pragma omp simd
    for (int64_t j = 0; j < len; ++j) d[j] = s[j] - lse;
    return;
  }
  const float inv = 1.f / sum;
#pragma omp simd
  for (int64_t j = 0; j < len; ++j) d[j] *= inv;
}

// Softmax and LogSoftmax: for each (outer, inner) pair, normalise `len` elements spaced `inner`
// apart (ops::PlanSoftmax).
StatusOr<BoundKernel> SoftmaxFactory(const KernelInit& init, bool log) {
  MF_RETURN_IF_ERROR(RequireFloat(init, 0));
  MF_ASSIGN_OR_RETURN(ops::SoftmaxAttributes attrs, ops::ReadSoftmaxAttributes(init));
  return Bind(
      [attrs, log](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(ops::SoftmaxRows rows, ops::PlanSoftmax(attrs, x.shape()));
        const int64_t outer = rows.outer, len = rows.len, inner = rows.inner;
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kFloat32, x.shape()));
        const float* px = x.data<float>();
        float* po = out[0].data<float>();
        if (inner == 1) {
          ParallelFor(outer, std::max<int64_t>(1, 4096 / std::max<int64_t>(len, 1)), [&](int64_t b, int64_t e) {
            for (int64_t o = b; o < e; ++o) SoftmaxRow(px + o * len, po + o * len, len, log);
          });
          return Status::Ok();
        }
        ParallelFor(outer * inner, 16, [&](int64_t b, int64_t e) {
          for (int64_t oi = b; oi < e; ++oi) {
            int64_t o = oi / inner, i = oi % inner;
            const float* s = px + o * len * inner + i;
            float* d = po + o * len * inner + i;
            float mx = -std::numeric_limits<float>::infinity();
            for (int64_t j = 0; j < len; ++j) mx = std::max(mx, s[j * inner]);
            double sum = 0;
            for (int64_t j = 0; j < len; ++j) {
              float ex = std::exp(s[j * inner] - mx);
              if (!log) d[j * inner] = ex;
              sum += ex;
            }
            if (log) {
              float lse = static_cast<float>(std::log(sum));
              for (int64_t j = 0; j < len; ++j) d[j * inner] = s[j * inner] - mx - lse;
            } else {
              float inv = static_cast<float>(1.0 / sum);
              for (int64_t j = 0; j < len; ++j) d[j * inner] *= inv;
            }
          }
        });
        return Status::Ok();
      },
      {DataType::kFloat32});
}

}  // namespace

void RegisterNormKernels(KernelRegistry* r) {
  r->Register({"BatchNormalization", 7, BatchNormFactory, "float"});
  r->Register({"LayerNormalization", 17, LayerNormFactory, "float"});
  r->Register({"Softmax", 1, [](const KernelInit& i) { return SoftmaxFactory(i, false); }, "float"});
  r->Register({"LogSoftmax", 1, [](const KernelInit& i) { return SoftmaxFactory(i, true); }, "float"});
}

}  // namespace mf::runtime::cpu
