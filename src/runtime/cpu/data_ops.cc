// Operators that select, create or convert data: Gather, Slice, Pad, Cast, Constant,
// ConstantOfShape, Range.
#include <cmath>
#include <cstring>
#include <limits>

#include "runtime/cpu/cpu_common.h"
#include "runtime/ops/cast_codes.h"
#include "runtime/ops/gather_rules.h"
#include "runtime/ops/input_checks.h"
#include "runtime/ops/slice_rules.h"

namespace mf::runtime::cpu {
namespace {

StatusOr<BoundKernel> GatherFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 1));
  if (!ops::IsIndexType(init.dtype(1))) {
    return init.Error(StatusCode::kInvalidArgument, "indices must be int32 or int64");
  }
  MF_ASSIGN_OR_RETURN(int64_t axis_attr, init.attrs().GetInt("axis", 0));
  return Bind(
      [axis_attr](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& data = *in[0];
        MF_ASSIGN_OR_RETURN(ops::GatherPlan plan, ops::PlanGather(data.shape(), in[1]->shape(), axis_attr));
        std::vector<int64_t> idx = ops::ReadIndices(*in[1]);
        for (int64_t& v : idx) {
          MF_ASSIGN_OR_RETURN(v, ops::GatherIndex(v, plan.dim));
        }
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(data.dtype(), plan.shape));
        int64_t outer = plan.outer, dim = plan.dim;
        size_t inner = ElementSize(data.dtype()) * static_cast<size_t>(plan.inner);
        const char* src = static_cast<const char*>(data.raw_data());
        char* dst = static_cast<char*>(out[0].raw_data());
        for (int64_t o = 0; o < outer; ++o) {
          for (size_t j = 0; j < idx.size(); ++j) {
            std::memcpy(dst + (static_cast<size_t>(o) * idx.size() + j) * inner,
                        src + (static_cast<size_t>(o * dim + idx[j])) * inner, inner);
          }
        }
        return Status::Ok();
      },
      {init.dtype(0)});
}

// Slice from opset 10: starts, ends, axes, steps as inputs.
//
// The output is copied as contiguous runs of the input: trailing dims taken whole merge into one
// run, which the innermost sliced dim extends when its step is 1 (a Q/K/V split of a fused
// projection copies rows of head_dim floats). An odometer walks the outer dims, so no element
// costs a division.
template <typename T>
void CopySlice(const T* px, const Shape& in_shape, const ops::SlicePlan& plan, T* po) {
  const std::vector<int64_t> strides = ops::RowMajorStrides(in_shape);
  int d = static_cast<int>(in_shape.size()) - 1;
  auto at = [](const auto& v, int i) { return v[static_cast<size_t>(i)]; };
  int64_t run = 1, offset = 0;
  while (d >= 0 && at(plan.step, d) == 1 && at(plan.start, d) == 0 && at(plan.shape, d) == at(in_shape, d)) {
    run *= at(plan.shape, d--);
  }
  if (d >= 0 && at(plan.step, d) == 1) {
    run *= at(plan.shape, d);
    offset += at(plan.start, d) * at(strides, d);
    --d;
  }
  const int outer_rank = d + 1;
  int64_t outer = 1;
  for (int k = 0; k < outer_rank; ++k) {
    outer *= at(plan.shape, k);
    offset += at(plan.start, k) * at(strides, k);
  }
  if (run == 0 || outer == 0) return;
  std::vector<int64_t> index(static_cast<size_t>(outer_rank), 0);
  for (int64_t o = 0; o < outer; ++o, po += run) {
    std::memcpy(po, px + offset, static_cast<size_t>(run) * sizeof(T));
    for (int k = outer_rank - 1; k >= 0; --k) {
      offset += at(plan.step, k) * at(strides, k);
      if (++index[static_cast<size_t>(k)] < at(plan.shape, k)) break;
      offset -= at(plan.step, k) * at(strides, k) * at(plan.shape, k);
      index[static_cast<size_t>(k)] = 0;
    }
  }
}

StatusOr<BoundKernel> SliceFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 1));
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 2));
  return Bind(
      [](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(ops::SlicePlan plan, ops::PlanSlice(in));
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(x.dtype(), plan.shape));
        return DispatchBySize(x.dtype(), [&](auto tag) -> Status {
          using T = decltype(tag);
          CopySlice(x.data<T>(), x.shape(), plan, out[0].data<T>());
          return Status::Ok();
        });
      },
      {init.dtype(0)});
}

// Pad from opset 11: pads (and the constant value) are inputs; modes constant, reflect, edge.
StatusOr<BoundKernel> PadFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 1));
  if (init.has_input(3)) return init.Error(StatusCode::kUnimplemented, "the axes input of Pad is not supported");
  MF_ASSIGN_OR_RETURN(std::string mode_name, init.attrs().GetString("mode", "constant"));
  StatusOr<ops::PadMode> mode_or = ops::ParsePadMode(mode_name);
  if (!mode_or.ok()) return init.Error(mode_or.status().code(), mode_or.status().message());
  ops::PadMode mode = *mode_or;
  return Bind(
      [mode](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        int rank = x.rank();
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ReadInts(*in[1], "pads"));
        MF_ASSIGN_OR_RETURN(Shape shape, ops::PadShape(x.shape(), pads, mode));
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(x.dtype(), shape));
        std::vector<int64_t> strides = ops::RowMajorStrides(x.shape());
        return DispatchBySize(x.dtype(), [&](auto tag) -> Status {
          using T = decltype(tag);
          T value{};
          if (in.size() > 2 && in[2] && in[2]->num_elements() > 0) {
            if (in[2]->dtype() != x.dtype()) return InvalidArgument("Pad constant_value type differs from the data");
            value = in[2]->data<T>()[0];
          }
          const T* px = x.data<T>();
          T* po = out[0].data<T>();
          for (int64_t i = 0; i < out[0].num_elements(); ++i) {
            int64_t rem = i, off = 0;
            bool inside = true;
            for (int d = rank; d-- > 0;) {
              int64_t o = rem % shape[static_cast<size_t>(d)];
              rem /= shape[static_cast<size_t>(d)];
              int64_t src = o - pads[static_cast<size_t>(d)], dim = x.dim(d);
              if ((src < 0 || src >= dim) && mode == ops::PadMode::kConstant) {
                inside = false;
                break;
              }
              src = ops::PadSourceIndex(src, dim, mode);
              off += src * strides[static_cast<size_t>(d)];
            }
            po[i] = inside ? px[off] : value;
          }
          return Status::Ok();
        });
      },
      {init.dtype(0)});
}

template <typename S, typename D>
D Convert(S v) {
  if constexpr (std::is_floating_point_v<S> && std::is_same_v<D, bool>) {
    return v != S{0};  // NaN is true, as in C and ONNX
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    // Out-of-range float -> int conversion is undefined in C++; saturate (NaN -> 0).
    if (std::isnan(v)) return D{0};
    if (v <= static_cast<S>(std::numeric_limits<D>::lowest())) return std::numeric_limits<D>::lowest();
    if (v >= static_cast<S>(std::numeric_limits<D>::max())) return std::numeric_limits<D>::max();
  }
  return static_cast<D>(v);
}

// Calls fn(T{}) for numeric types and bool.
template <typename Fn>
Status DispatchCastable(DataType t, Fn&& fn) {
  if (t == DataType::kBool) return fn(bool{});
  return DispatchNumeric(t, fn);
}

StatusOr<BoundKernel> CastFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 0));
  MF_ASSIGN_OR_RETURN(DataType dst_type, ops::ReadCastTarget(init));
  DataType from = init.dtype(0);
  if (from != DataType::kBool && !IsNumeric(from)) {
    return init.Error(StatusCode::kUnimplemented, "cast from " + std::string(DataTypeName(from)) + " is not supported");
  }
  return Bind(
      [dst_type](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(dst_type, x.shape()));
        return DispatchCastable(x.dtype(), [&](auto s) -> Status {
          using S = decltype(s);
          return DispatchCastable(dst_type, [&](auto d) -> Status {
            using D = decltype(d);
            const S* ps = x.data<S>();
            D* pd = out[0].data<D>();
            for (int64_t i = 0; i < x.num_elements(); ++i) pd[i] = Convert<S, D>(ps[i]);
            return Status::Ok();
          });
        });
      },
      {dst_type});
}

// Constant: the value is fixed at bind time; constant folding replaces the node by its value.
StatusOr<BoundKernel> ConstantFactory(const KernelInit& init) {
  const Attributes& a = init.attrs();
  std::shared_ptr<const Tensor> value;
  if (a.Has("value")) {
    MF_ASSIGN_OR_RETURN(value, a.GetTensor("value"));
  } else if (a.Has("value_float")) {
    MF_ASSIGN_OR_RETURN(float f, a.GetFloat("value_float", 0.f));
    MF_ASSIGN_OR_RETURN(Tensor t,
                        Tensor::FromBytes(DataType::kFloat32, {}, {reinterpret_cast<const char*>(&f), sizeof f}));
    value = std::make_shared<const Tensor>(std::move(t));
  } else if (a.Has("value_int")) {
    MF_ASSIGN_OR_RETURN(int64_t i, a.GetInt("value_int", 0));
    MF_ASSIGN_OR_RETURN(Tensor t,
                        Tensor::FromBytes(DataType::kInt64, {}, {reinterpret_cast<const char*>(&i), sizeof i}));
    value = std::make_shared<const Tensor>(std::move(t));
  } else if (a.Has("value_floats")) {
    MF_ASSIGN_OR_RETURN(std::vector<float> f, a.GetFloats("value_floats", {}));
    MF_ASSIGN_OR_RETURN(Tensor t,
                        Tensor::FromBytes(DataType::kFloat32, {static_cast<int64_t>(f.size())},
                                          {reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float)}));
    value = std::make_shared<const Tensor>(std::move(t));
  } else if (a.Has("value_ints")) {
    MF_ASSIGN_OR_RETURN(std::vector<int64_t> v, a.GetInts("value_ints", {}));
    MF_ASSIGN_OR_RETURN(Tensor t,
                        Tensor::FromBytes(DataType::kInt64, {static_cast<int64_t>(v.size())},
                                          {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t)}));
    value = std::make_shared<const Tensor>(std::move(t));
  }
  if (!value) return init.Error(StatusCode::kUnimplemented, "needs a value, value_float(s) or value_int(s) attribute");
  DataType t = value->dtype();
  return Bind(
      [value](const std::vector<const Tensor*>&, std::vector<Tensor>& out) -> Status {
        out[0] = value->Clone();
        return Status::Ok();
      },
      {t});
}

StatusOr<BoundKernel> ConstantOfShapeFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 0));
  MF_ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> value, init.attrs().GetTensor("value"));
  if (value && (value->num_elements() != 1 || value->dtype() == DataType::kString)) {
    return init.Error(StatusCode::kInvalidArgument, "value must be a one-element numeric tensor");
  }
  DataType t = value ? value->dtype() : DataType::kFloat32;
  return Bind(
      [value, t](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> shape, ReadInts(*in[0], "shape"));
        for (int64_t d : shape) {
          if (d < 0) return InvalidArgument("ConstantOfShape dims must not be negative");
        }
        MF_ASSIGN_OR_RETURN(out[0], Tensor::Allocate(t, shape));
        if (!value) return Status::Ok();
        return DispatchBySize(t, [&](auto tag) -> Status {
          using T = decltype(tag);
          T v = value->data<T>()[0];
          T* p = out[0].data<T>();
          for (int64_t i = 0; i < out[0].num_elements(); ++i) p[i] = v;
          return Status::Ok();
        });
      },
      {t});
}

StatusOr<BoundKernel> RangeFactory(const KernelInit& init) {
  for (size_t i = 0; i < 3; ++i) {
    MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, i));
    if (init.dtype(i) != init.dtype(0))
      return init.Error(StatusCode::kInvalidArgument, "start, limit and delta types differ");
  }
  DataType t = init.dtype(0);
  if (!IsNumeric(t))
    return init.Error(StatusCode::kUnimplemented, "Range of " + std::string(DataTypeName(t)) + " is not supported");
  return Bind(
      [t](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        for (size_t i = 0; i < 3; ++i) {
          if (in[i]->num_elements() != 1) return InvalidArgument("Range start, limit and delta must be scalars");
        }
        return DispatchNumeric(t, [&](auto tag) -> Status {
          using T = decltype(tag);
          double start = static_cast<double>(in[0]->data<T>()[0]), limit = static_cast<double>(in[1]->data<T>()[0]),
                 delta = static_cast<double>(in[2]->data<T>()[0]);
          if (delta == 0) return InvalidArgument("Range delta must not be 0");
          double count = std::ceil((limit - start) / delta);
          if (!(count >= 0)) count = 0;  // also catches NaN
          if (count > static_cast<double>(kMaxTensorBytes))
            return ResourceExhausted("Range would produce too many elements");
          MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(t, {static_cast<int64_t>(count)}));
          T* p = out[0].data<T>();
          T s = in[0]->data<T>()[0], d = in[2]->data<T>()[0];
          for (int64_t i = 0; i < out[0].num_elements(); ++i) p[i] = static_cast<T>(s + static_cast<T>(i) * d);
          return Status::Ok();
        });
      },
      {t});
}

StatusOr<BoundKernel> GatherElementsFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 1));
  if (!ops::IsIndexType(init.dtype(1))) {
    return init.Error(StatusCode::kInvalidArgument, "indices must be int32 or int64");
  }
  MF_ASSIGN_OR_RETURN(int64_t axis_attr, init.attrs().GetInt("axis", 0));
  return Bind(
      [axis_attr](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& data = *in[0];
        const Tensor& idx = *in[1];
        MF_ASSIGN_OR_RETURN(int axis, ops::GatherElementsAxis(data.shape(), idx.shape(), axis_attr));
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(data.dtype(), idx.shape()));
        int rank = data.rank();
        std::vector<int64_t> strides = ops::RowMajorStrides(data.shape());
        int64_t dim = data.dim(axis);
        return DispatchBySize(data.dtype(), [&](auto tag) -> Status {
          using T = decltype(tag);
          const T* pd = data.data<T>();
          T* po = out[0].data<T>();
          for (int64_t i = 0; i < idx.num_elements(); ++i) {
            int64_t k = idx.dtype() == DataType::kInt64 ? idx.data<int64_t>()[i] : idx.data<int32_t>()[i];
            MF_ASSIGN_OR_RETURN(k, ops::GatherElementsIndex(k, dim));
            int64_t rem = i, off = 0;
            for (int d = rank; d-- > 0;) {
              int64_t c = rem % idx.dim(d);
              rem /= idx.dim(d);
              off += (d == axis ? k : c) * strides[static_cast<size_t>(d)];
            }
            po[i] = pd[off];
          }
          return Status::Ok();
        });
      },
      {init.dtype(0)});
}

// Trilu: keeps the upper (or lower) triangle of the last two dims, offset by k.
StatusOr<BoundKernel> TriluFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(ops::RequireFixedWidth(init, 0));
  MF_ASSIGN_OR_RETURN(int64_t upper, init.attrs().GetInt("upper", 1));
  return Bind(
      [upper](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        if (x.rank() < 2) return InvalidArgument("Trilu input must be at least 2-D");
        MF_ASSIGN_OR_RETURN(int64_t k, ops::TriluK(in.size() > 1 ? in[1] : nullptr));
        out[0] = x.Clone();
        int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
        int64_t mats = rows * cols == 0 ? 0 : x.num_elements() / (rows * cols);
        size_t elem = ElementSize(x.dtype());
        int64_t kk = ops::ClampTriluK(k, upper != 0, rows, cols);
        char* p = static_cast<char*>(out[0].raw_data());
        for (int64_t m = 0; m < mats; ++m) {
          for (int64_t i = 0; i < rows; ++i) {
            for (int64_t j = 0; j < cols; ++j) {
              bool keep = upper ? j - i >= kk : j - i <= kk;
              if (!keep) std::memset(p + static_cast<size_t>((m * rows + i) * cols + j) * elem, 0, elem);
            }
          }
        }
        return Status::Ok();
      },
      {init.dtype(0)});
}

}  // namespace

void RegisterDataKernels(KernelRegistry* r) {
  r->Register({"GatherElements", 11, GatherElementsFactory, "any fixed-width"});
  r->Register({"Trilu", 14, TriluFactory, "any fixed-width"});
  r->Register({"Gather", 1, GatherFactory, "any fixed-width"});
  r->Register({"Slice", 10, SliceFactory, "any fixed-width"});
  r->Register({"Pad", 11, PadFactory, "any fixed-width"});
  r->Register({"Cast", 6, CastFactory, "numeric, bool"});
  r->Register({"Constant", 1, ConstantFactory, "any"});
  r->Register({"ConstantOfShape", 9, ConstantOfShapeFactory, "numeric, bool"});
  r->Register({"Range", 11, RangeFactory, "numeric"});
}

}  // namespace mf::runtime::cpu
