// Reductions over a set of axes: ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd,
// ReduceSumSquare. Axes come from an attribute in older opsets and from an optional input in
// newer ones (ReduceSum from 13, the others from 18).
#include <cmath>
#include <limits>

#include "runtime/cpu/cpu_common.h"
#include "runtime/ops/input_checks.h"
#include "runtime/ops/reduce_axes.h"

namespace mf::runtime::cpu {
namespace {

using ops::ReduceKind;

template <typename T>
Status Reduce(ReduceKind kind, const Tensor& x, const std::vector<bool>& reduced, bool keepdims, Tensor& out) {
  ops::ReduceShape rs = ops::ReducedShape(x.shape(), reduced, keepdims);
  int64_t count = rs.count;
  MF_ASSIGN_OR_RETURN(out, Tensor::AllocateUninitialized(x.dtype(), std::move(rs.shape)));
  int64_t n_out = out.num_elements();
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  Acc init = kind == ReduceKind::kMax    ? static_cast<Acc>(std::numeric_limits<T>::lowest())
             : kind == ReduceKind::kMin  ? static_cast<Acc>(std::numeric_limits<T>::max())
             : kind == ReduceKind::kProd ? Acc(1)
                                         : Acc(0);
  if constexpr (std::is_floating_point_v<T>) {
    if (kind == ReduceKind::kMax) init = -std::numeric_limits<Acc>::infinity();
    if (kind == ReduceKind::kMin) init = std::numeric_limits<Acc>::infinity();
  }
  std::vector<Acc> acc(static_cast<size_t>(n_out), init);
  // Strides of the output index space, seen from each input dim (0 for reduced dims).
  std::vector<int64_t> ostride(static_cast<size_t>(x.rank()), 0);
  int64_t s = 1;
  for (int i = x.rank(); i-- > 0;) {
    if (!reduced[static_cast<size_t>(i)]) {
      ostride[static_cast<size_t>(i)] = s;
      s *= x.dim(i);
    }
  }
  const T* px = x.data<T>();
  auto combine = [kind](Acc a, Acc v) -> Acc {
    switch (kind) {
      case ReduceKind::kMax:
        return v > a ? v : a;
      case ReduceKind::kMin:
        return v < a ? v : a;
      case ReduceKind::kProd:
        return a * v;
      case ReduceKind::kSumSquare:
      case ReduceKind::kL2:
        return a + v * v;
      case ReduceKind::kL1:
        if constexpr (std::is_signed_v<Acc>)
          return a + (v < 0 ? -v : v);
        else
          return a + v;
      case ReduceKind::kLogSumExp:
        return a + static_cast<Acc>(std::exp(static_cast<double>(v)));
      default:
        return a + v;
    }
  };
  bool trailing = true;  // reduced axes are exactly the trailing ones: contiguous rows
  for (int i = 0, seen = 0; i < x.rank(); ++i) {
    if (reduced[static_cast<size_t>(i)])
      seen = 1;
    else if (seen)
      trailing = false;
  }
  if (trailing) {
    ParallelFor(n_out, 16, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        Acc a = init;
        for (int64_t j = 0; j < count; ++j) a = combine(a, static_cast<Acc>(px[r * count + j]));
        acc[static_cast<size_t>(r)] = a;
      }
    });
  } else {
    std::vector<int64_t> idx(static_cast<size_t>(x.rank()), 0);
    int64_t o = 0;
    for (int64_t i = 0; i < x.num_elements(); ++i) {
      acc[static_cast<size_t>(o)] = combine(acc[static_cast<size_t>(o)], static_cast<Acc>(px[i]));
      for (int d = x.rank(); d-- > 0;) {  // odometer increment
        ++idx[static_cast<size_t>(d)];
        o += ostride[static_cast<size_t>(d)];
        if (idx[static_cast<size_t>(d)] < x.dim(d)) break;
        o -= ostride[static_cast<size_t>(d)] * x.dim(d);
        idx[static_cast<size_t>(d)] = 0;
      }
    }
  }
  T* po = out.data<T>();
  for (int64_t i = 0; i < n_out; ++i) {
    Acc a = acc[static_cast<size_t>(i)];
    if (kind == ReduceKind::kMean) a = count ? static_cast<Acc>(a / static_cast<Acc>(count)) : a;
    if (kind == ReduceKind::kL2) a = static_cast<Acc>(std::sqrt(static_cast<double>(a)));
    if (kind == ReduceKind::kLogSum || kind == ReduceKind::kLogSumExp)
      a = static_cast<Acc>(std::log(static_cast<double>(a)));
    po[i] = static_cast<T>(a);
  }
  return Status::Ok();
}

KernelFactory ReduceFactory(ReduceKind kind, int64_t axes_input_since) {
  return [kind, axes_input_since](const KernelInit& init) -> StatusOr<BoundKernel> {
    MF_RETURN_IF_ERROR(ops::RequireDataInput(
        init, [kind](DataType t) { return IsNumeric(t) && (!ops::ReduceNeedsFloat(kind) || IsFloat(t)); }));
    DataType t = init.dtype(0);
    MF_ASSIGN_OR_RETURN(ops::ReduceAttributes attrs, ops::ReadReduceAttributes(init, axes_input_since));
    return Bind(
        [=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          const Tensor& x = *in[0];
          MF_ASSIGN_OR_RETURN(std::vector<bool> reduced,
                              ops::ReducedAxes(attrs, in.size() > 1 ? in[1] : nullptr, x.rank()));
          return DispatchNumeric(
              x.dtype(), [&](auto tag) { return Reduce<decltype(tag)>(kind, x, reduced, attrs.keepdims, out[0]); });
        },
        {t});
  };
}

// ArgMax / ArgMin along one axis: int64 indices, first (or with select_last_index, last)
// position of the extreme value.
KernelFactory ArgFactory(bool is_max) {
  return [is_max](const KernelInit& init) -> StatusOr<BoundKernel> {
    MF_RETURN_IF_ERROR(ops::RequireDataInput(init, IsNumeric));
    MF_ASSIGN_OR_RETURN(ops::ArgReduceAttributes attrs, ops::ReadArgReduceAttributes(init));
    return Bind(
        [=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
          const Tensor& x = *in[0];
          MF_ASSIGN_OR_RETURN(ops::ArgReducePlan plan, ops::PlanArgReduce(x.shape(), attrs.axis, attrs.keepdims));
          int64_t outer = plan.outer, len = plan.len, inner = plan.inner;
          const bool last = attrs.select_last_index;
          MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kInt64, plan.shape));
          int64_t* po = out[0].data<int64_t>();
          return DispatchNumeric(x.dtype(), [&](auto tag) -> Status {
            using T = decltype(tag);
            const T* px = x.data<T>();
            for (int64_t o = 0; o < outer; ++o) {
              for (int64_t i = 0; i < inner; ++i) {
                const T* s = px + o * len * inner + i;
                int64_t best = 0;
                for (int64_t j = 1; j < len; ++j) {
                  T v = s[j * inner], b = s[best * inner];
                  bool better = is_max ? (last ? v >= b : v > b) : (last ? v <= b : v < b);
                  if (better) best = j;
                }
                po[o * inner + i] = best;
              }
            }
            return Status::Ok();
          });
        },
        {DataType::kInt64});
  };
}

}  // namespace

void RegisterReduceKernels(KernelRegistry* r) {
  r->Register({"ArgMax", 1, ArgFactory(true), "numeric"});
  r->Register({"ArgMin", 1, ArgFactory(false), "numeric"});
  for (const ops::ReduceOp& op : ops::kReduceOps) {
    r->Register({op.name, 1, ReduceFactory(op.kind, op.axes_input_since),
                 ops::ReduceNeedsFloat(op.kind) ? "float" : "numeric"});
  }
}

}  // namespace mf::runtime::cpu
