// KServe v2 gRPC tensors (inference.ModelInferRequest / ModelInferResponse) <-> runtime::Tensor.
// Inputs come either in typed `contents` or, for every input at once, in raw_input_contents
// (little-endian row-major bytes; BYTES as 4-byte length-prefixed elements), never both.
#pragma once

#include <span>
#include <vector>

#include "common/status.h"
#include "inference/grpc_predict_v2.pb.h"
#include "runtime/tensor.h"
#include "server/codec/model_info.h"
#include "server/codec/named_tensor.h"

namespace mf::codec {

// All inputs of a request, in request order. INVALID_ARGUMENT when a datatype is unknown, a
// shape is negative or too large, the contents field does not match the datatype, counts do
// not match the shape, or raw_input_contents is used partially or with contents.
StatusOr<std::vector<NamedTensor>> InputsFromModelInferRequest(const inference::ModelInferRequest& request);

enum class V2OutputEncoding {
  kRaw,       // raw_output_contents, one entry per output (what Triton's clients expect)
  kContents,  // typed contents
};
// Appends the outputs to the response. The protocol has no typed field for FP16/BF16, and
// raw_output_contents must then cover every output, so a response holding one of them is
// written raw whatever `encoding` asks.
void AddOutputsToModelInferResponse(std::span<const NamedTensorView> outputs, V2OutputEncoding encoding,
                                    inference::ModelInferResponse* response);

void SignatureToV2Metadata(const ModelSignature& signature, inference::ModelMetadataResponse* proto);

}  // namespace mf::codec
