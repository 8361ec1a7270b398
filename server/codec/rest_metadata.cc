#include "server/codec/rest_metadata.h"

#include <string>

#include "server/codec/json_writer.h"
#include "server/codec/tensor_proto.h"

namespace mf::codec {
namespace {

void AppendTensorInfo(std::string* out, const runtime::TensorInfo& info) {
  out->append("{\"dtype\":");
  json::AppendString(out, tensorflow::DataType_Name(ToTfDataType(info.dtype)));
  out->append(",\"tensor_shape\":{\"dim\":[");
  for (size_t i = 0; i < info.shape.size(); ++i) {
    if (i) out->push_back(',');
    // proto3 JSON writes int64 as a string.
    out->append("{\"size\":\"");
    json::AppendInt(out, info.shape[i]);
    out->append("\",\"name\":\"\"}");
  }
  out->append("],\"unknown_rank\":false},\"name\":");
  json::AppendString(out, info.name);
  out->push_back('}');
}

void AppendTensorMap(std::string* out, const std::vector<runtime::TensorInfo>& infos) {
  out->push_back('{');
  for (size_t i = 0; i < infos.size(); ++i) {
    if (i) out->push_back(',');
    json::AppendString(out, infos[i].name);
    out->push_back(':');
    AppendTensorInfo(out, infos[i]);
  }
  out->push_back('}');
}

}  // namespace

std::string WriteRestModelStatus(std::span<const ModelVersionStatus> versions) {
  std::string out = "{\"model_version_status\":[";
  for (size_t i = 0; i < versions.size(); ++i) {
    const auto& v = versions[i];
    if (i) out.push_back(',');
    out.append("{\"version\":\"");
    json::AppendInt(&out, v.version);
    out.append("\",\"state\":");
    json::AppendString(&out, ModelVersionStateName(v.state));
    out.append(",\"status\":{\"error_code\":");
    json::AppendString(&out, StatusCodeName(v.status.code()));
    out.append(",\"error_message\":");
    json::AppendString(&out, v.status.message());
    out.append("}}");
  }
  out.append("]}");
  return out;
}

std::string WriteRestModelMetadata(std::string_view model_name, int64_t version,
                                   std::span<const ModelSignature> signatures) {
  std::string out = "{\"model_spec\":{\"name\":";
  json::AppendString(&out, model_name);
  out.append(",\"signature_name\":\"\",\"version\":\"");
  json::AppendInt(&out, version);
  out.append("\"},\"metadata\":{\"signature_def\":{\"signature_def\":{");
  for (size_t i = 0; i < signatures.size(); ++i) {
    const auto& signature = signatures[i];
    if (i) out.push_back(',');
    json::AppendString(&out, signature.name);
    out.append(":{\"inputs\":");
    AppendTensorMap(&out, signature.inputs);
    out.append(",\"outputs\":");
    AppendTensorMap(&out, signature.outputs);
    out.append(",\"method_name\":");
    json::AppendString(&out, signature.method_name);
    out.push_back('}');
  }
  out.append("}}}}");
  return out;
}

}  // namespace mf::codec
