// Decoding JSON values into tensors with simdjson On Demand; shared by the TF Serving REST and
// KServe v2 JSON codecs. Values are appended in document order (row-major); the element type
// always comes from the caller (the signature or the request's datatype), never from the JSON.
#pragma once

#include <simdjson.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/tensor.h"

namespace mf::codec::json {

namespace od = simdjson::ondemand;

// Deepest list nesting accepted (a tensor rank); deeper input is refused, not recursed into.
inline constexpr int kMaxNesting = 32;

// The parser to read a document of `size` bytes with: this thread's reusable parser, whose
// buffers grow to the largest document it has read, or for documents above 16 MiB `*fallback`
// (a caller's local parser), so one huge request does not pin its buffers to a thread forever.
od::parser& ParserFor(size_t size, od::parser* fallback);

// Fully validates `json` (structure and every literal) with simdjson's DOM parser. On Demand
// checks structure only as it reads, and find_field_unordered assumes that an object it wraps
// around in is well formed: callers that look fields up out of order validate first.
Status ValidateJson(const simdjson::padded_string& json);

// "JSON Parse error: <what simdjson says>".
Status ParseError(simdjson::error_code error);

// TF Serving's name for a dtype in messages ("float", "int32", "string", ...).
std::string_view TfTypeName(runtime::DataType dtype);

// The values of one tensor, appended one scalar at a time.
class ValueAccumulator {
 public:
  struct Options {
    // Strings may be {"b64": "..."} objects (TF Serving REST); otherwise only JSON strings.
    bool allow_base64_objects = false;
  };
  ValueAccumulator(runtime::DataType dtype, Options options);

  // Appends one scalar: a number for numeric dtypes (NaN / Infinity / -Infinity for floats,
  // integers only for integer dtypes, in range), true/false for bool, a string (or b64 object)
  // for strings. INVALID_ARGUMENT "JSON Value: ... is not of expected type: ..." otherwise.
  Status Append(od::value& value);

  // Fast path for the common case, a plain number for a floating-point tensor: appends it and
  // returns true, or returns false having consumed nothing (then call Append for the full rules).
  bool TryAppendNumber(od::value& value);

  int64_t count() const { return count_; }
  runtime::DataType dtype() const { return dtype_; }
  // Moves the values into a tensor of `shape`, whose element count must equal count().
  StatusOr<runtime::Tensor> Finish(runtime::Shape shape);

 private:
  template <typename T>
  void Push(T v) {
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  Status AppendFloating(od::value& value);
  Status AppendInteger(od::value& value);
  Status AppendString(od::value& value);

  runtime::DataType dtype_;
  Options options_;
  std::string bytes_;
  std::vector<std::string> strings_;
  int64_t count_ = 0;
};

// A dense tensor written as nested JSON lists, TF Serving style: the shape is read off the first
// element at each level and every other list must agree ("Encountered list at unexpected size"),
// with every scalar at the same depth.
class NestedListDecoder {
 public:
  NestedListDecoder(runtime::DataType dtype, ValueAccumulator::Options options) : values_(dtype, options) {}

  // Decodes `value` sitting at nesting `level` (0 for the tensor itself; TF Serving's row form
  // decodes each instance at level 1 and sets dim 0 with SetDim0).
  Status Decode(od::value value, int level);
  void SetDim0(int64_t rows);
  StatusOr<runtime::Tensor> Finish();

 private:
  ValueAccumulator values_;
  std::vector<int64_t> dims_;  // -1 until the first list at that level has been read
  int rank_ = -1;              // -1 until the first path from the root reaches its bottom
};

// Reads `value` as a string ("JSON Value: ... must be a string" otherwise).
StatusOr<std::string_view> GetString(od::value value, std::string_view what);

// True when `value` (an object) is exactly {"b64": "<string>"}. Consumes the value.
bool IsBase64Object(od::value value);

}  // namespace mf::codec::json
