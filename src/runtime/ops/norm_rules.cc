#include "runtime/ops/norm_rules.h"

#include <string>

#include "runtime/ops/indexing.h"

namespace mf::runtime::ops {

StatusOr<float> ReadBatchNormEpsilon(const KernelInit& init) {
  MF_ASSIGN_OR_RETURN(float eps, init.attrs().GetFloat("epsilon", 1e-5f));
  MF_ASSIGN_OR_RETURN(int64_t training, init.attrs().GetInt("training_mode", 0));
  MF_ASSIGN_OR_RETURN(int64_t spatial, init.attrs().GetInt("spatial", 1));
  if (training || spatial != 1)
    return init.Error(StatusCode::kUnimplemented, "only inference mode (spatial) is supported");
  for (size_t i = 1; i < init.node.outputs.size(); ++i) {
    if (init.node.outputs[i] != kNoValue)
      return init.Error(StatusCode::kUnimplemented, "training outputs are not supported");
  }
  return eps;
}

StatusOr<BatchNormShape> CheckBatchNorm(const Tensor& x, const Tensor* const params[4]) {
  if (x.rank() < 2) return InvalidArgument("BatchNormalization input must be at least 2-D");
  BatchNormShape s;
  s.n = x.dim(0);
  s.c = x.dim(1);
  for (size_t i = 0; i < 4; ++i) {
    if (params[i]->num_elements() != s.c) {
      return InvalidArgument("BatchNormalization parameter " + std::to_string(i + 1) + " must have C elements");
    }
  }
  s.inner = s.n * s.c == 0 ? 0 : x.num_elements() / (s.n * s.c);
  return s;
}

StatusOr<LayerNormAttributes> ReadLayerNormAttributes(const KernelInit& init) {
  LayerNormAttributes a;
  MF_ASSIGN_OR_RETURN(a.axis, init.attrs().GetInt("axis", -1));
  MF_ASSIGN_OR_RETURN(a.epsilon, init.attrs().GetFloat("epsilon", 1e-5f));
  return a;
}

StatusOr<LayerNormPlan> PlanLayerNorm(const Shape& x, int64_t axis_attr) {
  LayerNormPlan p;
  MF_ASSIGN_OR_RETURN(p.axis, NormalizeAxis(axis_attr, static_cast<int>(x.size())));
  size_t axis = static_cast<size_t>(p.axis);
  for (size_t i = 0; i < x.size(); ++i) (i < axis ? p.rows : p.cols) *= x[i];
  p.norm_shape.assign(x.begin() + p.axis, x.end());
  p.stat_shape = x;
  for (size_t i = axis; i < x.size(); ++i) p.stat_shape[i] = 1;
  return p;
}

Status CheckLayerNormParameter(const Shape& parameter, const Shape& norm_shape) {
  MF_ASSIGN_OR_RETURN(Shape broadcast, BroadcastShapes(parameter, norm_shape));
  if (broadcast != norm_shape) {
    return InvalidArgument("LayerNormalization scale/bias " + ShapeToString(parameter) + " does not broadcast to " +
                           ShapeToString(norm_shape));
  }
  return Status::Ok();
}

}  // namespace mf::runtime::ops
