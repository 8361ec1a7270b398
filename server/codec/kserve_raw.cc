#include "server/codec/kserve_raw.h"

#include <cstring>
#include <utility>

#include "server/codec/json_tensor_reader.h"

namespace mf::codec {

Status CheckRequestShape(runtime::DataType dtype, const runtime::Shape& shape, std::string_view what) {
  if (shape.size() > static_cast<size_t>(json::kMaxNesting)) {
    return InvalidArgument(std::string(what) + ": rank " + std::to_string(shape.size()) + " exceeds the limit of " +
                           std::to_string(json::kMaxNesting));
  }
  for (int64_t d : shape) {
    if (d < 0) {
      return InvalidArgument(std::string(what) + ": shape " + runtime::ShapeToString(shape) +
                             " has a negative dimension");
    }
  }
  const int64_t n = runtime::NumElements(shape);
  const size_t per_element = dtype == runtime::DataType::kString ? sizeof(std::string) : runtime::ElementSize(dtype);
  if (n < 0 || static_cast<uint64_t>(n) > runtime::kMaxTensorBytes / per_element) {
    return InvalidArgument(std::string(what) + ": shape " + runtime::ShapeToString(shape) + " is too large (limit " +
                           std::to_string(runtime::kMaxTensorBytes >> 20) + " MiB)");
  }
  return Status::Ok();
}

StatusOr<runtime::Tensor> TensorFromV2Raw(runtime::DataType dtype, runtime::Shape shape, std::string_view raw,
                                          std::string_view what) {
  MF_RETURN_IF_ERROR(CheckRequestShape(dtype, shape, what));
  const int64_t n = runtime::NumElements(shape);
  if (dtype != runtime::DataType::kString) {
    const size_t expected = static_cast<size_t>(n) * runtime::ElementSize(dtype);
    if (raw.size() != expected) {
      return InvalidArgument(std::string(what) + ": " + std::to_string(raw.size()) + " raw bytes for shape " +
                             runtime::ShapeToString(shape) + " of " + std::string(runtime::DataTypeName(dtype)) +
                             ", expected " + std::to_string(expected));
    }
    return runtime::Tensor::FromBytes(dtype, std::move(shape), raw);
  }
  // Every element needs at least its 4-byte length, which bounds the count before allocating.
  if (static_cast<uint64_t>(n) > raw.size() / 4) {
    return InvalidArgument(std::string(what) + ": " + std::to_string(raw.size()) + " raw bytes cannot hold " +
                           std::to_string(n) + " BYTES elements");
  }
  std::vector<std::string> strings;
  strings.reserve(static_cast<size_t>(n));
  size_t pos = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (raw.size() - pos < 4) {
      return InvalidArgument(std::string(what) + ": raw BYTES data ends inside the length of element " +
                             std::to_string(i));
    }
    const auto* p = reinterpret_cast<const unsigned char*>(raw.data() + pos);
    const uint32_t len = uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
    pos += 4;
    if (len > raw.size() - pos) {
      return InvalidArgument(std::string(what) + ": BYTES element " + std::to_string(i) + " claims " +
                             std::to_string(len) + " bytes but only " + std::to_string(raw.size() - pos) + " remain");
    }
    strings.emplace_back(raw.substr(pos, len));
    pos += len;
  }
  if (pos != raw.size()) {
    return InvalidArgument(std::string(what) + ": " + std::to_string(raw.size() - pos) + " raw bytes left over after " +
                           std::to_string(n) + " BYTES elements");
  }
  MF_ASSIGN_OR_RETURN(runtime::Tensor tensor, runtime::Tensor::Allocate(dtype, std::move(shape)));
  tensor.strings() = std::move(strings);
  return tensor;
}

void AppendV2Raw(const runtime::Tensor& tensor, std::string* out) {
  if (tensor.dtype() != runtime::DataType::kString) {
    out->append(tensor.bytes());
    return;
  }
  for (const auto& s : tensor.strings()) {
    const auto len = static_cast<uint32_t>(s.size());
    const char prefix[4] = {static_cast<char>(len & 0xFF), static_cast<char>((len >> 8) & 0xFF),
                            static_cast<char>((len >> 16) & 0xFF), static_cast<char>((len >> 24) & 0xFF)};
    out->append(prefix, 4);
    out->append(s);
  }
}

}  // namespace mf::codec
