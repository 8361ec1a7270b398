#include "server/router/grpc_mirror_compare.h"

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "http2/grpc_wire.h"
#include "server/codec/half.h"

namespace mf::router {
namespace {

// Protobuf wire types (protobuf.dev/programming-guides/encoding).
enum WireType : int { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

// One field as read off the wire: a varint or fixed value in `scalar`, a length-delimited one in
// `bytes`.
struct Field {
  uint32_t number = 0;
  int wire_type = 0;
  uint64_t scalar = 0;
  std::string_view bytes;
};

bool ReadVarint(std::string_view* in, uint64_t* value) {
  uint64_t result = 0;
  for (int shift = 0; shift < 64 && !in->empty(); shift += 7) {
    const auto byte = static_cast<uint8_t>(in->front());
    in->remove_prefix(1);
    result |= uint64_t{byte & 0x7Fu} << shift;
    if (!(byte & 0x80)) {
      *value = result;
      return true;
    }
  }
  return false;
}

template <typename T>
bool ReadFixed(std::string_view* in, uint64_t* value) {
  if (in->size() < sizeof(T)) return false;
  T raw;
  std::memcpy(&raw, in->data(), sizeof(T));  // little endian on the wire, as on our targets
  in->remove_prefix(sizeof(T));
  *value = raw;
  return true;
}

// Every field of `message`, in order; nullopt when it is not a well-formed message (groups,
// which no inference answer uses, count as malformed).
std::optional<std::vector<Field>> ReadFields(std::string_view message) {
  std::vector<Field> fields;
  while (!message.empty()) {
    uint64_t tag = 0;
    if (!ReadVarint(&message, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1FFFFFFF) return std::nullopt;
    Field f{.number = static_cast<uint32_t>(tag >> 3), .wire_type = static_cast<int>(tag & 7)};
    bool ok = false;
    switch (f.wire_type) {
      case kVarint:
        ok = ReadVarint(&message, &f.scalar);
        break;
      case kFixed64:
        ok = ReadFixed<uint64_t>(&message, &f.scalar);
        break;
      case kFixed32:
        ok = ReadFixed<uint32_t>(&message, &f.scalar);
        break;
      case kLengthDelimited: {
        uint64_t length = 0;
        ok = ReadVarint(&message, &length) && length <= message.size();
        if (ok) {
          f.bytes = message.substr(0, length);
          message.remove_prefix(length);
        }
        break;
      }
      default:
        break;
    }
    if (!ok) return std::nullopt;
    fields.push_back(f);
  }
  return fields;
}

// How a repeated numeric field's elements are encoded and what they mean.
enum class Number { kFloat, kDouble, kInt32, kInt64, kUint64, kBool, kHalf };

double Decode(Number kind, uint64_t raw) {
  switch (kind) {
    case Number::kFloat:
      return std::bit_cast<float>(static_cast<uint32_t>(raw));
    case Number::kDouble:
      return std::bit_cast<double>(raw);
    case Number::kInt32:
      return static_cast<int32_t>(raw);
    case Number::kInt64:
      return static_cast<double>(static_cast<int64_t>(raw));
    case Number::kUint64:
      return static_cast<double>(raw);
    case Number::kBool:
      return raw != 0;
    case Number::kHalf:
      return codec::HalfToFloat(static_cast<uint16_t>(raw));
  }
  return 0;
}

int WireTypeOf(Number kind) {
  if (kind == Number::kFloat) return kFixed32;
  if (kind == Number::kDouble) return kFixed64;
  return kVarint;
}

// Appends a repeated numeric field's elements, packed (one length-delimited field) or not.
bool AppendNumbers(const Field& f, Number kind, std::vector<double>* out) {
  const int element_type = WireTypeOf(kind);
  if (f.wire_type == element_type) {
    out->push_back(Decode(kind, f.scalar));
    return true;
  }
  if (f.wire_type != kLengthDelimited) return false;
  std::string_view packed = f.bytes;
  while (!packed.empty()) {
    uint64_t raw = 0;
    const bool ok = element_type == kVarint    ? ReadVarint(&packed, &raw)
                    : element_type == kFixed32 ? ReadFixed<uint32_t>(&packed, &raw)
                                               : ReadFixed<uint64_t>(&packed, &raw);
    if (!ok) return false;
    out->push_back(Decode(kind, raw));
  }
  return true;
}

// An output tensor reduced to what two versions' answers must share.
struct Tensor {
  std::string type;  // TF DataType number or KServe datatype name
  std::vector<int64_t> shape;
  std::vector<double> numbers;
  std::vector<std::string> strings;
  std::string_view raw;  // undecoded content (an unknown type's bytes): compared as is
};
using Outputs = std::map<std::string, Tensor, std::less<>>;

// Little-endian elements of `width` bytes, each read by `read`.
bool AppendRaw(std::string_view bytes, size_t width, double (*read)(const char*), std::vector<double>* out) {
  if (bytes.size() % width != 0) return false;
  for (size_t i = 0; i < bytes.size(); i += width) out->push_back(read(bytes.data() + i));
  return true;
}

template <typename T>
double LoadAs(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return static_cast<double>(v);
}

double LoadBool(const char* p) { return *p != 0; }
double LoadHalf(const char* p) { return codec::HalfToFloat(static_cast<uint16_t>(LoadAs<uint16_t>(p))); }
double LoadBfloat16(const char* p) {
  return std::bit_cast<float>(static_cast<uint32_t>(static_cast<uint16_t>(LoadAs<uint16_t>(p))) << 16);
}

// Decodes raw little-endian content by element type; false for a type without a fixed width
// (the caller then compares the bytes as they are).
bool AppendRawByType(std::string_view type, std::string_view bytes, std::vector<double>* out, bool* known) {
  struct Layout {
    const char* tf;
    const char* kserve;
    size_t width;
    double (*read)(const char*);
  };
  static constexpr Layout kLayouts[] = {
      {"1", "FP32", 4, LoadAs<float>},       {"2", "FP64", 8, LoadAs<double>},   {"3", "INT32", 4, LoadAs<int32_t>},
      {"4", "UINT8", 1, LoadAs<uint8_t>},    {"5", "INT16", 2, LoadAs<int16_t>}, {"6", "INT8", 1, LoadAs<int8_t>},
      {"9", "INT64", 8, LoadAs<int64_t>},    {"10", "BOOL", 1, LoadBool},        {"14", "BF16", 2, LoadBfloat16},
      {"17", "UINT16", 2, LoadAs<uint16_t>}, {"19", "FP16", 2, LoadHalf},        {"22", "UINT32", 4, LoadAs<uint32_t>},
      {"23", "UINT64", 8, LoadAs<uint64_t>}, {"8", "", 4, LoadAs<float>},  // complex64: pairs of floats
      {"18", "", 8, LoadAs<double>},                                       // complex128
  };
  for (const Layout& l : kLayouts) {
    if (type == l.tf || (*l.kserve && type == l.kserve)) {
      *known = true;
      return AppendRaw(bytes, l.width, l.read, out);
    }
  }
  *known = false;
  return true;
}

bool ReadShape(std::string_view proto, std::vector<int64_t>* shape) {  // TensorShapeProto
  auto fields = ReadFields(proto);
  if (!fields) return false;
  for (const Field& dim : *fields) {
    if (dim.number != 2 || dim.wire_type != kLengthDelimited) continue;
    auto dim_fields = ReadFields(dim.bytes);
    if (!dim_fields) return false;
    int64_t size = 0;
    for (const Field& d : *dim_fields) {
      if (d.number == 1 && d.wire_type == kVarint) size = static_cast<int64_t>(d.scalar);
    }
    shape->push_back(size);
  }
  return true;
}

// How TensorProto's repeated value fields (float_val, double_val, int_val, ...) are encoded;
// nullopt for its other fields.
std::optional<Number> TensorProtoValueField(uint32_t field) {
  switch (field) {
    case 5:  // float_val
    case 9:  // scomplex_val
      return Number::kFloat;
    case 6:   // double_val
    case 12:  // dcomplex_val
      return Number::kDouble;
    case 7:
      return Number::kInt32;
    case 10:
      return Number::kInt64;
    case 11:
      return Number::kBool;
    case 13:
      return Number::kHalf;
    case 16:  // uint32_val
    case 17:  // uint64_val
      return Number::kUint64;
    default:
      return std::nullopt;
  }
}

// tensorflow.TensorProto.
bool ReadTensorProto(std::string_view proto, Tensor* t) {
  auto fields = ReadFields(proto);
  if (!fields) return false;
  uint64_t dtype = 0;
  std::string_view content;
  for (const Field& f : *fields) {
    bool ok = true;
    if (auto kind = TensorProtoValueField(f.number)) {
      ok = AppendNumbers(f, *kind, &t->numbers);
    } else if (f.number == 1) {
      dtype = f.scalar;
    } else if (f.number == 2) {
      ok = f.wire_type == kLengthDelimited && ReadShape(f.bytes, &t->shape);
    } else if (f.number == 4) {
      content = f.bytes;
    } else if (f.number == 8) {
      ok = f.wire_type == kLengthDelimited;
      t->strings.emplace_back(f.bytes);
    }  // version_number, resource handles, variants: not part of a prediction
    if (!ok) return false;
  }
  t->type = std::to_string(dtype);
  if (content.empty()) return true;
  bool known = false;
  if (!AppendRawByType(t->type, content, &t->numbers, &known)) return false;
  if (!known) t->raw = content;
  return true;
}

// tensorflow.serving.PredictResponse: outputs (field 1, map<string, TensorProto>).
bool ReadPredictResponse(std::string_view message, Outputs* outputs) {
  auto fields = ReadFields(message);
  if (!fields) return false;
  for (const Field& entry : *fields) {
    if (entry.number != 1) continue;  // model_spec names the version: differs by design
    if (entry.wire_type != kLengthDelimited) return false;
    auto kv = ReadFields(entry.bytes);
    if (!kv) return false;
    std::string name;
    std::string_view value;
    for (const Field& f : *kv) {
      if (f.number == 1) name = f.bytes;
      if (f.number == 2) value = f.bytes;
    }
    if (!ReadTensorProto(value, &(*outputs)[name])) return false;
  }
  return true;
}

// inference.ModelInferResponse.InferTensorContents.
bool ReadContents(std::string_view message, Tensor* t) {
  auto fields = ReadFields(message);
  if (!fields) return false;
  static constexpr Number kByField[] = {Number::kBool,   Number::kBool,   Number::kInt32, Number::kInt64,
                                        Number::kUint64, Number::kUint64, Number::kFloat, Number::kDouble};
  for (const Field& f : *fields) {
    if (f.number == 8) {
      t->strings.emplace_back(f.bytes);
    } else if (f.number >= 1 && f.number <= 7 && !AppendNumbers(f, kByField[f.number], &t->numbers)) {
      return false;
    }
  }
  return true;
}

// BYTES raw content: each element a 4-byte little-endian length, then the bytes.
bool SplitRawStrings(std::string_view raw, std::vector<std::string>* out) {
  while (!raw.empty()) {
    if (raw.size() < 4) return false;
    uint32_t length;
    std::memcpy(&length, raw.data(), 4);
    raw.remove_prefix(4);
    if (length > raw.size()) return false;
    out->emplace_back(raw.substr(0, length));
    raw.remove_prefix(length);
  }
  return true;
}

// inference.ModelInferResponse: outputs (field 5), raw_output_contents (field 6, the i-th for the
// i-th output).
bool ReadModelInferResponse(std::string_view message, Outputs* outputs) {
  auto fields = ReadFields(message);
  if (!fields) return false;
  std::vector<Tensor*> in_order;
  std::vector<std::string_view> raws;
  for (const Field& f : *fields) {
    if (f.number == 6) raws.push_back(f.bytes);
    if (f.number != 5) continue;  // model name and version differ by design; id and parameters too
    auto tensor_fields = ReadFields(f.bytes);
    if (!tensor_fields) return false;
    std::string name;
    Tensor t;
    for (const Field& tf : *tensor_fields) {
      if (tf.number == 1) name = tf.bytes;
      if (tf.number == 2) t.type = tf.bytes;
      if (tf.number == 3) {
        std::vector<double> dims;
        if (!AppendNumbers(tf, Number::kInt64, &dims)) return false;
        for (double d : dims) t.shape.push_back(static_cast<int64_t>(d));
      }
      if (tf.number == 5 && !ReadContents(tf.bytes, &t)) return false;
    }
    Tensor& stored = (*outputs)[name] = std::move(t);
    in_order.push_back(&stored);
  }
  if (raws.size() > in_order.size()) return false;
  for (size_t i = 0; i < raws.size(); ++i) {
    Tensor& t = *in_order[i];
    if (t.type == "BYTES") {
      if (!SplitRawStrings(raws[i], &t.strings)) return false;
      continue;
    }
    bool known = false;
    if (!AppendRawByType(t.type, raws[i], &t.numbers, &known)) return false;
    if (!known) t.raw = raws[i];
  }
  return true;
}

bool TensorsAgree(const Tensor& a, const Tensor& b, double tolerance) {
  if (a.type != b.type || a.shape != b.shape || a.strings != b.strings || a.raw != b.raw) return false;
  if (a.numbers.size() != b.numbers.size()) return false;
  for (size_t i = 0; i < a.numbers.size(); ++i) {
    if (!NumbersAgree(a.numbers[i], b.numbers[i], tolerance)) return false;
  }
  return true;
}

using Reader = bool (*)(std::string_view, Outputs*);

Reader ReaderFor(std::string_view path) {
  if (path == "/tensorflow.serving.PredictionService/Predict") return ReadPredictResponse;
  if (path == "/inference.GRPCInferenceService/ModelInfer") return ReadModelInferResponse;
  return nullptr;
}

// The answer's outputs, from its single uncompressed message; nullopt when it is not that.
std::optional<Outputs> Decode(Reader read, std::string_view body) {
  auto messages = http2::SplitGrpcMessages(body);
  if (!messages.ok() || messages->size() != 1 || (*messages)[0].compressed) return std::nullopt;
  Outputs outputs;
  if (!read((*messages)[0].payload, &outputs)) return std::nullopt;
  return outputs;
}

}  // namespace

bool GrpcResponsesAgree(std::string_view path, int primary_code, std::string_view primary_body, int mirror_code,
                        std::string_view mirror_body, double tolerance) {
  if (primary_code != mirror_code) return false;
  if (primary_body == mirror_body) return true;
  const Reader read = ReaderFor(path);
  if (!read) return false;
  const std::optional<Outputs> a = Decode(read, primary_body);
  const std::optional<Outputs> b = Decode(read, mirror_body);
  if (!a || !b || a->size() != b->size()) return false;
  for (const auto& [name, tensor] : *a) {
    auto other = b->find(name);
    if (other == b->end() || !TensorsAgree(tensor, other->second, tolerance)) return false;
  }
  return true;
}

}  // namespace mf::router
