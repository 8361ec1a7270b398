// TF Serving gRPC request/response messages <-> tensors and model descriptions, on top of the
// TensorProto codec (tensor_proto.h), so the gRPC PredictionService and ModelService handlers
// only route.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/codec/model_info.h"
#include "server/codec/named_tensor.h"
#include "server/codec/tensor_proto.h"
#include "tensorflow_serving/apis/get_model_metadata.pb.h"
#include "tensorflow_serving/apis/get_model_status.pb.h"
#include "tensorflow_serving/apis/predict.pb.h"

namespace mf::codec {

// PredictRequest.inputs decoded into signature order (what Session::Run takes). Names are
// matched against the signature before any tensor is decoded, so a request cannot make the server
// expand broadcasts for inputs the model does not have; then each tensor is decoded and checked
// against its declared dtype and shape. Errors name the input.
StatusOr<std::vector<runtime::Tensor>> InputsFromPredictRequest(const tensorflow::serving::PredictRequest& request,
                                                                const ModelSignature& signature);

// Which outputs to return: all of them when output_filter is empty, else the named ones in the
// filter's order. INVALID_ARGUMENT for a name the signature does not have, or one named twice.
StatusOr<std::vector<size_t>> SelectOutputs(const ModelSignature& signature,
                                            const google::protobuf::RepeatedPtrField<std::string>& output_filter);

// Adds the outputs to response->outputs (tensor_content encoding, as TF Serving answers).
void AddOutputsToPredictResponse(std::span<const NamedTensorView> outputs,
                                 tensorflow::serving::PredictResponse* response);

// Fills model_spec and metadata["signature_def"] (a SignatureDefMap in an Any). Only the
// "signature_def" metadata field exists; asking for another, or for none, is INVALID_ARGUMENT.
Status FillModelMetadataResponse(std::string_view model_name, int64_t version,
                                 std::span<const ModelSignature> signatures,
                                 const google::protobuf::RepeatedPtrField<std::string>& metadata_fields,
                                 tensorflow::serving::GetModelMetadataResponse* response);

void FillModelStatusResponse(std::span<const ModelVersionStatus> versions,
                             tensorflow::serving::GetModelStatusResponse* response);

}  // namespace mf::codec
