// Operators that only rearrange or relabel elements: Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, Dropout (inference), Transpose, Concat, Split, Shape, Size, Expand, Tile.
// They work on any fixed-width element type.
#include <cstring>
#include <numeric>

#include "runtime/cpu/cpu_common.h"

namespace mf::runtime::cpu {
namespace {

StatusOr<Tensor> CopyWithShape(const Tensor& x, Shape shape) {
  MF_ASSIGN_OR_RETURN(Tensor t, Tensor::AllocateUninitialized(x.dtype(), std::move(shape)));
  if (t.num_elements() != x.num_elements()) {
    return InvalidArgument("cannot reshape " + ShapeToString(x.shape()) + " to " + ShapeToString(t.shape()));
  }
  if (x.byte_size()) std::memcpy(t.raw_data(), x.raw_data(), x.byte_size());
  if (x.dtype() == DataType::kString) t.strings() = x.strings();
  return t;
}

Status RequireInput(const KernelInit& init, size_t i) {
  if (!init.has_input(i)) return init.Error(StatusCode::kInvalidArgument, "missing input " + std::to_string(i));
  return Status::Ok();
}

// Element types the data-movement kernels handle (everything with a fixed width).
Status RequireFixedWidth(const KernelInit& init, size_t i) {
  MF_RETURN_IF_ERROR(RequireInput(init, i));
  DataType t = init.dtype(i);
  if (t == DataType::kString) return init.Error(StatusCode::kUnimplemented, "string tensors are not supported");
  return Status::Ok();
}

StatusOr<BoundKernel> ReshapeFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireInput(init, 1));
  MF_ASSIGN_OR_RETURN(int64_t allowzero, init.attrs().GetInt("allowzero", 0));
  return Bind(
      [allowzero](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> req, ReadInts(*in[1], "shape"));
        Shape shape(req.size());
        int infer = -1;
        int64_t known = 1;
        for (size_t i = 0; i < req.size(); ++i) {
          int64_t d = req[i];
          if (d == 0 && !allowzero) {
            if (i >= x.shape().size()) return InvalidArgument("shape dim " + std::to_string(i) + " is 0 but the input has no such dim");
            d = x.shape()[i];
          }
          if (d == -1) {
            if (infer >= 0) return InvalidArgument("shape has more than one -1");
            infer = static_cast<int>(i);
            continue;
          }
          if (d < 0) return InvalidArgument("shape has a negative dim " + std::to_string(d));
          shape[i] = d;
          if (d != 0 && known > (int64_t{1} << 62) / d) return InvalidArgument("shape overflows");
          known *= d;
        }
        if (infer >= 0) {
          if (known == 0 || x.num_elements() % known != 0) {
            return InvalidArgument("cannot infer the -1 dim reshaping " + ShapeToString(x.shape()) + " to " + ShapeToString(req));
          }
          shape[static_cast<size_t>(infer)] = x.num_elements() / known;
        }
        MF_ASSIGN_OR_RETURN(out[0], CopyWithShape(x, std::move(shape)));
        return Status::Ok();
      },
      {init.dtype(0)});
}

StatusOr<BoundKernel> FlattenFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_ASSIGN_OR_RETURN(int64_t axis_attr, init.attrs().GetInt("axis", 1));
  return Bind(
      [axis_attr](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        int64_t a = axis_attr < 0 ? axis_attr + x.rank() : axis_attr;
        if (a < 0 || a > x.rank()) return InvalidArgument("Flatten axis " + std::to_string(axis_attr) + " is out of range");
        int64_t outer = 1;
        for (int i = 0; i < a; ++i) outer *= x.dim(i);
        int64_t inner = outer == 0 ? 0 : x.num_elements() / outer;
        if (outer == 0) {
          inner = 1;
          for (int i = static_cast<int>(a); i < x.rank(); ++i) inner *= x.dim(i);
        }
        MF_ASSIGN_OR_RETURN(out[0], CopyWithShape(x, {outer, inner}));
        return Status::Ok();
      },
      {init.dtype(0)});
}

// Squeeze and Unsqueeze: axes from an attribute before opset 13, from input 1 after.
StatusOr<BoundKernel> SqueezeFactory(const KernelInit& init, bool unsqueeze) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  bool from_input = init.opset >= 13;
  MF_ASSIGN_OR_RETURN(std::vector<int64_t> attr_axes, init.attrs().GetInts("axes", {}));
  return Bind(
      [=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        std::vector<int64_t> axes = attr_axes;
        if (from_input && in.size() > 1 && in[1]) {
          MF_ASSIGN_OR_RETURN(axes, ReadInts(*in[1], "axes"));
        }
        Shape shape;
        if (unsqueeze) {
          int out_rank = x.rank() + static_cast<int>(axes.size());
          std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
          for (int64_t a : axes) {
            MF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(a, out_rank));
            if (inserted[static_cast<size_t>(axis)]) return InvalidArgument("Unsqueeze axes repeat " + std::to_string(a));
            inserted[static_cast<size_t>(axis)] = true;
          }
          for (int i = 0, j = 0; i < out_rank; ++i) shape.push_back(inserted[static_cast<size_t>(i)] ? 1 : x.dim(j++));
        } else {
          std::vector<bool> drop(static_cast<size_t>(x.rank()), axes.empty());
          if (axes.empty()) {
            for (int i = 0; i < x.rank(); ++i) drop[static_cast<size_t>(i)] = x.dim(i) == 1;
          }
          for (int64_t a : axes) {
            MF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(a, x.rank()));
            if (x.dim(axis) != 1) return InvalidArgument("cannot squeeze dim " + std::to_string(a) + " of " + ShapeToString(x.shape()));
            drop[static_cast<size_t>(axis)] = true;
          }
          for (int i = 0; i < x.rank(); ++i) {
            if (!drop[static_cast<size_t>(i)]) shape.push_back(x.dim(i));
          }
        }
        MF_ASSIGN_OR_RETURN(out[0], CopyWithShape(x, std::move(shape)));
        return Status::Ok();
      },
      {init.dtype(0)});
}

StatusOr<BoundKernel> IdentityFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireInput(init, 0));
  std::vector<DataType> outs{init.dtype(0)};
  bool dropout_mask = init.node.op_type == "Dropout" && init.node.outputs.size() > 1 && init.node.outputs[1] != kNoValue;
  if (init.node.op_type == "Dropout") {
    if (init.num_inputs() > 2 && init.constant_inputs[2] == nullptr && init.has_input(2)) {
      return init.Error(StatusCode::kUnimplemented, "a non-constant training_mode is not supported");
    }
    if (init.num_inputs() > 2 && init.constant_inputs[2] && init.constant_inputs[2]->num_elements() == 1 &&
        init.constant_inputs[2]->data<bool>()[0]) {
      return init.Error(StatusCode::kUnimplemented, "training mode (random dropout) is not supported");
    }
    if (dropout_mask) outs.push_back(DataType::kBool);
  }
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
        std::vector<int64_t> perm = perm_attr;
        if (perm.empty()) {
          for (int i = rank; i-- > 0;) perm.push_back(i);
        }
        if (static_cast<int>(perm.size()) != rank) return InvalidArgument("perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(rank));
        std::vector<bool> seen(static_cast<size_t>(rank), false);
        for (int64_t p : perm) {
          if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) return InvalidArgument("perm is not a permutation");
          seen[static_cast<size_t>(p)] = true;
        }
        Shape shape(static_cast<size_t>(rank));
        std::vector<int64_t> in_strides(static_cast<size_t>(rank), 1), src_stride(static_cast<size_t>(rank));
        for (int i = rank - 1; i > 0; --i) in_strides[static_cast<size_t>(i - 1)] = in_strides[static_cast<size_t>(i)] * x.dim(i);
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
  if (init.num_inputs() == 0) return init.Error(StatusCode::kInvalidArgument, "needs at least one input");
  for (size_t i = 0; i < init.num_inputs(); ++i) {
    MF_RETURN_IF_ERROR(RequireFixedWidth(init, i));
    if (init.dtype(i) != init.dtype(0)) return init.Error(StatusCode::kInvalidArgument, "inputs have different types");
  }
  MF_ASSIGN_OR_RETURN(int64_t axis_attr, init.attrs().GetInt("axis", 0));
  return Bind(
      [axis_attr](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& first = *in[0];
        MF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_attr, first.rank()));
        Shape shape = first.shape();
        shape[static_cast<size_t>(axis)] = 0;
        for (const Tensor* t : in) {
          if (t->rank() != first.rank()) return InvalidArgument("Concat inputs have different ranks");
          for (int i = 0; i < t->rank(); ++i) {
            if (i != axis && t->dim(i) != first.dim(i)) {
              return InvalidArgument("Concat inputs " + ShapeToString(first.shape()) + " and " + ShapeToString(t->shape()) + " differ off the axis");
            }
          }
          shape[static_cast<size_t>(axis)] += t->dim(axis);
        }
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
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_ASSIGN_OR_RETURN(int64_t axis_attr, init.attrs().GetInt("axis", 0));
  MF_ASSIGN_OR_RETURN(std::vector<int64_t> split_attr, init.attrs().GetInts("split", {}));
  bool from_input = init.opset >= 13;
  size_t n_out = init.node.outputs.size();
  return Bind(
      [=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(int axis, NormalizeAxis(axis_attr, x.rank()));
        std::vector<int64_t> split = split_attr;
        if (from_input && in.size() > 1 && in[1]) {
          MF_ASSIGN_OR_RETURN(split, ReadInts(*in[1], "split"));
        }
        int64_t dim = x.dim(axis);
        if (split.empty()) {
          int64_t chunk = (dim + static_cast<int64_t>(n_out) - 1) / static_cast<int64_t>(n_out);
          for (size_t i = 0; i < n_out; ++i) split.push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * static_cast<int64_t>(i))));
        }
        if (split.size() != n_out) return InvalidArgument("split has " + std::to_string(split.size()) + " entries for " + std::to_string(n_out) + " outputs");
        int64_t total = 0;
        for (int64_t s : split) {
          if (s < 0) return InvalidArgument("split sizes must not be negative");
          total += s;
        }
        if (total != dim) return InvalidArgument("split sizes sum to " + std::to_string(total) + ", the axis has " + std::to_string(dim));
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
                        static_cast<const char*>(x.raw_data()) + (static_cast<size_t>(o * dim + start)) * inner_bytes, row);
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
        for (int64_t d : req) {
          if (d < 0) return InvalidArgument("Expand shape has a negative dim");
        }
        MF_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(in[0]->shape(), req));
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
        if (static_cast<int>(reps.size()) != in[0]->rank()) return InvalidArgument("Tile repeats must have one entry per dim");
        Shape shape = in[0]->shape();
        for (size_t i = 0; i < reps.size(); ++i) {
          if (reps[i] < 0) return InvalidArgument("Tile repeats must not be negative");
          if (__builtin_mul_overflow(shape[i], reps[i], &shape[i])) return InvalidArgument("Tile output overflows");
        }
        return Replicate(*in[0], shape, true, out[0]);
      },
      {init.dtype(0)});
}

}  // namespace

void RegisterShapeKernels(KernelRegistry* r) {
  r->Register({"Reshape", 5, ReshapeFactory, "any fixed-width"});
  r->Register({"Flatten", 1, FlattenFactory, "any fixed-width"});
  r->Register({"Squeeze", 1, [](const KernelInit& i) { return SqueezeFactory(i, false); }, "any fixed-width"});
  r->Register({"Unsqueeze", 1, [](const KernelInit& i) { return SqueezeFactory(i, true); }, "any fixed-width"});
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
