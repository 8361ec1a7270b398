// Operators that only rearrange or relabel elements: Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, Dropout (inference), Transpose, Concat, Split, Shape, Size, Expand, Tile.
// They work on any fixed-width element type.
#include <cstring>
#include <numeric>

#include "runtime/cpu/cpu_common.h"
#include "runtime/ops/dropout_rules.h"
#include "runtime/ops/input_checks.h"
#include "runtime/ops/reshape_kernels.h"
#include "runtime/ops/shape_rules.h"

namespace mf::runtime::cpu {
namespace {

using ops::RequireFixedWidth;
using ops::RequireInput;

StatusOr<Tensor> CopyWithShape(const Tensor& x, Shape shape) {
  MF_ASSIGN_OR_RETURN(Tensor t, Tensor::AllocateUninitialized(x.dtype(), std::move(shape)));
  if (t.num_elements() != x.num_elements()) {
    return InvalidArgument("cannot reshape " + ShapeToString(x.shape()) + " to " + ShapeToString(t.shape()));
  }
  if (x.byte_size()) std::memcpy(t.raw_data(), x.raw_data(), x.byte_size());
  if (x.dtype() == DataType::kString) t.strings() = x.strings();
  return t;
}

StatusOr<BoundKernel> IdentityFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireInput(init, 0));
  std::vector<DataType> outs{init.dtype(0)};
  MF_ASSIGN_OR_RETURN(bool dropout_mask, ops::ReadDropoutMaskOutput(init));
  if (dropout_mask) outs.push_back(DataType::kBool);
  return Bind(
      [dropout_mask](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        out[0] = in[0]->Clone();
        if (dropout_mask) {
          MF_ASSIGN_OR_RETURN(out[1], Tensor::AllocateUninitialized(DataType::kBool, in[0]->shape()));
          std::memset(out[1].raw_data(), 1, out[1].byte_size());
        }
        return Status::Ok();
      },
      outs);
}

StatusOr<BoundKernel> TransposeFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_ASSIGN_OR_RETURN(std::vector<int64_t> perm_attr, init.attrs().GetInts("perm", {}));
  return Bind(
      [perm_attr](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        int rank = x.rank();
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ops::TransposePerm(perm_attr, rank));
        Shape shape(static_cast<size_t>(rank));
        std::vector<int64_t> in_strides = ops::RowMajorStrides(x.shape()), src_stride(static_cast<size_t>(rank));
        for (int i = 0; i < rank; ++i) {
          shape[static_cast<size_t>(i)] = x.dim(static_cast<int>(perm[static_cast<size_t>(i)]));
          src_stride[static_cast<size_t>(i)] = in_strides[static_cast<size_t>(perm[static_cast<size_t>(i)])];
        }
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(x.dtype(), shape));
        int64_t inner = rank ? shape.back() : 1;
        int64_t rows = inner ? out[0].num_elements() / inner : 0;
        return DispatchBySize(x.dtype(), [&](auto tag) -> Status {
          using T = decltype(tag);
          const T* px = x.data<T>();
          T* po = out[0].data<T>();
          int64_t step = rank ? src_stride.back() : 1;
          ParallelFor(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
              int64_t rem = r, off = 0;
              for (int d = rank - 2; d >= 0; --d) {
                off += (rem % shape[static_cast<size_t>(d)]) * src_stride[static_cast<size_t>(d)];
                rem /= shape[static_cast<size_t>(d)];
              }
              T* dst = po + r * inner;
              for (int64_t i = 0; i < inner; ++i) dst[i] = px[off + i * step];
            }
          });
          return Status::Ok();
        });
      },
      {init.dtype(0)});
}

StatusOr<BoundKernel> ConcatFactory(const KernelInit& init) {
  MF_ASSIGN_OR_RETURN(int64_t axis_attr, ops::ReadConcatAxis(init));
  return Bind(
      [axis_attr](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& first = *in[0];
        MF_ASSIGN_OR_RETURN(ops::ConcatPlan plan, ops::PlanConcat(in, axis_attr));
        const Shape& shape = plan.shape;
        int axis = plan.axis;
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(first.dtype(), shape));
        int64_t outer = 1;
        for (int i = 0; i < axis; ++i) outer *= shape[static_cast<size_t>(i)];
        size_t out_row = out[0].byte_size() / static_cast<size_t>(std::max<int64_t>(outer, 1));
        size_t offset = 0;
        for (const Tensor* t : in) {
          size_t row = outer ? t->byte_size() / static_cast<size_t>(outer) : 0;
          for (int64_t o = 0; o < outer; ++o) {
            std::memcpy(static_cast<char*>(out[0].raw_data()) + static_cast<size_t>(o) * out_row + offset,
                        static_cast<const char*>(t->raw_data()) + static_cast<size_t>(o) * row, row);
          }
          offset += row;
        }
        return Status::Ok();
      },
      {init.dtype(0)});
}

StatusOr<BoundKernel> SplitFactory(const KernelInit& init) {
  MF_ASSIGN_OR_RETURN(ops::SplitAttributes attrs, ops::ReadSplitAttributes(init));
  size_t n_out = attrs.outputs;
  return Bind(
      [attrs, n_out](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        const Tensor* split_input = in.size() > 1 ? in[1] : nullptr;
        MF_ASSIGN_OR_RETURN(ops::SplitPlan plan, ops::PlanSplit(attrs, x.shape(), split_input));
        int axis = plan.axis;
        const std::vector<int64_t>& split = plan.sizes;
        int64_t dim = x.dim(axis);
        int64_t outer = 1;
        for (int i = 0; i < axis; ++i) outer *= x.dim(i);
        size_t inner_bytes = ElementSize(x.dtype());
        for (int i = axis + 1; i < x.rank(); ++i) inner_bytes *= static_cast<size_t>(x.dim(i));
        int64_t start = 0;
        for (size_t k = 0; k < n_out; ++k) {
          Shape s = x.shape();
          s[static_cast<size_t>(axis)] = split[k];
          MF_ASSIGN_OR_RETURN(out[k], Tensor::AllocateUninitialized(x.dtype(), s));
          size_t row = static_cast<size_t>(split[k]) * inner_bytes;
          for (int64_t o = 0; o < outer; ++o) {
            std::memcpy(static_cast<char*>(out[k].raw_data()) + static_cast<size_t>(o) * row,
                        static_cast<const char*>(x.raw_data()) + (static_cast<size_t>(o * dim + start)) * inner_bytes,
                        row);
          }
          start += split[k];
        }
        return Status::Ok();
      },
      std::vector<DataType>(n_out, init.dtype(0)));
}

StatusOr<BoundKernel> ShapeFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireInput(init, 0));
  MF_ASSIGN_OR_RETURN(int64_t start_attr, init.attrs().GetInt("start", 0));
  bool has_end = init.attrs().Has("end");
  MF_ASSIGN_OR_RETURN(int64_t end_attr, init.attrs().GetInt("end", 0));
  return Bind(
      [=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        int64_t r = in[0]->rank();
        auto clamp = [r](int64_t v) { return std::min(std::max(v < 0 ? v + r : v, int64_t{0}), r); };
        int64_t s = clamp(start_attr), e = has_end ? clamp(end_attr) : r;
        int64_t n = std::max<int64_t>(0, e - s);
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kInt64, {n}));
        for (int64_t i = 0; i < n; ++i) out[0].data<int64_t>()[i] = in[0]->dim(static_cast<int>(s + i));
        return Status::Ok();
      },
      {DataType::kInt64});
}

StatusOr<BoundKernel> SizeFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireInput(init, 0));
  return Bind(
      [](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        MF_ASSIGN_OR_RETURN(out[0], Tensor::AllocateUninitialized(DataType::kInt64, {}));
        out[0].data<int64_t>()[0] = in[0]->num_elements();
        return Status::Ok();
      },
      {DataType::kInt64});
}

// Copies x into an output of `shape`, repeating it: broadcast (Expand) or tile (Tile).
Status Replicate(const Tensor& x, const Shape& shape, bool tile, Tensor& out) {
  MF_ASSIGN_OR_RETURN(out, Tensor::AllocateUninitialized(x.dtype(), shape));
  int rank = static_cast<int>(shape.size());
  std::vector<int64_t> in_dims(static_cast<size_t>(rank), 1), in_strides(static_cast<size_t>(rank), 0);
  for (int i = 0; i < x.rank(); ++i) in_dims[static_cast<size_t>(rank - x.rank() + i)] = x.dim(i);
  int64_t s = 1;
  for (int i = rank; i-- > 0;) {
    in_strides[static_cast<size_t>(i)] = s;
    s *= in_dims[static_cast<size_t>(i)];
  }
  return DispatchBySize(x.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    int64_t n = out.num_elements();
    ParallelFor(n, 1 << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t rem = i, off = 0;
        for (int d = rank; d-- > 0;) {
          int64_t idx = rem % shape[static_cast<size_t>(d)];
          rem /= shape[static_cast<size_t>(d)];
          int64_t id = in_dims[static_cast<size_t>(d)];
          off += (tile ? idx % id : (id == 1 ? 0 : idx)) * in_strides[static_cast<size_t>(d)];
        }
        po[i] = px[off];
      }
    });
    return Status::Ok();
  });
}

StatusOr<BoundKernel> ExpandFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireInput(init, 1));
  return Bind(
      [](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> req, ReadInts(*in[1], "shape"));
        MF_ASSIGN_OR_RETURN(Shape shape, ops::ExpandShape(in[0]->shape(), req));
        return Replicate(*in[0], shape, false, out[0]);
      },
      {init.dtype(0)});
}

StatusOr<BoundKernel> TileFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireInput(init, 1));
  return Bind(
      [](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> reps, ReadInts(*in[1], "repeats"));
        MF_ASSIGN_OR_RETURN(Shape shape, ops::TileShape(in[0]->shape(), reps));
        return Replicate(*in[0], shape, true, out[0]);
      },
      {init.dtype(0)});
}

}  // namespace

void RegisterShapeKernels(KernelRegistry* r) {
  ops::RegisterReshapeKernels(r, &CopyWithShape, /*device=*/false);
  r->Register({"Identity", 1, IdentityFactory, "any"});
  r->Register({"Dropout", 1, IdentityFactory, "any (inference: identity)"});
  r->Register({"Transpose", 1, TransposeFactory, "any fixed-width"});
  r->Register({"Concat", 4, ConcatFactory, "any fixed-width"});
  r->Register({"Split", 2, SplitFactory, "any fixed-width"});
  r->Register({"Shape", 1, ShapeFactory, "any"});
  r->Register({"Size", 1, SizeFactory, "any"});
  r->Register({"Expand", 8, ExpandFactory, "any fixed-width"});
  r->Register({"Tile", 6, TileFactory, "any fixed-width"});
}

}  // namespace mf::runtime::cpu
