// Small builders shared by the codec tests.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "runtime/tensor.h"
#include "server/codec/model_info.h"

namespace mf::codec::testing {

template <typename T>
runtime::Tensor MakeTensor(runtime::DataType dtype, runtime::Shape shape, const std::vector<T>& values) {
  auto tensor = runtime::Tensor::Allocate(dtype, std::move(shape));
  EXPECT_TRUE(tensor.ok()) << tensor.status().ToString();
  EXPECT_EQ(static_cast<size_t>(tensor->num_elements()), values.size());
  EXPECT_EQ(tensor->byte_size(), values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(tensor->raw_data(), values.data(), values.size() * sizeof(T));
  return std::move(tensor).value();
}

inline runtime::Tensor MakeStrings(runtime::Shape shape, std::vector<std::string> values) {
  auto tensor = runtime::Tensor::Allocate(runtime::DataType::kString, std::move(shape));
  EXPECT_TRUE(tensor.ok());
  tensor->strings() = std::move(values);
  return std::move(tensor).value();
}

template <typename T>
std::vector<T> Values(const runtime::Tensor& tensor) {
  std::vector<T> out(static_cast<size_t>(tensor.num_elements()));
  if (!out.empty()) std::memcpy(out.data(), tensor.raw_data(), out.size() * sizeof(T));
  return out;
}

inline runtime::TensorInfo Info(std::string name, runtime::DataType dtype, runtime::Shape shape) {
  return runtime::TensorInfo{std::move(name), dtype, std::move(shape)};
}

inline ModelSignature Signature(std::vector<runtime::TensorInfo> inputs,
                                std::vector<runtime::TensorInfo> outputs = {}) {
  ModelSignature signature;
  signature.inputs = std::move(inputs);
  signature.outputs = std::move(outputs);
  return signature;
}

}  // namespace mf::codec::testing
