// Element-type dispatch shared by the CPU and CUDA kernels: calls a generic lambda with a value
// of the C++ type an element has, so one templated body serves every type.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "common/status.h"
#include "runtime/tensor.h"

namespace mf::runtime::ops {

// Calls fn(T{}) with T the C++ type of `dtype` for the numeric types, and for float16 when the
// caller names its C++ type as `Half` (the CUDA kernels pass __half; plain C++ has none).
// UNIMPLEMENTED for the others.
template <typename Half = void, typename Fn>
Status DispatchNumeric(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32:
      return fn(float{});
    case DataType::kFloat64:
      return fn(double{});
    case DataType::kInt32:
      return fn(int32_t{});
    case DataType::kInt64:
      return fn(int64_t{});
    case DataType::kInt8:
      return fn(int8_t{});
    case DataType::kUInt8:
      return fn(uint8_t{});
    case DataType::kInt16:
      return fn(int16_t{});
    case DataType::kUInt16:
      return fn(uint16_t{});
    case DataType::kUInt32:
      return fn(uint32_t{});
    case DataType::kUInt64:
      return fn(uint64_t{});
    case DataType::kFloat16:
      if constexpr (!std::is_void_v<Half>) return fn(Half{});
      break;
    default:
      break;
  }
  return Unimplemented("element type " + std::string(DataTypeName(dtype)) + " is not supported");
}

// Calls fn(T{}) with an unsigned type of the element's width: for ops that move elements
// without looking at them.
template <typename Fn>
Status DispatchBySize(DataType dtype, Fn&& fn) {
  switch (ElementSize(dtype)) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    case 8:
      return fn(uint64_t{});
    default:
      return Unimplemented("element type " + std::string(DataTypeName(dtype)) + " is not supported");
  }
}

}  // namespace mf::runtime::ops
