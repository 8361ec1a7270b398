// Conversion between ONNX TensorProto (initializers, Constant values, the conformance suite's
// input_N.pb / output_N.pb files) and Tensor. Every size in the proto is checked against the
// data actually present before anything is allocated, so a hostile file cannot make us allocate
// more than it contains (or more than kMaxTensorBytes).
#pragma once

#include <cstdint>
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
// External data is read straight into the tensor's buffer, after its length was checked
// against the file and the shape.
StatusOr<Tensor> TensorFromOnnx(const onnx::TensorProto& proto, const std::string& model_dir);

// Reads [offset, offset + length) of `fd` into `out` (pread, in 32 KiB slices); DATA_LOSS on a
// read error or when the file ends first.
Status ReadFileRange(int fd, uint64_t offset, uint64_t length, void* out);

// Where a tensor's raw_data was left in the model file (graph/raw_data_split.h): it is read from
// there straight into the tensor, as external data is.
struct RawDataInFile {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Same, but takes the proto's payload: `*proto` is left empty (its data freed when this
// returns, success or not), so a model's weights are never held twice over more than one
// tensor at a time while a graph is built from its ModelProto. With `raw_data_in_file`, the
// tensor's raw_data comes from there (the proto has none).
StatusOr<Tensor> TakeTensorFromOnnx(onnx::TensorProto* proto, const std::string& model_dir,
                                    const RawDataInFile* raw_data_in_file = nullptr);

// Parses a serialized TensorProto (the conformance suite's .pb files).
StatusOr<Tensor> TensorFromOnnxBytes(std::string_view bytes);

}  // namespace mf::runtime
