#include "runtime/ops/input_checks.h"

#include <string>

namespace mf::runtime::ops {

Status RequireInput(const KernelInit& init, size_t i) {
  if (!init.has_input(i)) return init.Error(StatusCode::kInvalidArgument, "missing input " + std::to_string(i));
  return Status::Ok();
}

Status RequireFixedWidth(const KernelInit& init, size_t i) {
  MF_RETURN_IF_ERROR(RequireInput(init, i));
  if (init.dtype(i) == DataType::kString)
    return init.Error(StatusCode::kUnimplemented, "string tensors are not supported");
  return Status::Ok();
}

Status RequireInputsOfOneType(const KernelInit& init) {
  if (init.num_inputs() == 0) return init.Error(StatusCode::kInvalidArgument, "needs at least one input");
  for (size_t i = 0; i < init.num_inputs(); ++i) {
    if (!init.has_input(i) || init.dtype(i) != init.dtype(0)) {
      return init.Error(StatusCode::kInvalidArgument, "inputs must all be present and of one type");
    }
  }
  return Status::Ok();
}

Status UnsupportedElementType(const KernelInit& init, DataType t) {
  return init.Error(StatusCode::kUnimplemented, "element type " + std::string(DataTypeName(t)) + " is not supported");
}

}  // namespace mf::runtime::ops
