// tensorflow.TensorProto <-> runtime::Tensor, and the other TF Serving protos built from
// model_info.h values.
//
// Decoding accepts tensor_content (raw little-endian row-major bytes, exactly the tensor's size)
// or the dtype's *_val field (int_val for INT8/INT16/UINT8/UINT16/INT32, half_val for HALF and
// BFLOAT16 bit patterns, ...), either one value per element or a single value broadcast to the
// whole shape; anything else (values in the wrong field, a count that is neither 1 nor the
// element count, out-of-range narrow integers, negative dims, unknown_rank, a shape above
// runtime::kMaxTensorBytes, a broadcast above kMaxBroadcastBytes) is INVALID_ARGUMENT before anything large is
// allocated.
#pragma once

#include "common/status.h"
#include "runtime/tensor.h"
#include "server/codec/model_info.h"
#include "tensorflow/core/framework/tensor.pb.h"
#include "tensorflow/core/framework/types.pb.h"
#include "tensorflow/core/protobuf/meta_graph.pb.h"
#include "tensorflow_serving/apis/get_model_status.pb.h"

namespace mf::codec {

// A single *_val value broadcast to the whole shape may expand to at most this many bytes: a
// 20-byte message must not be able to make the server allocate gigabytes.
inline constexpr size_t kMaxBroadcastBytes = size_t{16} << 20;

tensorflow::DataType ToTfDataType(runtime::DataType dtype);
// INVALID_ARGUMENT for dtypes ModelFleet has no tensor type for (complex, resource, ...).
StatusOr<runtime::DataType> FromTfDataType(tensorflow::DataType dtype);

StatusOr<runtime::Tensor> TensorFromProto(const tensorflow::TensorProto& proto);

enum class TensorProtoEncoding {
  kTensorContent,  // numeric tensors as raw bytes (compact)
  kTypedValues,    // every tensor in its *_val field (what TF Serving's Predict answers carry)
};
// Strings always use string_val.
void TensorToProto(const runtime::Tensor& tensor, TensorProtoEncoding encoding, tensorflow::TensorProto* proto);

void SignatureToProto(const ModelSignature& signature, tensorflow::SignatureDef* proto);
void VersionStatusToProto(const ModelVersionStatus& status, tensorflow::serving::ModelVersionStatus* proto);

}  // namespace mf::codec
