#include "server/codec/json_tensor_reader.h"

#include <cmath>
#include <limits>
#include <utility>

#include "server/codec/base64.h"
#include "server/codec/half.h"

namespace mf::codec::json {
namespace {

using runtime::DataType;

std::string_view Trimmed(std::string_view token) {
  while (!token.empty() &&
         (token.back() == ' ' || token.back() == '\n' || token.back() == '\r' || token.back() == '\t')) {
    token.remove_suffix(1);
  }
  return token;
}

// The raw token for messages, shortened so an error never echoes a whole request.
std::string TokenForMessage(od::value& value) {
  std::string_view token = Trimmed(value.raw_json_token());
  constexpr size_t kMax = 64;
  if (token.size() > kMax) return std::string(token.substr(0, kMax)) + "...";
  return std::string(token);
}

// NaN, Infinity and -Infinity are not JSON, but TF Serving reads and writes them (as do
// Python's json module and RapidJSON with kParseNanAndInfFlag).
bool NonFiniteToken(std::string_view token, double* out) {
  token = Trimmed(token);
  if (token == "NaN") {
    *out = std::numeric_limits<double>::quiet_NaN();
  } else if (token == "Infinity") {
    *out = std::numeric_limits<double>::infinity();
  } else if (token == "-Infinity") {
    *out = -std::numeric_limits<double>::infinity();
  } else {
    return false;
  }
  return true;
}

// A value the dtype cannot take. Malformed JSON that On Demand only notices when the value is
// looked at (a bad literal, a stray comma) is reported as a parse error instead.
Status TypeError(od::value& value, DataType dtype) {
  const std::string token = TokenForMessage(value);
  std::string_view type_name = "Number";
  double unused;
  od::json_type type;
  if (!NonFiniteToken(value.raw_json_token(), &unused)) {
    if (auto error = value.type().get(type)) {
      return InvalidArgument(std::string("JSON Parse error: ") + simdjson::error_message(error) + " at: " + token);
    }
    bool valid_literal = true;
    switch (type) {
      case od::json_type::array:
        type_name = "Array";
        break;
      case od::json_type::object:
        type_name = "Object";
        break;
      case od::json_type::number:
        type_name = "Number";
        break;
      case od::json_type::string:
        type_name = "String";
        break;
      case od::json_type::boolean: {
        bool b;
        valid_literal = !value.get_bool().get(b);
        type_name = "Boolean";
        break;
      }
      case od::json_type::null: {
        bool is_null = false;
        valid_literal = !value.is_null().get(is_null) && is_null;
        type_name = "Null";
        break;
      }
    }
    if (!valid_literal) return InvalidArgument("JSON Parse error: Invalid value at: " + token);
  }
  return InvalidArgument("JSON Value: " + token + " Type: " + std::string(type_name) +
                         " is not of expected type: " + std::string(TfTypeName(dtype)));
}

template <typename T>
bool InRange(int64_t v) {
  return v >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
         v <= static_cast<int64_t>(std::numeric_limits<T>::max());
}

}  // namespace

od::parser& ParserFor(size_t size, od::parser* fallback) {
  constexpr size_t kReuseLimit = size_t{16} << 20;
  thread_local od::parser reused;
  return size <= kReuseLimit ? reused : *fallback;
}

Status ValidateJson(const simdjson::padded_string& json) {
  constexpr size_t kReuseLimit = size_t{16} << 20;
  thread_local simdjson::dom::parser reused;
  simdjson::dom::parser local;
  simdjson::dom::parser& parser = json.size() <= kReuseLimit ? reused : local;
  simdjson::dom::element root;
  if (auto error = parser.parse(json).get(root)) return ParseError(error);
  return Status::Ok();
}

Status ParseError(simdjson::error_code error) {
  return InvalidArgument(std::string("JSON Parse error: ") + simdjson::error_message(error));
}

std::string_view TfTypeName(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32:
      return "float";
    case DataType::kFloat16:
      return "half";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kFloat64:
      return "double";
    case DataType::kInt8:
      return "int8";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kUInt16:
      return "uint16";
    case DataType::kUInt32:
      return "uint32";
    case DataType::kUInt64:
      return "uint64";
    case DataType::kBool:
      return "bool";
    case DataType::kString:
      return "string";
  }
  return "unknown";
}

ValueAccumulator::ValueAccumulator(DataType dtype, Options options) : dtype_(dtype), options_(options) {}

Status ValueAccumulator::Append(od::value& value) {
  switch (dtype_) {
    case DataType::kFloat32:
    case DataType::kFloat64:
    case DataType::kFloat16:
    case DataType::kBFloat16:
      MF_RETURN_IF_ERROR(AppendFloating(value));
      break;
    case DataType::kBool: {
      bool b;
      if (value.get_bool().get(b)) return TypeError(value, dtype_);
      Push<uint8_t>(b ? 1 : 0);
      break;
    }
    case DataType::kString:
      MF_RETURN_IF_ERROR(AppendString(value));
      break;
    default:
      MF_RETURN_IF_ERROR(AppendInteger(value));
  }
  ++count_;
  return Status::Ok();
}

bool ValueAccumulator::TryAppendNumber(od::value& value) {
  double d;
  switch (dtype_) {
    case DataType::kFloat32:
      if (value.get_double().get(d)) return false;
      Push<float>(static_cast<float>(d));
      break;
    case DataType::kFloat64:
      if (value.get_double().get(d)) return false;
      Push<double>(d);
      break;
    default:
      return false;
  }
  ++count_;
  return true;
}

Status ValueAccumulator::AppendFloating(od::value& value) {
  double d;
  od::json_type type;
  bool is_number = !value.type().get(type) && type == od::json_type::number;
  if (is_number) {
    if (value.get_double().get(d) && !NonFiniteToken(value.raw_json_token(), &d)) {
      return InvalidArgument("JSON Value: " + TokenForMessage(value) + " is not a valid number");
    }
  } else if (!NonFiniteToken(value.raw_json_token(), &d)) {
    return TypeError(value, dtype_);
  }
  switch (dtype_) {
    case DataType::kFloat64:
      Push<double>(d);
      break;
    case DataType::kFloat32:
      Push<float>(static_cast<float>(d));
      break;
    case DataType::kFloat16:
      Push<uint16_t>(FloatToHalf(static_cast<float>(d)));
      break;
    default:
      Push<uint16_t>(FloatToBFloat16(static_cast<float>(d)));
      break;
  }
  return Status::Ok();
}

Status ValueAccumulator::AppendInteger(od::value& value) {
  od::json_type type;
  if (value.type().get(type) || type != od::json_type::number) return TypeError(value, dtype_);
  if (dtype_ == DataType::kUInt64) {
    uint64_t u;
    if (value.get_uint64().get(u)) return TypeError(value, dtype_);
    Push<uint64_t>(u);
    return Status::Ok();
  }
  int64_t v;
  if (value.get_int64().get(v)) return TypeError(value, dtype_);
  bool fits = false;
  switch (dtype_) {
    case DataType::kInt8:
      fits = InRange<int8_t>(v);
      if (fits) Push<int8_t>(static_cast<int8_t>(v));
      break;
    case DataType::kInt16:
      fits = InRange<int16_t>(v);
      if (fits) Push<int16_t>(static_cast<int16_t>(v));
      break;
    case DataType::kInt32:
      fits = InRange<int32_t>(v);
      if (fits) Push<int32_t>(static_cast<int32_t>(v));
      break;
    case DataType::kInt64:
      fits = true;
      Push<int64_t>(v);
      break;
    case DataType::kUInt8:
      fits = InRange<uint8_t>(v);
      if (fits) Push<uint8_t>(static_cast<uint8_t>(v));
      break;
    case DataType::kUInt16:
      fits = InRange<uint16_t>(v);
      if (fits) Push<uint16_t>(static_cast<uint16_t>(v));
      break;
    case DataType::kUInt32:
      fits = InRange<uint32_t>(v);
      if (fits) Push<uint32_t>(static_cast<uint32_t>(v));
      break;
    default:
      break;
  }
  if (!fits) {
    return InvalidArgument("JSON Value: " + TokenForMessage(value) +
                           " is out of range for type: " + std::string(TfTypeName(dtype_)));
  }
  return Status::Ok();
}

Status ValueAccumulator::AppendString(od::value& value) {
  od::json_type type;
  if (value.type().get(type)) return TypeError(value, dtype_);
  if (type == od::json_type::string) {
    std::string_view s;
    if (auto error = value.get_string().get(s)) return ParseError(error);
    strings_.emplace_back(s);
    return Status::Ok();
  }
  if (type != od::json_type::object || !options_.allow_base64_objects) return TypeError(value, dtype_);
  // {"b64": "<standard base64>"}: exactly one key.
  std::string token = TokenForMessage(value);
  od::object object;
  if (auto error = value.get_object().get(object)) return ParseError(error);
  std::string decoded;
  int keys = 0;
  bool ok = true;
  for (auto field : object) {
    std::string_view key;
    if (auto error = field.unescaped_key().get(key)) return ParseError(error);
    ++keys;
    std::string_view text;
    if (key != "b64" || field.value().get_string().get(text) || keys > 1) {
      ok = false;
      break;
    }
    if (!Base64Decode(text, &decoded)) return InvalidArgument("Unable to base64 decode");
  }
  if (!ok || keys != 1) {
    return InvalidArgument("JSON Value: " + token + " not formatted correctly for base64 data");
  }
  strings_.push_back(std::move(decoded));
  return Status::Ok();
}

StatusOr<runtime::Tensor> ValueAccumulator::Finish(runtime::Shape shape) {
  if (runtime::NumElements(shape) != count_) {
    return Internal("decoded " + std::to_string(count_) + " values for shape " + runtime::ShapeToString(shape));
  }
  if (dtype_ != DataType::kString) return runtime::Tensor::FromBytes(dtype_, std::move(shape), bytes_);
  MF_ASSIGN_OR_RETURN(runtime::Tensor tensor, runtime::Tensor::Allocate(dtype_, std::move(shape)));
  tensor.strings() = std::move(strings_);
  return tensor;
}

Status NestedListDecoder::Decode(od::value value, int level) {
  od::json_type type;
  bool is_array = !value.type().get(type) && type == od::json_type::array;
  if (!is_array) {
    if (rank_ < 0) {
      rank_ = level;
    } else if (level != rank_) {
      return InvalidArgument("JSON Value: " + TokenForMessage(value) +
                             " found at incorrect level: " + std::to_string(level + 1) +
                             " in the JSON DOM. Expected at level: " + std::to_string(rank_));
    }
    return values_.Append(value);
  }
  if (rank_ >= 0 && level >= rank_) {
    return InvalidArgument("Encountered list at unexpected level: " + std::to_string(level) + " expected < " +
                           std::to_string(rank_));
  }
  if (level >= kMaxNesting) {
    return InvalidArgument("JSON lists nested deeper than " + std::to_string(kMaxNesting) + " levels");
  }
  od::array array;
  if (auto error = value.get_array().get(array)) return ParseError(error);
  int64_t count = 0;
  // Once the depth of the scalars is known, a list right above them is read without recursing.
  const bool scalars_below = rank_ == level + 1;
  for (auto element : array) {
    od::value child;
    if (auto error = element.get(child)) return ParseError(error);
    if (!(scalars_below && values_.TryAppendNumber(child))) MF_RETURN_IF_ERROR(Decode(child, level + 1));
    ++count;
  }
  if (count == 0 && rank_ < 0) rank_ = level + 1;  // the first path ends at an empty list
  auto index = static_cast<size_t>(level);
  if (dims_.size() <= index) dims_.resize(index + 1, -1);
  if (dims_[index] < 0) {
    dims_[index] = count;
  } else if (dims_[index] != count) {
    return InvalidArgument("Encountered list at unexpected size: " + std::to_string(count) +
                           " at level: " + std::to_string(level) + " expected size: " + std::to_string(dims_[index]));
  }
  return Status::Ok();
}

void NestedListDecoder::SetDim0(int64_t rows) {
  if (dims_.empty()) dims_.resize(1, -1);
  dims_[0] = rows;
}

StatusOr<runtime::Tensor> NestedListDecoder::Finish() {
  runtime::Shape shape;
  for (int i = 0; i < rank_; ++i) {
    auto index = static_cast<size_t>(i);
    if (index >= dims_.size() || dims_[index] < 0) return Internal("tensor shape was not determined");
    shape.push_back(dims_[index]);
  }
  return values_.Finish(std::move(shape));
}

StatusOr<std::string_view> GetString(od::value value, std::string_view what) {
  std::string_view s;
  if (value.get_string().get(s)) {
    return InvalidArgument("JSON Value: " + TokenForMessage(value) + " not formatted correctly. '" + std::string(what) +
                           "' must be a string value.");
  }
  return s;
}

bool IsBase64Object(od::value value) {
  od::object object;
  if (value.get_object().get(object)) return false;
  int keys = 0;
  bool b64 = false;
  for (auto field : object) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return false;
    if (++keys > 1) return false;
    od::json_type type;
    b64 = key == "b64" && !field.value().type().get(type) && type == od::json_type::string;
  }
  return keys == 1 && b64;
}

}  // namespace mf::codec::json
