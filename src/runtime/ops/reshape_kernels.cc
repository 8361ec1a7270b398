#include "runtime/ops/reshape_kernels.h"

#include <string>
#include <vector>

#include "runtime/ops/indexing.h"
#include "runtime/ops/input_checks.h"
#include "runtime/ops/shape_rules.h"

namespace mf::runtime::ops {
namespace {

// Shape and axes inputs are read on the host whatever the backend.
StatusOr<std::vector<int64_t>> ReadHostInts(const Tensor& t, const char* what) {
  if (t.location() != Location::kHost) return Internal(std::string(what) + " must be a host tensor");
  return ReadInts(t, what);
}

// Output 0 as `x` in `shape`: the input's own tensor relabelled when the plan handed it over
// (Kernel::in_place_input: nothing reads it after this node), else a copy.
Status Relabel(const Tensor& x, Shape shape, CopyWithShapeFn copy, std::vector<Tensor>& out) {
  if (out[0].raw_data() == nullptr) {
    MF_ASSIGN_OR_RETURN(out[0], copy(x, std::move(shape)));
    return Status::Ok();
  }
  return out[0].Reshape(std::move(shape));
}

StatusOr<BoundKernel> ReshapeFactory(const KernelInit& init, CopyWithShapeFn copy) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_RETURN_IF_ERROR(RequireInput(init, 1));
  MF_ASSIGN_OR_RETURN(int64_t allowzero, init.attrs().GetInt("allowzero", 0));
  return Bind(
      [allowzero, copy](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(std::vector<int64_t> req, ReadHostInts(*in[1], "shape"));
        MF_ASSIGN_OR_RETURN(Shape shape, ReshapeShape(x.shape(), x.num_elements(), req, allowzero != 0));
        return Relabel(x, std::move(shape), copy, out);
      },
      {init.dtype(0)}, /*in_place_input=*/0);
}

StatusOr<BoundKernel> FlattenFactory(const KernelInit& init, CopyWithShapeFn copy) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  MF_ASSIGN_OR_RETURN(int64_t axis_attr, init.attrs().GetInt("axis", 1));
  return Bind(
      [axis_attr, copy](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        MF_ASSIGN_OR_RETURN(Shape shape, FlattenShape(x.shape(), axis_attr));
        return Relabel(x, std::move(shape), copy, out);
      },
      {init.dtype(0)}, /*in_place_input=*/0);
}

// Squeeze and Unsqueeze: axes from an attribute before opset 13, from input 1 after.
StatusOr<BoundKernel> SqueezeFactory(const KernelInit& init, bool unsqueeze, CopyWithShapeFn copy) {
  MF_RETURN_IF_ERROR(RequireFixedWidth(init, 0));
  bool from_input = init.opset >= 13;
  MF_ASSIGN_OR_RETURN(std::vector<int64_t> attr_axes, init.attrs().GetInts("axes", {}));
  return Bind(
      [=](const std::vector<const Tensor*>& in, std::vector<Tensor>& out) -> Status {
        const Tensor& x = *in[0];
        std::vector<int64_t> axes = attr_axes;
        if (from_input && in.size() > 1 && in[1]) {
          MF_ASSIGN_OR_RETURN(axes, ReadHostInts(*in[1], "axes"));
        }
        MF_ASSIGN_OR_RETURN(Shape shape, unsqueeze ? UnsqueezeShape(x.shape(), axes) : SqueezeShape(x.shape(), axes));
        return Relabel(x, std::move(shape), copy, out);
      },
      {init.dtype(0)}, /*in_place_input=*/0);
}

}  // namespace

void RegisterReshapeKernels(KernelRegistry* r, CopyWithShapeFn copy, bool device) {
  std::vector<int> host = device ? std::vector<int>{1} : std::vector<int>{};
  r->Register({"Reshape", 5, [copy](const KernelInit& i) { return ReshapeFactory(i, copy); }, "any fixed-width", host});
  r->Register({"Flatten", 1, [copy](const KernelInit& i) { return FlattenFactory(i, copy); }, "any fixed-width", {}});
  r->Register(
      {"Squeeze", 1, [copy](const KernelInit& i) { return SqueezeFactory(i, false, copy); }, "any fixed-width", host});
  r->Register(
      {"Unsqueeze", 1, [copy](const KernelInit& i) { return SqueezeFactory(i, true, copy); }, "any fixed-width", host});
}

}  // namespace mf::runtime::ops
