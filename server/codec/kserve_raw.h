// The KServe v2 raw tensor layout shared by the binary JSON extension and the gRPC
// raw_input_contents / raw_output_contents fields: little-endian row-major elements; BYTES
// elements each as a 4-byte little-endian length followed by the bytes.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "runtime/tensor.h"

namespace mf::codec {

// Builds a tensor of `dtype` and `shape` from raw bytes, which must hold exactly the tensor
// (INVALID_ARGUMENT naming `what` otherwise). The shape is checked against the size limits
// before anything is allocated.
StatusOr<runtime::Tensor> TensorFromV2Raw(runtime::DataType dtype, runtime::Shape shape, std::string_view raw,
                                          std::string_view what);

// Appends the tensor's raw form.
void AppendV2Raw(const runtime::Tensor& tensor, std::string* out);

// Refuses negative dims, overflow, ranks above the nesting limit and tensors above
// runtime::kMaxTensorBytes (strings counted at their in-memory size), naming `what`.
Status CheckRequestShape(runtime::DataType dtype, const runtime::Shape& shape, std::string_view what);

}  // namespace mf::codec
