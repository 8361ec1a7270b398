#include "server/codec/tf_serving_proto.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

namespace mf::codec {
namespace {

// TF Serving lists names as its GetMapKeys does: sorted, joined by ",".
template <typename Names>
std::string JoinSorted(const Names& names) {
  std::string out;
  for (const std::string& name : std::set<std::string>(names.begin(), names.end())) {
    out += (out.empty() ? "" : ",") + name;
  }
  return out;
}

std::vector<std::string> NamesOf(const std::vector<runtime::TensorInfo>& infos) {
  std::vector<std::string> names;
  for (const auto& info : infos) names.push_back(info.name);
  return names;
}

}  // namespace

StatusOr<std::vector<runtime::Tensor>> InputsFromPredictRequest(const tensorflow::serving::PredictRequest& request,
                                                                const std::vector<runtime::TensorInfo>& declared) {
  const auto& inputs = request.inputs();
  if (static_cast<size_t>(inputs.size()) != declared.size()) {
    std::set<std::string> sent;
    for (const auto& [name, proto] : inputs) sent.insert(name);
    const std::vector<std::string> wanted = NamesOf(declared);
    std::vector<std::string> extra;
    std::vector<std::string> missing;
    for (const std::string& name : sent) {
      if (std::find(wanted.begin(), wanted.end(), name) == wanted.end()) extra.push_back(name);
    }
    for (const std::string& name : wanted) {
      if (sent.count(name) == 0) missing.push_back(name);
    }
    return InvalidArgument("input size does not match signature: " + std::to_string(inputs.size()) +
                           "!=" + std::to_string(declared.size()) + " len({" + JoinSorted(sent) + "}) != len({" +
                           JoinSorted(wanted) + "}). Sent extra: {" + JoinSorted(extra) + "}. Missing but required: {" +
                           JoinSorted(missing) + "}.");
  }
  for (const auto& [name, proto] : inputs) {
    bool is_declared = false;
    for (const auto& info : declared) is_declared = is_declared || info.name == name;
    if (!is_declared) {
      return InvalidArgument("input tensor alias not found in signature: " + name +
                             ". Inputs expected to be in the set {" + JoinSorted(NamesOf(declared)) + "}.");
    }
  }
  std::vector<runtime::Tensor> tensors;
  tensors.reserve(declared.size());
  for (const auto& info : declared) {
    auto tensor = TensorFromProto(inputs.at(info.name));
    if (!tensor.ok()) return tensor.status().WithContext("input '" + info.name + "'");
    MF_RETURN_IF_ERROR(CheckAgainstDeclared(info, *tensor));
    tensors.push_back(std::move(tensor).value());
  }
  return tensors;
}

StatusOr<std::vector<size_t>> SelectOutputs(const std::vector<runtime::TensorInfo>& declared,
                                            const google::protobuf::RepeatedPtrField<std::string>& output_filter) {
  std::vector<size_t> selected;
  if (output_filter.empty()) {
    for (size_t i = 0; i < declared.size(); ++i) selected.push_back(i);
    return selected;
  }
  for (const std::string& name : output_filter) {
    size_t i = 0;
    while (i < declared.size() && declared[i].name != name) ++i;
    if (i == declared.size()) {
      return InvalidArgument("output tensor alias not found in signature: " + name +
                             " Outputs expected to be in the set {" + JoinSorted(NamesOf(declared)) + "}.");
    }
    for (size_t already : selected) {
      if (already == i) return InvalidArgument("duplicate output tensor alias: " + name);
    }
    selected.push_back(i);
  }
  return selected;
}

void AddOutputsToPredictResponse(std::span<const NamedTensorView> outputs, TensorProtoEncoding encoding,
                                 tensorflow::serving::PredictResponse* response) {
  auto* map = response->mutable_outputs();
  for (const auto& output : outputs) TensorToProto(*output.tensor, encoding, &(*map)[std::string(output.name)]);
}

Status CheckMetadataFields(const google::protobuf::RepeatedPtrField<std::string>& metadata_fields) {
  if (metadata_fields.empty()) {
    return InvalidArgument("GetModelMetadataRequest must specify at least one metadata_field");
  }
  for (const std::string& field : metadata_fields) {
    if (field != "signature_def") return InvalidArgument("Metadata field " + field + " is not supported");
  }
  return Status::Ok();
}

void FillModelMetadataResponse(std::string_view model_name, int64_t version, std::span<const ModelSignature> signatures,
                               tensorflow::serving::GetModelMetadataResponse* response) {
  auto* spec = response->mutable_model_spec();
  spec->set_name(std::string(model_name));
  spec->mutable_version()->set_value(version);
  tensorflow::serving::SignatureDefMap map;
  for (const auto& signature : signatures) SignatureToProto(signature, &(*map.mutable_signature_def())[signature.name]);
  (*response->mutable_metadata())["signature_def"].PackFrom(map);
}

void FillModelStatusResponse(std::span<const ModelVersionStatus> versions,
                             tensorflow::serving::GetModelStatusResponse* response) {
  for (const auto& version : versions) VersionStatusToProto(version, response->add_model_version_status());
}

}  // namespace mf::codec
