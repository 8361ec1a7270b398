#include "server/codec/kserve_json.h"

#include <utility>

#include "server/codec/json_tensor_reader.h"
#include "server/codec/json_writer.h"
#include "server/codec/kserve_raw.h"

namespace mf::codec {
namespace {

namespace od = simdjson::ondemand;
using json::ParseError;

// Appends every scalar of a (possibly nested) list, row-major; the v2 protocol allows both the
// flat and the nested form and only the element count matters.
Status AppendFlattened(od::value value, int depth, json::ValueAccumulator* values) {
  od::json_type type;
  if (value.type().get(type) || type != od::json_type::array) return values->Append(value);
  if (depth >= json::kMaxNesting) {
    return InvalidArgument("data is nested deeper than " + std::to_string(json::kMaxNesting) + " levels");
  }
  od::array array;
  if (auto error = value.get_array().get(array)) return ParseError(error);
  for (auto element : array) {
    od::value child;
    if (auto error = element.get(child)) return ParseError(error);
    if (!values->TryAppendNumber(child)) MF_RETURN_IF_ERROR(AppendFlattened(child, depth + 1, values));
  }
  return Status::Ok();
}

// Looks `key` up in `object`; NOT_FOUND-like absence is reported through `found`.
StatusOr<od::value> FindField(od::object& object, std::string_view key, bool* found) {
  od::value value;
  auto error = object.find_field_unordered(key).get(value);
  *found = error == simdjson::SUCCESS;
  if (error && error != simdjson::NO_SUCH_FIELD) return ParseError(error);
  return value;
}

StatusOr<bool> GetBool(od::value value, std::string_view what) {
  bool b;
  if (value.get_bool().get(b)) return InvalidArgument(std::string(what) + " must be true or false");
  return b;
}

// The input's "parameters" object: binary_data_size (when the tensor is in the binary part).
StatusOr<std::optional<uint64_t>> BinaryDataSize(od::object& input, const std::string& what) {
  bool found = false;
  MF_ASSIGN_OR_RETURN(od::value parameters, FindField(input, "parameters", &found));
  if (!found) return std::optional<uint64_t>();
  od::object object;
  if (parameters.get_object().get(object)) return InvalidArgument(what + ": 'parameters' must be an object");
  std::optional<uint64_t> size;
  for (auto field : object) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return ParseError(error);
    if (key != "binary_data_size") continue;
    uint64_t n;
    if (field.value().get_uint64().get(n)) {
      return InvalidArgument(what + ": binary_data_size must be a non-negative integer");
    }
    size = n;
  }
  return size;
}

StatusOr<NamedTensor> ParseInput(od::value value, size_t index, std::string_view binary, size_t* binary_offset) {
  std::string what = "input " + std::to_string(index);
  od::object input;
  if (value.get_object().get(input)) return InvalidArgument(what + " must be an object");

  bool found = false;
  MF_ASSIGN_OR_RETURN(od::value name_value, FindField(input, "name", &found));
  if (!found) return InvalidArgument(what + " has no 'name'");
  MF_ASSIGN_OR_RETURN(std::string_view name_view, json::GetString(name_value, "name"));
  NamedTensor result;
  result.name = std::string(name_view);
  what = "input '" + result.name + "'";

  MF_ASSIGN_OR_RETURN(od::value datatype_value, FindField(input, "datatype", &found));
  if (!found) return InvalidArgument(what + " has no 'datatype'");
  MF_ASSIGN_OR_RETURN(std::string_view datatype, json::GetString(datatype_value, "datatype"));
  runtime::DataType dtype;
  if (!runtime::DataTypeFromName(datatype, &dtype)) {
    return InvalidArgument(what + ": unknown datatype '" + std::string(datatype) +
                           "' (expected BOOL, UINT8..UINT64, INT8..INT64, FP16, BF16, FP32, FP64 or BYTES)");
  }

  MF_ASSIGN_OR_RETURN(od::value shape_value, FindField(input, "shape", &found));
  if (!found) return InvalidArgument(what + " has no 'shape'");
  od::array shape_array;
  if (shape_value.get_array().get(shape_array)) return InvalidArgument(what + ": 'shape' must be a list of integers");
  runtime::Shape shape;
  for (auto element : shape_array) {
    int64_t d;
    if (element.get_int64().get(d)) return InvalidArgument(what + ": 'shape' must be a list of integers");
    if (shape.size() >= static_cast<size_t>(json::kMaxNesting)) {
      return InvalidArgument(what + ": rank exceeds the limit of " + std::to_string(json::kMaxNesting));
    }
    shape.push_back(d);
  }
  MF_RETURN_IF_ERROR(CheckRequestShape(dtype, shape, what));
  const int64_t n = runtime::NumElements(shape);

  MF_ASSIGN_OR_RETURN(std::optional<uint64_t> binary_size, BinaryDataSize(input, what));
  MF_ASSIGN_OR_RETURN(od::value data, FindField(input, "data", &found));
  if (binary_size) {
    if (found) return InvalidArgument(what + " has both 'data' and parameters.binary_data_size");
    if (*binary_size > binary.size() - *binary_offset) {
      return InvalidArgument(what + ": binary_data_size " + std::to_string(*binary_size) + " exceeds the " +
                             std::to_string(binary.size() - *binary_offset) + " binary bytes left in the body");
    }
    std::string_view raw = binary.substr(*binary_offset, *binary_size);
    *binary_offset += *binary_size;
    MF_ASSIGN_OR_RETURN(result.tensor, TensorFromV2Raw(dtype, std::move(shape), raw, what));
    return result;
  }
  if (!found) return InvalidArgument(what + " has neither 'data' nor parameters.binary_data_size");
  json::ValueAccumulator values(dtype, {.allow_base64_objects = false});
  Status status = AppendFlattened(data, 0, &values);
  if (!status.ok()) return status.WithContext(what);
  if (values.count() != n) {
    return InvalidArgument(what + ": 'data' has " + std::to_string(values.count()) + " values but shape " +
                           runtime::ShapeToString(shape) + " needs " + std::to_string(n));
  }
  MF_ASSIGN_OR_RETURN(result.tensor, values.Finish(std::move(shape)));
  return result;
}

Status ParseRequestedOutput(od::value value, V2InferRequest* request) {
  od::object output;
  if (value.get_object().get(output)) return InvalidArgument("each requested output must be an object");
  V2RequestedOutput requested;
  bool has_name = false;
  for (auto field : output) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return ParseError(error);
    od::value v;
    if (auto error = field.value().get(v)) return ParseError(error);
    if (key == "name") {
      MF_ASSIGN_OR_RETURN(std::string_view name, json::GetString(v, "name"));
      requested.name = std::string(name);
      has_name = true;
    } else if (key == "parameters") {
      od::object parameters;
      if (v.get_object().get(parameters)) return InvalidArgument("output 'parameters' must be an object");
      for (auto parameter : parameters) {
        std::string_view pkey;
        if (auto error = parameter.unescaped_key().get(pkey)) return ParseError(error);
        if (pkey != "binary_data") continue;
        od::value pv;
        if (auto error = parameter.value().get(pv)) return ParseError(error);
        MF_ASSIGN_OR_RETURN(bool binary, GetBool(pv, "binary_data"));
        requested.binary_data = binary;
      }
    }
  }
  if (!has_name) return InvalidArgument("a requested output has no 'name'");
  for (const auto& other : request->outputs) {
    if (other.name == requested.name) return InvalidArgument("output '" + requested.name + "' is requested twice");
  }
  request->outputs.push_back(std::move(requested));
  return Status::Ok();
}

void AppendShape(std::string* out, const runtime::Shape& shape) {
  out->push_back('[');
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out->push_back(',');
    json::AppendInt(out, shape[i]);
  }
  out->push_back(']');
}

void AppendTensorMetadata(std::string* out, const std::vector<runtime::TensorInfo>& infos) {
  out->push_back('[');
  for (size_t i = 0; i < infos.size(); ++i) {
    if (i) out->push_back(',');
    out->append("{\"name\":");
    json::AppendString(out, infos[i].name);
    out->append(",\"datatype\":");
    json::AppendString(out, runtime::DataTypeName(infos[i].dtype));
    out->append(",\"shape\":");
    AppendShape(out, infos[i].shape);
    out->push_back('}');
  }
  out->push_back(']');
}

}  // namespace

StatusOr<V2InferRequest> ParseV2InferRequest(std::string_view body, std::optional<size_t> json_length) {
  std::string_view json_part = body;
  std::string_view binary;
  if (json_length) {
    if (*json_length > body.size()) {
      return InvalidArgument("Inference-Header-Content-Length " + std::to_string(*json_length) +
                             " exceeds the body size " + std::to_string(body.size()));
    }
    json_part = body.substr(0, *json_length);
    binary = body.substr(*json_length);
  }
  if (json_part.empty()) return InvalidArgument("JSON Parse error: The document is empty");
  od::parser local_parser;  // only used for very large bodies
  simdjson::padded_string padded(json_part);
  // ParseInput looks an input's fields up in any order, which needs a well-formed document.
  MF_RETURN_IF_ERROR(json::ValidateJson(padded));
  od::document doc;
  if (auto error = json::ParserFor(padded.size(), &local_parser).iterate(padded).get(doc)) return ParseError(error);
  od::object top;
  if (auto error = doc.get_object().get(top)) {
    if (error != simdjson::INCORRECT_TYPE) return ParseError(error);
    return InvalidArgument("the inference request must be a JSON object");
  }

  V2InferRequest request;
  bool has_inputs = false;
  size_t binary_offset = 0;
  for (auto field : top) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return ParseError(error);
    od::value value;
    if (auto error = field.value().get(value)) return ParseError(error);
    if (key == "id") {
      MF_ASSIGN_OR_RETURN(std::string_view id, json::GetString(value, "id"));
      request.id = std::string(id);
    } else if (key == "parameters") {
      od::object parameters;
      if (value.get_object().get(parameters)) return InvalidArgument("'parameters' must be an object");
      for (auto parameter : parameters) {
        std::string_view pkey;
        if (auto error = parameter.unescaped_key().get(pkey)) return ParseError(error);
        if (pkey != "binary_data_output") continue;
        od::value pv;
        if (auto error = parameter.value().get(pv)) return ParseError(error);
        MF_ASSIGN_OR_RETURN(request.binary_data_output, GetBool(pv, "binary_data_output"));
      }
    } else if (key == "inputs") {
      if (has_inputs) return InvalidArgument("'inputs' appears twice");
      has_inputs = true;
      od::array inputs;
      if (value.get_array().get(inputs)) return InvalidArgument("'inputs' must be a list");
      for (auto element : inputs) {
        od::value input;
        if (auto error = element.get(input)) return ParseError(error);
        MF_ASSIGN_OR_RETURN(NamedTensor tensor, ParseInput(input, request.inputs.size(), binary, &binary_offset));
        for (const auto& other : request.inputs) {
          if (other.name == tensor.name) return InvalidArgument("input '" + tensor.name + "' is given twice");
        }
        request.inputs.push_back(std::move(tensor));
      }
    } else if (key == "outputs") {
      od::array outputs;
      if (value.get_array().get(outputs)) return InvalidArgument("'outputs' must be a list");
      for (auto element : outputs) {
        od::value output;
        if (auto error = element.get(output)) return ParseError(error);
        MF_RETURN_IF_ERROR(ParseRequestedOutput(output, &request));
      }
    }
  }
  if (!doc.current_location().error()) {
    return InvalidArgument("JSON Parse error: The document root must not be followed by other values.");
  }
  if (!has_inputs || request.inputs.empty()) return InvalidArgument("the inference request has no 'inputs'");
  if (binary_offset != binary.size()) {
    return InvalidArgument(std::to_string(binary.size() - binary_offset) +
                           " bytes of binary data after the JSON header are not claimed by any input's "
                           "binary_data_size");
  }
  return request;
}

StatusOr<V2InferResponseBody> WriteV2InferResponse(std::string_view model_name, std::string_view model_version,
                                                   const std::optional<std::string>& id,
                                                   std::span<const NamedTensorView> outputs,
                                                   std::span<const bool> binary) {
  if (binary.size() != outputs.size()) return Internal("one binary flag per output is required");
  std::string out = "{\"model_name\":";
  json::AppendString(&out, model_name);
  out.append(",\"model_version\":");
  json::AppendString(&out, model_version);
  if (id) {
    out.append(",\"id\":");
    json::AppendString(&out, *id);
  }
  out.append(",\"outputs\":[");
  std::string raw;
  bool any_binary = false;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const runtime::Tensor& tensor = *outputs[i].tensor;
    if (i) out.push_back(',');
    out.append("{\"name\":");
    json::AppendString(&out, outputs[i].name);
    out.append(",\"datatype\":");
    json::AppendString(&out, runtime::DataTypeName(tensor.dtype()));
    out.append(",\"shape\":");
    AppendShape(&out, tensor.shape());
    if (binary[i]) {
      const size_t before = raw.size();
      AppendV2Raw(tensor, &raw);
      out.append(",\"parameters\":{\"binary_data_size\":");
      json::AppendUInt(&out, raw.size() - before);
      out.append("}}");
      any_binary = true;
      continue;
    }
    if (tensor.dtype() == runtime::DataType::kString) {
      for (const auto& s : tensor.strings()) {
        if (!json::IsValidUtf8(s)) {
          return InvalidArgument("output '" + std::string(outputs[i].name) +
                                 "' holds bytes that are not valid UTF-8 and cannot be sent as JSON; request "
                                 "it with parameters {\"binary_data\": true}");
        }
      }
    }
    out.append(",\"data\":[");
    json::AppendElements(&out, tensor, 0, tensor.num_elements());
    out.append("]}");
  }
  out.append("]}");
  V2InferResponseBody response;
  if (any_binary) response.json_length = out.size();
  out.append(raw);
  response.body = std::move(out);
  return response;
}

std::string WriteV2ModelMetadata(std::string_view model_name, std::span<const std::string> versions,
                                 std::string_view platform, const ModelSignature& signature) {
  std::string out = "{\"name\":";
  json::AppendString(&out, model_name);
  out.append(",\"versions\":[");
  for (size_t i = 0; i < versions.size(); ++i) {
    if (i) out.push_back(',');
    json::AppendString(&out, versions[i]);
  }
  out.append("],\"platform\":");
  json::AppendString(&out, platform);
  out.append(",\"inputs\":");
  AppendTensorMetadata(&out, signature.inputs);
  out.append(",\"outputs\":");
  AppendTensorMetadata(&out, signature.outputs);
  out.push_back('}');
  return out;
}

std::string WriteV2ServerMetadata(std::string_view name, std::string_view version,
                                  std::span<const std::string> extensions) {
  std::string out = "{\"name\":";
  json::AppendString(&out, name);
  out.append(",\"version\":");
  json::AppendString(&out, version);
  out.append(",\"extensions\":[");
  for (size_t i = 0; i < extensions.size(); ++i) {
    if (i) out.push_back(',');
    json::AppendString(&out, extensions[i]);
  }
  out.append("]}");
  return out;
}

}  // namespace mf::codec
