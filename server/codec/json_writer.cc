#include "server/codec/json_writer.h"

#include <simdjson.h>

#include <charconv>
#include <cmath>
#include <cstring>

#include "server/codec/half.h"

namespace mf::codec::json {
namespace {

template <typename F>
void AppendFloating(std::string* out, F v) {
  if (std::isnan(v)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(v)) {
    out->append(v < 0 ? "-Infinity" : "Infinity");
    return;
  }
  char buf[40];
  auto result = std::to_chars(buf, buf + sizeof(buf), v);
  std::string_view text(buf, static_cast<size_t>(result.ptr - buf));
  out->append(text);
  // Keep floats recognizable as floats to consumers that infer types from tokens.
  if (text.find_first_of(".e") == std::string_view::npos) out->append(".0");
}

template <typename I>
void AppendInteger(std::string* out, I v) {
  char buf[24];
  auto result = std::to_chars(buf, buf + sizeof(buf), v);
  out->append(buf, static_cast<size_t>(result.ptr - buf));
}

template <typename T, typename Fn>
void AppendRun(std::string* out, const T* data, int64_t begin, int64_t end, Fn&& append_one) {
  for (int64_t i = begin; i < end; ++i) {
    if (i != begin) out->push_back(',');
    append_one(out, data[i]);
  }
}

}  // namespace

bool IsValidUtf8(std::string_view s) { return simdjson::validate_utf8(s.data(), s.size()); }

void AppendString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run_start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run_start, i - run_start);
    run_start = i + 1;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default: {
        char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        out->append(esc, sizeof(esc));
      }
    }
  }
  out->append(s.data() + run_start, s.size() - run_start);
  out->push_back('"');
}

void AppendFloat(std::string* out, float v) { AppendFloating(out, v); }
void AppendDouble(std::string* out, double v) { AppendFloating(out, v); }
void AppendInt(std::string* out, int64_t v) { AppendInteger(out, v); }
void AppendUInt(std::string* out, uint64_t v) { AppendInteger(out, v); }

void AppendElements(std::string* out, const runtime::Tensor& t, int64_t begin, int64_t end) {
  using runtime::DataType;
  auto ints = [](std::string* o, auto v) { AppendInteger(o, v); };
  switch (t.dtype()) {
    case DataType::kFloat32:
      AppendRun(out, t.data<float>(), begin, end, [](std::string* o, float v) { AppendFloating(o, v); });
      break;
    case DataType::kFloat64:
      AppendRun(out, t.data<double>(), begin, end, [](std::string* o, double v) { AppendFloating(o, v); });
      break;
    case DataType::kFloat16:
      AppendRun(out, t.data<uint16_t>(), begin, end,
                [](std::string* o, uint16_t v) { AppendFloating(o, HalfToFloat(v)); });
      break;
    case DataType::kBFloat16:
      AppendRun(out, t.data<uint16_t>(), begin, end,
                [](std::string* o, uint16_t v) { AppendFloating(o, BFloat16ToFloat(v)); });
      break;
    case DataType::kInt8:
      AppendRun(out, t.data<int8_t>(), begin, end, ints);
      break;
    case DataType::kInt16:
      AppendRun(out, t.data<int16_t>(), begin, end, ints);
      break;
    case DataType::kInt32:
      AppendRun(out, t.data<int32_t>(), begin, end, ints);
      break;
    case DataType::kInt64:
      AppendRun(out, t.data<int64_t>(), begin, end, ints);
      break;
    case DataType::kUInt8:
      AppendRun(out, t.data<uint8_t>(), begin, end, ints);
      break;
    case DataType::kUInt16:
      AppendRun(out, t.data<uint16_t>(), begin, end, ints);
      break;
    case DataType::kUInt32:
      AppendRun(out, t.data<uint32_t>(), begin, end, ints);
      break;
    case DataType::kUInt64:
      AppendRun(out, t.data<uint64_t>(), begin, end, ints);
      break;
    case DataType::kBool:
      AppendRun(out, t.data<uint8_t>(), begin, end, [](std::string* o, uint8_t v) { o->append(v ? "true" : "false"); });
      break;
    case DataType::kString:
      for (int64_t i = begin; i < end; ++i) {
        if (i != begin) out->push_back(',');
        AppendString(out, t.strings()[static_cast<size_t>(i)]);
      }
      break;
  }
}

void AppendElement(std::string* out, const runtime::Tensor& tensor, int64_t index) {
  AppendElements(out, tensor, index, index + 1);
}

}  // namespace mf::codec::json
