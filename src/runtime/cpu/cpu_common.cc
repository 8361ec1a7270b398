#include "runtime/cpu/cpu_common.h"

namespace mf::runtime::cpu {

Status RequireFloat(const KernelInit& init, size_t i) {
  if (!init.has_input(i)) return init.Error(StatusCode::kInvalidArgument, "missing input " + std::to_string(i));
  if (init.dtype(i) != DataType::kFloat32) {
    return init.Error(StatusCode::kUnimplemented, "input " + std::to_string(i) + " of type " +
                                                      std::string(DataTypeName(init.dtype(i))) +
                                                      " is not supported (float32 only)");
  }
  return Status::Ok();
}

}  // namespace mf::runtime::cpu
