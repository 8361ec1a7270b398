// The model configuration Triton reports for a model (GET /v2/models/{m}/config and gRPC
// inference.GRPCInferenceService/ModelConfig), built from what modelfleet-server serves: the
// version's signature, its batching and device, and the model's version policy. Tools written
// for Triton (tritonclient's get_model_config, perf_analyzer, model navigators) read the batch
// dimension from it: with server-side batching, max_batch_size is the batch limit and dims leave
// the batch dimension out; without, max_batch_size is 0 and dims are the full shape, as Triton
// describes a model that does not batch.
#pragma once

#include <string>
#include <string_view>

#include "inference/model_config.pb.h"
#include "server/repository/model_config.h"
#include "server/repository/servable.h"

namespace mf::server {

// Triton's platform name for ONNX models served by its ONNX Runtime backend.
inline constexpr std::string_view kTritonOnnxPlatform = "onnxruntime_onnx";

inference::ModelConfig TritonModelConfig(std::string_view model, const Servable& servable, const VersionPolicy& policy);

// The JSON Triton's HTTP endpoint answers: the protobuf JSON form with the original field
// names, enums by name, int64 values as numbers (Triton rewrites protobuf's quoted int64s), and
// every field of the declared subset present, defaults included.
std::string TritonModelConfigJson(const inference::ModelConfig& config);

}  // namespace mf::server
