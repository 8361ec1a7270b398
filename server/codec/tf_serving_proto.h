// TF Serving gRPC request/response messages <-> tensors and model descriptions, on top of the
// TensorProto codec (tensor_proto.h): what the PredictionService and ModelService handlers
// (server/grpc/grpc_services.cc) answer, built here once, so the handlers only route. Errors
// use TF Serving's words and its order of checks (predict_util.cc, get_model_metadata_impl.cc).
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

// PredictRequest.inputs decoded into the order of `declared` (what Session::Run takes). As in TF
// Serving, the number of inputs is checked first ("input size does not match signature: ..."),
// then every name ("input tensor alias not found in signature: ..."), all before any tensor is
// decoded, so a request cannot make the server expand broadcasts for inputs the model does not
// have; then each tensor is decoded and checked against its declared dtype and shape (errors
// name the input).
StatusOr<std::vector<runtime::Tensor>> InputsFromPredictRequest(const tensorflow::serving::PredictRequest& request,
                                                                const std::vector<runtime::TensorInfo>& declared);

// Which of `declared` outputs to return: all of them when output_filter is empty, else the named
// ones in the filter's order. INVALID_ARGUMENT for a name not declared, or one named twice.
StatusOr<std::vector<size_t>> SelectOutputs(const std::vector<runtime::TensorInfo>& declared,
                                            const google::protobuf::RepeatedPtrField<std::string>& output_filter);

// Adds the outputs to response->outputs in `encoding`.
void AddOutputsToPredictResponse(std::span<const NamedTensorView> outputs, TensorProtoEncoding encoding,
                                 tensorflow::serving::PredictResponse* response);

// Only the "signature_def" metadata field exists; asking for another, or for none, is
// INVALID_ARGUMENT. TF Serving checks this before it looks the model up.
Status CheckMetadataFields(const google::protobuf::RepeatedPtrField<std::string>& metadata_fields);

// Fills model_spec (name and version) and metadata["signature_def"] (a SignatureDefMap in an Any).
void FillModelMetadataResponse(std::string_view model_name, int64_t version, std::span<const ModelSignature> signatures,
                               tensorflow::serving::GetModelMetadataResponse* response);

void FillModelStatusResponse(std::span<const ModelVersionStatus> versions,
                             tensorflow::serving::GetModelStatusResponse* response);

}  // namespace mf::codec
