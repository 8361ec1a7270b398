// --model_config_file (ModelServerConfig text format) and the single-model flags, turned into
// the repository's ModelConfig list, validated as a whole.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "server/repository/model_config.h"
#include "tensorflow_serving/config/model_server_config.pb.h"

namespace mf::server {

// Platforms a config may name: ours ("onnx") and the aliases other servers use for ONNX; empty
// means "onnx". Anything else (e.g. "tensorflow") is refused with a clear message.
StatusOr<std::vector<ModelConfig>> ModelConfigsFromProto(const tensorflow::serving::ModelServerConfig& proto);

StatusOr<std::vector<ModelConfig>> LoadModelServerConfigFile(const std::string& path);

}  // namespace mf::server
