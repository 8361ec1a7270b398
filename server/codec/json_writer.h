// Appending JSON pieces to a std::string: the writers in this folder build bodies directly
// (no DOM), so large tensors are written in one pass with std::to_chars.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/tensor.h"

namespace mf::codec::json {

// A quoted, escaped JSON string. Bytes are copied as they are: JSON cannot carry invalid UTF-8,
// so callers that may hold binary check IsValidUtf8 first and write {"b64": ...} instead.
void AppendString(std::string* out, std::string_view s);
bool IsValidUtf8(std::string_view s);

// Shortest round-trip form; whole numbers get ".0"; NaN, Infinity, -Infinity as TF Serving
// (and Python's json module) write them.
void AppendFloat(std::string* out, float v);
void AppendDouble(std::string* out, double v);
void AppendInt(std::string* out, int64_t v);
void AppendUInt(std::string* out, uint64_t v);

// One element of a numeric or bool tensor by flat index (FP16/BF16 as their float value).
void AppendElement(std::string* out, const runtime::Tensor& tensor, int64_t index);

// Elements [begin, end) of a non-string tensor as a flat comma-separated run (no brackets).
void AppendElements(std::string* out, const runtime::Tensor& tensor, int64_t begin, int64_t end);

}  // namespace mf::codec::json
