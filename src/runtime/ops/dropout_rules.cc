#include "runtime/ops/dropout_rules.h"

namespace mf::runtime::ops {

StatusOr<bool> ReadDropoutMaskOutput(const KernelInit& init) {
  const Node& node = init.node;
  if (node.op_type != "Dropout") return false;
  if (init.num_inputs() > 2 && init.constant_inputs[2] == nullptr && init.has_input(2)) {
    return init.Error(StatusCode::kUnimplemented, "a non-constant training_mode is not supported");
  }
  const Tensor* training_mode = init.num_inputs() > 2 ? init.constant_inputs[2] : nullptr;
  if (training_mode && training_mode->num_elements() == 1 && training_mode->dtype() == DataType::kBool &&
      training_mode->data<bool>()[0]) {
    return init.Error(StatusCode::kUnimplemented, "training mode (random dropout) is not supported");
  }
  return node.outputs.size() > 1 && node.outputs[1] != kNoValue;
}

}  // namespace mf::runtime::ops
