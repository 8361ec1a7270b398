// Conversion between ONNX TensorProto (initializers, Constant values, the conformance suite's
// input_N.pb / output_N.pb files) and Tensor. Every size in the proto is checked against the
// data actually present before anything is allocated, so a hostile file cannot make us allocate
// more than it contains (or more than kMaxTensorBytes).
#pragma once

#include <string>

#include "common/status.h"
#include "runtime/tensor.h"

namespace onnx {
class TensorProto;
}

namespace mf::runtime {

// ONNX TensorProto.DataType code -> DataType; UNIMPLEMENTED for complex and unknown codes.
StatusOr<DataType> DataTypeFromOnnx(int onnx_type);
int DataTypeToOnnx(DataType dtype);

// `model_dir` is where external data files are looked up (empty: external data is refused).
StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& model_dir);

// Parses a serialized TensorProto (the conformance suite's .pb files).
StatusOr<Tensor> TensorFromProtoBytes(std::string_view bytes);

}  // namespace mf::runtime
