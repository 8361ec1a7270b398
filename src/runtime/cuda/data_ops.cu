// Device kernels that only relabel or rearrange elements: Reshape, Flatten, Squeeze, Unsqueeze
// (a device copy with a new shape), Transpose, Concat, Split, Slice, Expand and Tile (strided
// copies, data_strided.cu). Shapes, attributes, validation and error messages mirror the CPU
// kernels in cpu/shape_ops.cc and cpu/data_ops.cc; any fixed-width element type works.
#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/data_common.h"

namespace mf::runtime::cuda {
namespace {

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
        MF_ASSIGN_OR_RETURN(out[0], CopyOnDevice(x, std::move(shape)));
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
        int64_t outer = 1, inner = 1;
        for (int i = 0; i < x.rank(); ++i) (i < a ? outer : inner) *= x.dim(i);
        MF_ASSIGN_OR_RETURN(out[0], CopyOnDevice(x, {outer, inner}));
        return Status::Ok();
      },
      {init.dtype(0)});
}

// Squeeze and Unsqueeze: axes from an attribute before opset 13, from (host) input 1 after.
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
          std::vector<bool> drop(static_cast<size_t>(x.rank()), false);
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
        MF_ASSIGN_OR_RETURN(out[0], CopyOnDevice(x, std::move(shape)));
        return Status::Ok();
      },
      {init.dtype(0)});
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
        std::vector<int64_t> in_strides = RowMajorStrides(x.shape());
        Shape shape(static_cast<size_t>(rank));
        std::vector<int64_t> src_strides(static_cast<size_t>(rank));
        for (size_t i = 0; i < static_cast<size_t>(rank); ++i) {
          shape[i] = x.dim(static_cast<int>(perm[i]));
          src_strides[i] = in_strides[static_cast<size_t>(perm[i])];
        }
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), shape));
        return StridedCopy(x.dtype(), x.raw_data(), out[0].raw_data(), shape, src_strides, RowMajorStrides(shape));
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
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(first.dtype(), shape));
        std::vector<int64_t> out_strides = RowMajorStrides(shape);
        int64_t offset = 0;  // along the axis
        for (const Tensor* t : in) {
          MF_RETURN_IF_ERROR(StridedCopy(t->dtype(), t->raw_data(), out[0].raw_data(), t->shape(), RowMajorStrides(t->shape()),
                                         out_strides, 0, offset * out_strides[static_cast<size_t>(axis)]));
          offset += t->dim(axis);
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
        std::vector<int64_t> in_strides = RowMajorStrides(x.shape());
        int64_t start = 0;
        for (size_t k = 0; k < n_out; ++k) {
          Shape s = x.shape();
          s[static_cast<size_t>(axis)] = split[k];
          MF_ASSIGN_OR_RETURN(out[k], AllocateDevice(x.dtype(), s));
          MF_RETURN_IF_ERROR(StridedCopy(x.dtype(), x.raw_data(), out[k].raw_data(), s, in_strides, RowMajorStrides(s),
                                         start * in_strides[static_cast<size_t>(axis)], 0));
          start += split[k];
        }
        return Status::Ok();
      },
      std::vector<DataType>(n_out, init.dtype(0)));
}

// Slice from opset 10: starts, ends, axes, steps as (host) inputs; clamping as in the CPU kernel.
StatusOr<BoundKernel> SliceFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 1));
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 2));
  return Bind(
      [](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> starts, ReadInts(*in[1], "starts"));
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> ends, ReadInts(*in[2], "ends"));
        std::vector<int64_t> axes, steps;
        if (in.size() > 3 && in[3]) {
          MF_ASSIGN_OR_RETURN(axes, ReadInts(*in[3], "axes"));
        }
        if (in.size() > 4 && in[4]) {
          MF_ASSIGN_OR_RETURN(steps, ReadInts(*in[4], "steps"));
        }
        if (ends.size() != starts.size()) return InvalidArgument("Slice starts and ends differ in length");
        if (axes.empty()) {
          for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
        }
        if (steps.empty()) steps.assign(starts.size(), 1);
        if (axes.size() != starts.size() || steps.size() != starts.size()) return InvalidArgument("Slice axes/steps length mismatch");
        int rank = x.rank();
        std::vector<int64_t> start(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1);
        Shape shape = x.shape();
        std::vector<bool> seen(static_cast<size_t>(rank), false);
        for (size_t i = 0; i < starts.size(); ++i) {
          MF_ASSIGN_OR_RETURN(int a, NormalizeAxis(axes[i], rank));
          if (seen[static_cast<size_t>(a)]) return InvalidArgument("Slice axes repeat");
          seen[static_cast<size_t>(a)] = true;
          int64_t dim = x.dim(a), st = steps[i];
          if (st == 0) return InvalidArgument("Slice step must not be 0");
          int64_t s = starts[i], e = ends[i];
          if (s < 0) s += dim;  // no overflow: dim >= 0
          if (e < 0) e += dim;
          if (st > 0) {
            s = std::clamp<int64_t>(s, 0, dim);
            e = std::clamp<int64_t>(e, 0, dim);
          } else {
            s = std::clamp<int64_t>(s, -1, dim - 1);
            e = std::clamp<int64_t>(e, -1, dim - 1);
          }
          // Written so that huge steps (INT64_MAX) cannot overflow.
          int64_t n = st > 0 ? (e > s ? 1 + (e - s - 1) / st : 0)
                             : (s > e ? (st == std::numeric_limits<int64_t>::min() ? 1 : 1 + (s - e - 1) / -st) : 0);
          shape[static_cast<size_t>(a)] = std::max<int64_t>(0, n);
          start[static_cast<size_t>(a)] = s;
          // A dim that yields one element never advances: keep its stride small so the index
          // arithmetic cannot overflow with a huge step.
          step[static_cast<size_t>(a)] = n <= 1 ? 1 : st;
        }
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), shape));
        if (out[0].num_elements() == 0) return Status::Ok();
        std::vector<int64_t> strides = RowMajorStrides(x.shape()), src_strides(static_cast<size_t>(rank));
        int64_t base = 0;
        for (size_t d = 0; d < static_cast<size_t>(rank); ++d) {
          base += start[d] * strides[d];
          src_strides[d] = step[d] * strides[d];
        }
        return StridedCopy(x.dtype(), x.raw_data(), out[0].raw_data(), shape, src_strides, RowMajorStrides(shape), base, 0);
      },
      {init.dtype(0)});
}

// Strides of `x` seen from an output of `out_rank` dims when `x` is aligned to its trailing dims
// (numpy broadcasting): 0 for missing leading dims and dims of extent 1.
std::vector<int64_t> BroadcastSourceStrides(const Tensor& x, size_t out_rank) {
  std::vector<int64_t> strides(out_rank, 0);
  std::vector<int64_t> own = RowMajorStrides(x.shape());
  size_t lead = out_rank - static_cast<size_t>(x.rank());
  for (size_t i = 0; i < static_cast<size_t>(x.rank()); ++i) strides[lead + i] = x.shape()[i] == 1 ? 0 : own[i];
  return strides;
}

StatusOr<BoundKernel> ExpandFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireInput(init, 1));
  return Bind(
      [](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> req, ReadInts(*in[1], "shape"));
        for (int64_t d : req) {
          if (d < 0) return InvalidArgument("Expand shape has a negative dim");
        }
        // Numpy broadcast of the input's shape and the requested one (the CPU kernel's message).
        size_t rank = std::max(x.shape().size(), req.size());
        Shape shape(rank);
        for (size_t i = 0; i < rank; ++i) {
          int64_t da = i < rank - x.shape().size() ? 1 : x.shape()[i - (rank - x.shape().size())];
          int64_t db = i < rank - req.size() ? 1 : req[i - (rank - req.size())];
          if (da != db && da != 1 && db != 1) {
            return InvalidArgument("shapes " + ShapeToString(x.shape()) + " and " + ShapeToString(req) + " cannot be broadcast");
          }
          shape[i] = da == 1 ? db : da;
        }
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), shape));
        return StridedCopy(x.dtype(), x.raw_data(), out[0].raw_data(), shape, BroadcastSourceStrides(x, rank),
                           RowMajorStrides(shape));
      },
      {init.dtype(0)});
}

// Tile: output dim i of extent reps[i] * d[i] is the pair (repeat, position) in row-major order,
// so the copy iterates over [r0, d0, r1, d1, ...] with source strides [0, s0, 0, s1, ...].
StatusOr<BoundKernel> TileFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireInput(init, 1));
  return Bind(
      [](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> reps, ReadInts(*in[1], "repeats"));
        if (static_cast<int>(reps.size()) != x.rank()) return InvalidArgument("Tile repeats must have one entry per dim");
        Shape shape = x.shape();
        for (size_t i = 0; i < reps.size(); ++i) {
          if (reps[i] < 0) return InvalidArgument("Tile repeats must not be negative");
          if (__builtin_mul_overflow(shape[i], reps[i], &shape[i])) return InvalidArgument("Tile output overflows");
        }
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), shape));
        std::vector<int64_t> own = RowMajorStrides(x.shape());
        std::vector<int64_t> dims, src_strides;
        for (size_t i = 0; i < reps.size(); ++i) {
          dims.push_back(reps[i]);
          src_strides.push_back(0);
          dims.push_back(x.shape()[i]);
          src_strides.push_back(own[i]);
        }
        return StridedCopy(x.dtype(), x.raw_data(), out[0].raw_data(), dims, src_strides, RowMajorStrides(dims));
      },
      {init.dtype(0)});
}

}  // namespace

void RegisterDataKernels(KernelRegistry* r) {
  r->Register({"Reshape", 5, ReshapeFactory, "any fixed-width", {1}});
  r->Register({"Flatten", 1, FlattenFactory, "any fixed-width"});
  r->Register({"Squeeze", 1, [](const KernelInit& i) { return SqueezeFactory(i, false); }, "any fixed-width", {1}});
  r->Register({"Unsqueeze", 1, [](const KernelInit& i) { return SqueezeFactory(i, true); }, "any fixed-width", {1}});
  r->Register({"Transpose", 1, TransposeFactory, "any fixed-width"});
  r->Register({"Concat", 4, ConcatFactory, "any fixed-width"});
  r->Register({"Split", 2, SplitFactory, "any fixed-width", {1}});
  r->Register({"Slice", 10, SliceFactory, "any fixed-width", {1, 2, 3, 4}});
  r->Register({"Expand", 8, ExpandFactory, "any fixed-width", {1}});
  r->Register({"Tile", 6, TileFactory, "any fixed-width", {1}});
  RegisterGatherKernels(r);
  RegisterResizeKernel(r);
}

}  // namespace mf::runtime::cuda
