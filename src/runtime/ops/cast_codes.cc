#include "runtime/ops/cast_codes.h"

#include <string>
#include <utility>

namespace mf::runtime::ops {

StatusOr<DataType> ReadCastTarget(const KernelInit& init) {
  MF_ASSIGN_OR_RETURN(int64_t to, init.attrs().GetInt("to", 0));
  static const std::pair<int64_t, DataType> kCodes[] = {
      {1, DataType::kFloat32},  {2, DataType::kUInt8},   {3, DataType::kInt8},   {4, DataType::kUInt16},
      {5, DataType::kInt16},    {6, DataType::kInt32},   {7, DataType::kInt64},  {9, DataType::kBool},
      {11, DataType::kFloat64}, {12, DataType::kUInt32}, {13, DataType::kUInt64}};
  for (const auto& [code, type] : kCodes) {
    if (code == to) return type;
  }
  return init.Error(StatusCode::kUnimplemented, "cast to ONNX type " + std::to_string(to) + " is not supported");
}

}  // namespace mf::runtime::ops
