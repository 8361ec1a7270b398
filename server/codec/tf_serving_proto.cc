#include "server/codec/tf_serving_proto.h"

#include <string>
#include <utility>

namespace mf::codec {

StatusOr<std::vector<runtime::Tensor>> InputsFromPredictRequest(const tensorflow::serving::PredictRequest& request,
                                                                const ModelSignature& signature) {
  const auto& inputs = request.inputs();
  for (const auto& [name, proto] : inputs) {
    bool declared = false;
    for (const auto& info : signature.inputs) declared = declared || info.name == name;
    if (!declared) {
      std::string names;
      for (const auto& info : signature.inputs) names += (names.empty() ? "" : ", ") + info.name;
      return InvalidArgument("unknown input '" + name + "'; the model's inputs are: " + names);
    }
  }
  for (const auto& info : signature.inputs) {
    if (!inputs.contains(info.name)) return InvalidArgument("missing input '" + info.name + "'");
  }
  std::vector<runtime::Tensor> tensors;
  tensors.reserve(signature.inputs.size());
  for (const auto& info : signature.inputs) {
    auto tensor = TensorFromProto(inputs.at(info.name));
    if (!tensor.ok()) return tensor.status().WithContext("input '" + info.name + "'");
    MF_RETURN_IF_ERROR(CheckAgainstDeclared(info, *tensor));
    tensors.push_back(std::move(tensor).value());
  }
  return tensors;
}

StatusOr<std::vector<size_t>> SelectOutputs(const ModelSignature& signature,
                                            const google::protobuf::RepeatedPtrField<std::string>& output_filter) {
  std::vector<size_t> selected;
  if (output_filter.empty()) {
    for (size_t i = 0; i < signature.outputs.size(); ++i) selected.push_back(i);
    return selected;
  }
  for (const std::string& name : output_filter) {
    size_t i = 0;
    while (i < signature.outputs.size() && signature.outputs[i].name != name) ++i;
    if (i == signature.outputs.size()) {
      std::string names;
      for (const auto& output : signature.outputs) names += (names.empty() ? "" : ", ") + output.name;
      return InvalidArgument("output tensor alias not found in signature: " + name +
                             " Outputs expected to be in the set {" + names + "}.");
    }
    for (size_t already : selected) {
      if (already == i) return InvalidArgument("duplicate output tensor alias in output_filter: " + name);
    }
    selected.push_back(i);
  }
  return selected;
}

void AddOutputsToPredictResponse(std::span<const NamedTensorView> outputs,
                                 tensorflow::serving::PredictResponse* response) {
  auto* map = response->mutable_outputs();
  for (const auto& output : outputs) {
    TensorToProto(*output.tensor, TensorProtoEncoding::kTensorContent, &(*map)[std::string(output.name)]);
  }
}

Status FillModelMetadataResponse(std::string_view model_name, int64_t version,
                                 std::span<const ModelSignature> signatures,
                                 const google::protobuf::RepeatedPtrField<std::string>& metadata_fields,
                                 tensorflow::serving::GetModelMetadataResponse* response) {
  if (metadata_fields.empty())
    return InvalidArgument("GetModelMetadataRequest must specify at least one metadata_field");
  for (const std::string& field : metadata_fields) {
    if (field != "signature_def") return InvalidArgument("Metadata field " + field + " is not supported");
  }
  auto* spec = response->mutable_model_spec();
  spec->set_name(std::string(model_name));
  spec->mutable_version()->set_value(version);
  tensorflow::serving::SignatureDefMap map;
  for (const auto& signature : signatures) SignatureToProto(signature, &(*map.mutable_signature_def())[signature.name]);
  (*response->mutable_metadata())["signature_def"].PackFrom(map);
  return Status::Ok();
}

void FillModelStatusResponse(std::span<const ModelVersionStatus> versions,
                             tensorflow::serving::GetModelStatusResponse* response) {
  for (const auto& version : versions) VersionStatusToProto(version, response->add_model_version_status());
}

}  // namespace mf::codec
