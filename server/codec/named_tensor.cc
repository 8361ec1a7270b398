#include "server/codec/named_tensor.h"

#include <string>

namespace mf::codec {

Status CheckAgainstDeclared(const runtime::TensorInfo& declared, const runtime::Tensor& tensor) {
  if (tensor.dtype() != declared.dtype) {
    return InvalidArgument("input '" + declared.name + "' has type " +
                           std::string(runtime::DataTypeName(tensor.dtype())) + " but the model expects " +
                           std::string(runtime::DataTypeName(declared.dtype)));
  }
  bool shape_ok = tensor.shape().size() == declared.shape.size();
  for (size_t i = 0; shape_ok && i < declared.shape.size(); ++i) {
    shape_ok = declared.shape[i] < 0 || declared.shape[i] == tensor.shape()[i];
  }
  if (!shape_ok) {
    return InvalidArgument("input '" + declared.name + "' has shape " + runtime::ShapeToString(tensor.shape()) +
                           " but the model expects " + runtime::ShapeToString(declared.shape) + " (-1: any size)");
  }
  return Status::Ok();
}

StatusOr<std::vector<runtime::Tensor>> BindInputs(const std::vector<runtime::TensorInfo>& declared,
                                                  std::vector<NamedTensor>&& inputs) {
  // Validate everything before moving anything, so a refused request leaves `inputs` intact.
  std::vector<int> slot_of_declared(declared.size(), -1);
  for (size_t i = 0; i < inputs.size(); ++i) {
    size_t d = 0;
    while (d < declared.size() && declared[d].name != inputs[i].name) ++d;
    if (d == declared.size()) {
      std::string names;
      for (const auto& info : declared) names += (names.empty() ? "" : ", ") + info.name;
      return InvalidArgument("unknown input '" + inputs[i].name + "'; the model's inputs are: " + names);
    }
    if (slot_of_declared[d] >= 0) return InvalidArgument("input '" + inputs[i].name + "' is given twice");
    slot_of_declared[d] = static_cast<int>(i);
    MF_RETURN_IF_ERROR(CheckAgainstDeclared(declared[d], inputs[i].tensor));
  }
  for (size_t d = 0; d < declared.size(); ++d) {
    if (slot_of_declared[d] < 0) return InvalidArgument("missing input '" + declared[d].name + "'");
  }
  std::vector<runtime::Tensor> ordered;
  ordered.reserve(declared.size());
  for (int slot : slot_of_declared) ordered.push_back(std::move(inputs[static_cast<size_t>(slot)].tensor));
  return ordered;
}

}  // namespace mf::codec
