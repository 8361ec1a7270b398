// TF Serving's REST answers about models (GET /v1/models/m[/versions/v][/metadata]).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "server/codec/model_info.h"

namespace mf::codec {

// {"model_version_status": [{"version": "1", "state": "AVAILABLE",
//   "status": {"error_code": "OK", "error_message": ""}}, ...]} (versions as strings: proto3
// JSON prints int64 that way).
std::string WriteRestModelStatus(std::span<const ModelVersionStatus> versions);

// {"model_spec": {"name", "signature_name": "", "version": "v"},
//  "metadata": {"signature_def": {"signature_def": {"<name>": {"inputs": {...}, "outputs": {...},
//  "method_name": "..."}}}}} — the doubled "signature_def" is TF Serving's, kept for clients.
// Each tensor is {"dtype": "DT_FLOAT", "tensor_shape": {"dim": [{"size": "-1", "name": ""}],
// "unknown_rank": false}, "name": "<graph name>"}.
std::string WriteRestModelMetadata(std::string_view model_name, int64_t version,
                                   std::span<const ModelSignature> signatures);

}  // namespace mf::codec
