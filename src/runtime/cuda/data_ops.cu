// Device kernels that only relabel or rearrange elements: Reshape, Flatten, Squeeze, Unsqueeze
// (a device copy with a new shape), Transpose, Concat, Split, Slice, Expand and Tile (strided
// copies, data_strided.cu). Shapes, validation and error messages are the shared rules of
// ops/shape_rules.h and ops/slice_rules.h; any fixed-width element type works.
#include <string>
#include <utility>
#include <vector>

#include "runtime/cuda/data_common.h"
#include "runtime/ops/reshape_kernels.h"
#include "runtime/ops/shape_rules.h"
#include "runtime/ops/slice_rules.h"

namespace mf::runtime::cuda {
namespace {

StatusOr<BoundKernel> TransposeFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_ASSIGN_OR_RETURN(std::vector<int64_t> perm_attr, init.attrs().GetInts("perm", {}));
  return Bind(
      [perm_attr](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        int rank = x.rank();
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> perm, ops::TransposePerm(perm_attr, rank));
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
  MF_ASSIGN_OR_RETURN(int64_t axis_attr, ops::ReadConcatAxis(init));
  return Bind(
      [axis_attr](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& first = *in[0];
        MF_ASSIGN_OR_RETURN(ops::ConcatPlan plan, ops::PlanConcat(in, axis_attr));
        const Shape& shape = plan.shape;
        size_t axis = static_cast<size_t>(plan.axis);
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(first.dtype(), shape));
        std::vector<int64_t> out_strides = RowMajorStrides(shape);
        int64_t offset = 0;  // along the axis
        for (const Tensor* t : in) {
          MF_RETURN_IF_ERROR(StridedCopy(t->dtype(), t->raw_data(), out[0].raw_data(), t->shape(),
                                         RowMajorStrides(t->shape()), out_strides, 0, offset * out_strides[axis]));
          offset += t->shape()[axis];
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
        if (attrs.split_from_input) MF_RETURN_IF_ERROR(RequireHost(split_input, "split"));
        MF_ASSIGN_OR_RETURN(ops::SplitPlan plan, ops::PlanSplit(attrs, x.shape(), split_input));
        int axis = plan.axis;
        const std::vector<int64_t>& split = plan.sizes;
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

// Slice from opset 10: starts, ends, axes, steps as (host) inputs (ops::PlanSlice).
StatusOr<BoundKernel> SliceFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 1));
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 2));
  return Bind(
      [](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        static const char* const kNames[] = {"data", "starts", "ends", "axes", "steps"};
        for (size_t i = 1; i < in.size() && i < 5; ++i) MF_RETURN_IF_ERROR(RequireHost(in[i], kNames[i]));
        MF_ASSIGN_OR_RETURN(ops::SlicePlan plan, ops::PlanSlice(in));
        const Shape& shape = plan.shape;
        size_t rank = shape.size();
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), shape));
        if (out[0].num_elements() == 0) return Status::Ok();
        std::vector<int64_t> strides = RowMajorStrides(x.shape()), src_strides(rank);
        int64_t base = 0;
        for (size_t d = 0; d < rank; ++d) {
          base += plan.start[d] * strides[d];
          src_strides[d] = plan.step[d] * strides[d];
        }
        return StridedCopy(x.dtype(), x.raw_data(), out[0].raw_data(), shape, src_strides, RowMajorStrides(shape), base,
                           0);
      },
      {init.dtype(0)});
}

StatusOr<BoundKernel> ExpandFactory(const KernelInit& init) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireInput(init, 1));
  return Bind(
      [](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> req, ReadInts(*in[1], "shape"));
        MF_ASSIGN_OR_RETURN(Shape shape, ops::ExpandShape(x.shape(), req));
        MF_ASSIGN_OR_RETURN(out[0], AllocateDevice(x.dtype(), shape));
        return StridedCopy(x.dtype(), x.raw_data(), out[0].raw_data(), shape, ops::BroadcastStrides(x.shape(), shape),
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
        MF_ASSIGN_OR_RETURN(Shape shape, ops::TileShape(x.shape(), reps));
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
  ops::RegisterReshapeKernels(r, &CopyOnDevice, /*device=*/true);
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
