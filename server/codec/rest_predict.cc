#include "server/codec/rest_predict.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/codec/base64.h"
#include "server/codec/json_tensor_reader.h"
#include "server/codec/json_writer.h"

namespace mf::codec {
namespace {

namespace od = simdjson::ondemand;
using json::NestedListDecoder;
using json::ParseError;

constexpr json::ValueAccumulator::Options kRestValues{.allow_base64_objects = true};

// Re-reads the top-level object and returns the value under `key`. On Demand reads forward
// only, so looking at a value twice (peek, then decode) means starting over; the structural
// index is kept, so a rewind costs nothing.
StatusOr<od::value> TopLevelValue(od::document& doc, std::string_view key) {
  // A structural error met while peeking (Classify swallows it) abandons the iterator, and an
  // abandoned document cannot be rewound.
  if (!doc.is_alive()) return InvalidArgument("JSON Parse error: The JSON document has an improper structure");
  doc.rewind();
  od::object top;
  if (auto error = doc.get_object().get(top)) return ParseError(error);
  od::value value;
  if (auto error = top.find_field_unordered(key).get(value)) return ParseError(error);
  return value;
}

enum class Kind { kList, kNamedObject, kOther };

// Classifies a value without decoding it: a list, a {name: value} object, or anything else
// (a scalar or a {"b64": ...} string).
Kind Classify(od::value value) {
  od::json_type type;
  if (value.type().get(type)) return Kind::kOther;
  if (type == od::json_type::array) return Kind::kList;
  if (type == od::json_type::object) return json::IsBase64Object(value) ? Kind::kOther : Kind::kNamedObject;
  return Kind::kOther;
}

std::string InputNames(const ModelSignature& signature) {
  std::string names;
  for (const auto& input : signature.inputs) names += (names.empty() ? "" : ",") + input.name;
  return names;
}

int InputIndex(const ModelSignature& signature, std::string_view name) {
  for (size_t i = 0; i < signature.inputs.size(); ++i) {
    if (signature.inputs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<NestedListDecoder> MakeDecoders(const ModelSignature& signature) {
  std::vector<NestedListDecoder> decoders;
  decoders.reserve(signature.inputs.size());
  for (const auto& input : signature.inputs) decoders.emplace_back(input.dtype, kRestValues);
  return decoders;
}

StatusOr<std::vector<runtime::Tensor>> FinishAll(const ModelSignature& signature,
                                                 std::vector<NestedListDecoder>& decoders) {
  std::vector<runtime::Tensor> tensors;
  tensors.reserve(decoders.size());
  for (size_t i = 0; i < decoders.size(); ++i) {
    MF_ASSIGN_OR_RETURN(runtime::Tensor tensor, decoders[i].Finish());
    MF_RETURN_IF_ERROR(CheckAgainstDeclared(signature.inputs[i], tensor));
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

// TF Serving's parser accepts NaN, Infinity and -Infinity as numbers; simdjson's DOM parser does
// not, so for the checks that parse a whole text they are replaced by a 0 of the same length
// (outside strings).
std::string WithNonFiniteAsZeros(std::string_view json) {
  std::string text(json);
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
      continue;
    }
    for (std::string_view literal : {"NaN", "Infinity", "-Infinity"}) {
      if (std::string_view(text).substr(i, literal.size()) == literal) {
        text.replace(i, literal.size(), std::string(literal.size() - 1, ' ') + "0");
        i += literal.size() - 1;
        break;
      }
    }
  }
  return text;
}

// An instance's dims as TF Serving reads them (GetDenseTensorShape: the length of the first
// list at each level) and its element count; nullopt when it is not rectangular itself.
struct InstanceShape {
  std::vector<int64_t> dims;
  int64_t size = 0;
};

bool CountRectangular(simdjson::dom::element value, size_t level, const std::vector<int64_t>& dims, int64_t* size) {
  if (!value.is_array()) {
    if (level != dims.size()) return false;
    ++*size;
    return true;
  }
  simdjson::dom::array list = value.get_array().value_unsafe();
  if (level >= dims.size() || static_cast<int64_t>(list.size()) != dims[level]) return false;
  for (simdjson::dom::element item : list) {
    if (!CountRectangular(item, level + 1, dims, size)) return false;
  }
  return true;
}

std::optional<InstanceShape> ShapeOfInstance(std::string_view raw) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(WithNonFiniteAsZeros(raw)).get(root)) return std::nullopt;
  InstanceShape shape;
  for (simdjson::dom::element level = root; level.is_array();) {
    simdjson::dom::array list = level.get_array().value_unsafe();
    shape.dims.push_back(static_cast<int64_t>(list.size()));
    if (list.size() == 0) break;
    level = *list.begin();
  }
  if (!CountRectangular(root, 0, shape.dims, &shape.size)) return std::nullopt;
  return shape;
}

std::string ShapeToString(const std::vector<int64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out.push_back(',');
    out.append(std::to_string(dims[i]));
  }
  out.push_back(']');
  return out;
}

// The JSON text of a value (a list, an object or a scalar token).
std::optional<std::string_view> RawJson(od::value value) {
  std::string_view raw;
  od::array list;
  od::object object;
  if (!value.get_array().get(list)) return list.raw_json().get(raw) ? std::nullopt : std::optional(raw);
  if (!value.get_object().get(object)) return object.raw_json().get(raw) ? std::nullopt : std::optional(raw);
  return value.raw_json_token();
}

// The text of instances[row] (with `key`: of that input's value in it).
std::optional<std::string> InstanceText(od::document& doc, int64_t row, std::string_view key) {
  auto instances = TopLevelValue(doc, "instances");
  if (!instances.ok()) return std::nullopt;
  od::array list;
  if (instances->get_array().get(list)) return std::nullopt;
  int64_t index = 0;
  for (auto element : list) {
    od::value value;
    if (element.get(value)) return std::nullopt;
    if (index++ != row) continue;
    if (!key.empty()) {
      od::object object;
      if (value.get_object().get(object) || object.find_field_unordered(key).get(value)) return std::nullopt;
    }
    auto raw = RawJson(value);
    return raw ? std::optional(std::string(*raw)) : std::nullopt;
  }
  return std::nullopt;
}

// Every instance must have the first one's size and shape; TF Serving says which differs
// ("Expecting tensor size: 4 but got: 6", "Expecting shape [2,2] but got: [3,2]") where a
// decoder that reads all rows as one tensor only sees a list of an unexpected size. Asked on the
// error path only: nullopt when the rows differ in no such way.
std::optional<Status> RaggedInstance(od::document& doc, int64_t row, std::string_view key) {
  if (row == 0) return std::nullopt;
  const std::optional<std::string> first_text = InstanceText(doc, 0, key);
  const std::optional<std::string> row_text = InstanceText(doc, row, key);
  if (!first_text || !row_text) return std::nullopt;
  const std::optional<InstanceShape> first = ShapeOfInstance(*first_text);
  const std::optional<InstanceShape> other = ShapeOfInstance(*row_text);
  if (!first || !other) return std::nullopt;
  if (first->size != other->size) {
    return InvalidArgument("Expecting tensor size: " + std::to_string(first->size) +
                           " but got: " + std::to_string(other->size));
  }
  if (first->dims != other->dims) {
    return InvalidArgument("Expecting shape " + ShapeToString(first->dims) + " but got: " + ShapeToString(other->dims));
  }
  return std::nullopt;
}

// Row form: "instances" is a list with one entry per batch row; with one input an entry is the
// row itself, otherwise (or optionally with one input) an object {input_name: row value}.
StatusOr<std::vector<runtime::Tensor>> DecodeInstances(od::document& doc, const ModelSignature& signature) {
  MF_ASSIGN_OR_RETURN(od::value instances, TopLevelValue(doc, "instances"));
  od::array list;
  if (instances.get_array().get(list)) return InvalidArgument("Expecting 'instances' to be an list/array");
  Kind first_kind = Kind::kOther;
  bool empty = true;
  for (auto element : list) {
    od::value first;
    if (auto error = element.get(first)) return ParseError(error);
    first_kind = Classify(first);
    empty = false;
    break;
  }
  if (empty) return InvalidArgument("No values in 'instances' array");
  const bool named = first_kind == Kind::kNamedObject;
  if (!named && signature.inputs.size() > 1) {
    return InvalidArgument(
        "instances is a plain list, but expecting list of objects as multiple input tensors "
        "required as per tensorinfo_map");
  }

  std::vector<NestedListDecoder> decoders = MakeDecoders(signature);
  MF_ASSIGN_OR_RETURN(instances, TopLevelValue(doc, "instances"));
  if (auto error = instances.get_array().get(list)) return ParseError(error);
  int64_t rows = 0;
  for (auto element : list) {
    od::value row;
    if (auto error = element.get(row)) return ParseError(error);
    const std::string item = std::to_string(rows);
    if (!named) {
      // An object here is decoded as a {"b64": ...} string; anything else is refused by the decoder.
      Status status = decoders[0].Decode(row, 1);
      if (!status.ok()) {
        if (auto ragged = RaggedInstance(doc, rows, "")) status = *ragged;
        return InvalidArgument("Failed to process element: " + item +
                               " of 'instances' list. Error: " + status.ToString());
      }
    } else {
      od::object object;
      if (row.get_object().get(object)) {
        return InvalidArgument("Expecting object but got list at item " + item + " of input list");
      }
      std::vector<bool> seen(signature.inputs.size(), false);
      for (auto field : object) {
        std::string_view key;
        if (auto error = field.unescaped_key().get(key)) return ParseError(error);
        int index = InputIndex(signature, key);
        if (index < 0) {
          return InvalidArgument(
              "Failed to process element: " + item + " key: " + std::string(key) +
              " of 'instances' list. Error: JSON object: does not have named input: " + std::string(key));
        }
        auto slot = static_cast<size_t>(index);
        if (seen[slot]) {
          return InvalidArgument("Failed to process element: " + item + " of 'instances' list: key " +
                                 std::string(key) + " appears twice");
        }
        seen[slot] = true;
        od::value value;
        if (auto error = field.value().get(value)) return ParseError(error);
        Status status = decoders[slot].Decode(value, 1);
        if (!status.ok()) {
          const std::string name(key);  // `key` points into the document that RaggedInstance rewinds
          if (auto ragged = RaggedInstance(doc, rows, name)) status = *ragged;
          return InvalidArgument("Failed to process element: " + item + " key: " + name +
                                 " of 'instances' list. Error: " + status.ToString());
        }
      }
      for (bool present : seen) {
        if (!present) {
          return InvalidArgument("Failed to process element: " + item +
                                 " of 'instances' list. JSON object keys must be equal to: " + InputNames(signature));
        }
      }
    }
    ++rows;
  }
  for (auto& decoder : decoders) decoder.SetDim0(rows);
  return FinishAll(signature, decoders);
}

// Columnar form: "inputs" is the single input's tensor, or an object {input_name: tensor}.
StatusOr<std::vector<runtime::Tensor>> DecodeInputs(od::document& doc, const ModelSignature& signature) {
  MF_ASSIGN_OR_RETURN(od::value inputs, TopLevelValue(doc, "inputs"));
  const bool named = Classify(inputs) == Kind::kNamedObject;
  std::vector<NestedListDecoder> decoders = MakeDecoders(signature);
  MF_ASSIGN_OR_RETURN(inputs, TopLevelValue(doc, "inputs"));
  if (!named) {
    if (signature.inputs.size() > 1) {
      return InvalidArgument(
          "inputs is a plain value/list, but expecting an object as multiple input tensors required "
          "as per tensorinfo_map");
    }
    MF_RETURN_IF_ERROR(decoders[0].Decode(inputs, 0));
    return FinishAll(signature, decoders);
  }
  od::object object;
  if (auto error = inputs.get_object().get(object)) return ParseError(error);
  std::vector<bool> seen(signature.inputs.size(), false);
  for (auto field : object) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return ParseError(error);
    int index = InputIndex(signature, key);
    if (index < 0) {
      return InvalidArgument("Unknown input: " + std::string(key) +
                             " in 'inputs' object; the signature's inputs are: " + InputNames(signature));
    }
    auto slot = static_cast<size_t>(index);
    if (seen[slot]) return InvalidArgument("Input " + std::string(key) + " appears twice in 'inputs' object");
    seen[slot] = true;
    od::value value;
    if (auto error = field.value().get(value)) return ParseError(error);
    Status status = decoders[slot].Decode(value, 0);
    if (!status.ok()) return status.WithContext("input " + std::string(key));
  }
  for (size_t i = 0; i < seen.size(); ++i) {
    if (!seen[i]) return InvalidArgument("Missing named input: " + signature.inputs[i].name + " in 'inputs' object.");
  }
  return FinishAll(signature, decoders);
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

class TensorJsonWriter {
 public:
  TensorJsonWriter(const NamedTensorView& view, std::string* out)
      : tensor_(*view.tensor), out_(out), base64_(EndsWith(view.name, "_bytes")) {
    const auto& shape = tensor_.shape();
    strides_.assign(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 1;) strides_[i - 1] = strides_[i] * shape[i];
  }

  // The sub-tensor at `level` starting at flat element `offset`, as nested lists.
  void Write(size_t level, int64_t offset) {
    const auto& shape = tensor_.shape();
    if (level == shape.size()) {
      WriteElements(offset, offset + 1);
      return;
    }
    out_->push_back('[');
    if (level + 1 == shape.size()) {
      WriteElements(offset, offset + shape[level]);
    } else {
      for (int64_t i = 0; i < shape[level]; ++i) {
        if (i) out_->push_back(',');
        Write(level + 1, offset + i * strides_[level]);
      }
    }
    out_->push_back(']');
  }

  int64_t stride(size_t level) const { return strides_[level]; }

 private:
  void WriteElements(int64_t begin, int64_t end) {
    if (tensor_.dtype() != runtime::DataType::kString) {
      json::AppendElements(out_, tensor_, begin, end);
      return;
    }
    for (int64_t i = begin; i < end; ++i) {
      if (i != begin) out_->push_back(',');
      const std::string& s = tensor_.strings()[static_cast<size_t>(i)];
      // Bytes outputs, and strings JSON cannot carry (not UTF-8), go out as base64 objects.
      if (base64_ || !json::IsValidUtf8(s)) {
        out_->append("{\"b64\":\"");
        Base64Encode(s, out_);
        out_->append("\"}");
      } else {
        json::AppendString(out_, s);
      }
    }
  }

  const runtime::Tensor& tensor_;
  std::string* out_;
  bool base64_;
  std::vector<int64_t> strides_;
};

}  // namespace

Status CheckJsonSyntax(std::string_view body) {
  if (body.empty()) return InvalidArgument("JSON Parse error: The document is empty");
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (auto error = parser.parse(WithNonFiniteAsZeros(body)).get(root)) return ParseError(error);
  return Status::Ok();
}

StatusOr<RestPredictRequest> ParseRestPredictRequest(std::string_view body,
                                                     std::span<const ModelSignature> signatures) {
  return ParseRestPredictRequest(body,
                                 [signatures]() -> StatusOr<std::span<const ModelSignature>> { return signatures; });
}

StatusOr<RestPredictRequest> ParseRestPredictRequest(std::string_view body, const SignatureLookup& lookup) {
  if (body.empty()) return InvalidArgument("JSON Parse error: The document is empty");
  od::parser local_parser;  // only used for very large bodies
  simdjson::padded_string padded(body);
  od::document doc;
  if (auto error = json::ParserFor(padded.size(), &local_parser).iterate(padded).get(doc)) return ParseError(error);
  od::object top;
  if (auto error = doc.get_object().get(top)) {
    if (error != simdjson::INCORRECT_TYPE) return ParseError(error);
    MF_RETURN_IF_ERROR(CheckJsonSyntax(body));  // "not json" is a parse error, not a non-object
    return InvalidArgument("JSON Value: request body Is not object");
  }

  // First pass over the keys: the signature name and which form the request uses.
  std::string signature_name(kDefaultSignatureName);
  bool has_instances = false;
  bool has_inputs = false;
  for (auto field : top) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return ParseError(error);
    od::value value;
    if (auto error = field.value().get(value)) return ParseError(error);
    if (key == "signature_name") {
      MF_ASSIGN_OR_RETURN(std::string_view name, json::GetString(value, "signature_name"));
      if (!name.empty()) signature_name = std::string(name);
    } else if (key == "instances") {
      has_instances = true;
    } else if (key == "inputs") {
      has_inputs = true;
    }
  }
  // Anything after the top-level object is an error, as in any strict JSON parser.
  if (!doc.current_location().error()) {
    return InvalidArgument("JSON Parse error: The document root must not be followed by other values.");
  }
  // TF Serving looks the model up once the body parsed and its signature_name was read; a syntax
  // error the lazy first pass skipped over still comes first.
  auto signatures = lookup();
  if (!signatures.ok()) {
    MF_RETURN_IF_ERROR(CheckJsonSyntax(body));
    return signatures.status();
  }
  const ModelSignature* signature = nullptr;
  for (const auto& candidate : *signatures) {
    if (candidate.name == signature_name) signature = &candidate;
  }
  if (signature == nullptr) {
    return InvalidArgument("Serving signature name: \"" + signature_name + "\" not found in signature def");
  }
  if (signature->inputs.empty()) {
    return InvalidArgument("Failed to get input map for signature: " + signature_name);
  }
  if (has_instances && has_inputs) {
    return InvalidArgument(
        "JSON Value: request body Not formatted correctly expecting only one of 'inputs' or "
        "'instances' keys to exist");
  }
  if (!has_instances && !has_inputs) return InvalidArgument("Missing 'inputs' or 'instances' key");

  RestPredictRequest request;
  request.signature = signature;
  request.format = has_instances ? RestFormat::kRow : RestFormat::kColumnar;
  auto inputs = has_instances ? DecodeInstances(doc, *signature) : DecodeInputs(doc, *signature);
  if (!inputs.ok()) {
    // TF Serving parses the whole body before it reads any tensor: a syntax error anywhere is
    // the answer, whatever the decoder met first (checked on this error path only).
    MF_RETURN_IF_ERROR(CheckJsonSyntax(body));
    return inputs.status();
  }
  request.inputs = std::move(inputs).value();
  return request;
}

Status WriteRestPredictResponse(RestFormat format, std::span<const NamedTensorView> outputs, std::string* body) {
  if (outputs.empty()) return InvalidArgument("the model returned no outputs");
  std::string out;
  if (format == RestFormat::kColumnar) {
    out.append("{\"outputs\":");
    if (outputs.size() == 1) {
      TensorJsonWriter(outputs[0], &out).Write(0, 0);
    } else {
      out.push_back('{');
      for (size_t i = 0; i < outputs.size(); ++i) {
        if (i) out.push_back(',');
        json::AppendString(&out, outputs[i].name);
        out.push_back(':');
        TensorJsonWriter(outputs[i], &out).Write(0, 0);
      }
      out.push_back('}');
    }
    out.push_back('}');
    *body = std::move(out);
    return Status::Ok();
  }

  // Row form: every output is split along dim 0, which they must share.
  int64_t rows = -1;
  for (const auto& output : outputs) {
    if (output.tensor->rank() == 0) {
      return InvalidArgument("Tensor name: " + std::string(output.name) +
                             " is a scalar and cannot be returned in row format; use the 'inputs' "
                             "(columnar) request format");
    }
    if (rows < 0) {
      rows = output.tensor->dim(0);
    } else if (output.tensor->dim(0) != rows) {
      return InvalidArgument("Tensor name: " + std::string(output.name) + " has inconsistent batch size: " +
                             std::to_string(output.tensor->dim(0)) + " expecting: " + std::to_string(rows));
    }
  }
  out.append("{\"predictions\":");
  if (outputs.size() == 1) {
    TensorJsonWriter(outputs[0], &out).Write(0, 0);
  } else {
    std::vector<TensorJsonWriter> writers;
    writers.reserve(outputs.size());
    for (const auto& output : outputs) writers.emplace_back(output, &out);
    out.push_back('[');
    for (int64_t row = 0; row < rows; ++row) {
      if (row) out.push_back(',');
      out.push_back('{');
      for (size_t i = 0; i < outputs.size(); ++i) {
        if (i) out.push_back(',');
        json::AppendString(&out, outputs[i].name);
        out.push_back(':');
        writers[i].Write(1, row * writers[i].stride(0));
      }
      out.push_back('}');
    }
    out.push_back(']');
  }
  out.push_back('}');
  *body = std::move(out);
  return Status::Ok();
}

std::string WriteRestError(std::string_view message) {
  std::string out = "{\"error\":";
  json::AppendString(&out, message);
  out.push_back('}');
  return out;
}

}  // namespace mf::codec
