// KServe v2 / Open Inference Protocol REST bodies, including the binary tensor extension:
// a body may be a JSON header followed by raw tensor bytes, the JSON length given by the
// Inference-Header-Content-Length header, each binary input naming its byte count in
// parameters.binary_data_size (in input order). Raw BYTES elements are a 4-byte little-endian
// length followed by the bytes.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "runtime/tensor.h"
#include "server/codec/model_info.h"
#include "server/codec/named_tensor.h"

namespace mf::codec {

struct V2RequestedOutput {
  std::string name;
  // parameters.binary_data; unset means the request-level binary_data_output.
  std::optional<bool> binary_data;
};

struct V2InferRequest {
  std::optional<std::string> id;
  // Inputs in request order; BindInputs() puts them in signature order.
  std::vector<NamedTensor> inputs;
  // Empty: every output, as JSON unless binary_data_output.
  std::vector<V2RequestedOutput> outputs;
  // parameters.binary_data_output: answer every output as binary.
  bool binary_data_output = false;
};

// `json_length` is the Inference-Header-Content-Length header (nullopt when absent: the whole
// body is JSON). Each input carries "data" (a flat or nested row-major list; BYTES as strings,
// BOOL as true/false, FP16/BF16 as numbers) or binary_data_size; shape and datatype are required
// and must agree with the data. INVALID_ARGUMENT on anything malformed.
StatusOr<V2InferRequest> ParseV2InferRequest(std::string_view body, std::optional<size_t> json_length);

struct V2InferResponseBody {
  std::string body;
  // Set when some output is binary: the JSON part's length, to send as
  // Inference-Header-Content-Length (Content-Type stays application/octet-stream then).
  std::optional<size_t> json_length;
};

// {"model_name", "model_version", "id"?, "outputs": [{"name", "datatype", "shape", "data" |
// "parameters": {"binary_data_size": n}}]}. `binary[i]` says whether outputs[i] is sent raw.
StatusOr<V2InferResponseBody> WriteV2InferResponse(std::string_view model_name, std::string_view model_version,
                                                   const std::optional<std::string>& id,
                                                   std::span<const NamedTensorView> outputs,
                                                   std::span<const bool> binary);

// {"name", "versions": [...], "platform", "inputs": [{"name", "datatype", "shape"}], "outputs"}.
std::string WriteV2ModelMetadata(std::string_view model_name, std::span<const std::string> versions,
                                 std::string_view platform, const ModelSignature& signature);

// {"name", "version", "extensions": [...]} for GET /v2.
std::string WriteV2ServerMetadata(std::string_view name, std::string_view version,
                                  std::span<const std::string> extensions);

}  // namespace mf::codec
