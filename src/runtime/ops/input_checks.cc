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

}  // namespace mf::runtime::ops
