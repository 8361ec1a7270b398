#include "server/config/model_server_config.h"

#include <set>

#include "server/config/text_proto.h"

namespace mf::server {

StatusOr<std::vector<ModelConfig>> ModelConfigsFromProto(const tensorflow::serving::ModelServerConfig& proto) {
  if (proto.config_case() == tensorflow::serving::ModelServerConfig::kCustomModelConfig) {
    return InvalidArgument("model config: custom_model_config is not supported; use model_config_list");
  }
  std::vector<ModelConfig> configs;
  std::set<std::string> names;
  for (const auto& entry : proto.model_config_list().config()) {
    ModelConfig config;
    config.name = entry.name();
    config.base_path = entry.base_path();
    const std::string& platform = entry.model_platform();
    if (!platform.empty() && platform != "onnx" && platform != "onnxruntime_onnx" && platform != "onnx_onnxv1") {
      return InvalidArgument("model config '" + config.name + "': model_platform '" + platform +
                             "' is not supported; ModelFleet serves ONNX models (use \"onnx\")");
    }
    const auto& policy = entry.model_version_policy();
    switch (policy.policy_choice_case()) {
      case tensorflow::serving::FileSystemStoragePathSourceConfig::ServableVersionPolicy::kAll:
        config.policy = VersionPolicy::All();
        break;
      case tensorflow::serving::FileSystemStoragePathSourceConfig::ServableVersionPolicy::kSpecific:
        config.policy =
            VersionPolicy::Specific({policy.specific().versions().begin(), policy.specific().versions().end()});
        break;
      case tensorflow::serving::FileSystemStoragePathSourceConfig::ServableVersionPolicy::kLatest:
        if (policy.latest().num_versions() > 1'000'000) {
          return InvalidArgument("model config '" + config.name + "': latest num_versions " +
                                 std::to_string(policy.latest().num_versions()) + " is too large");
        }
        config.policy = VersionPolicy::Latest(static_cast<int>(policy.latest().num_versions()));
        break;
      default:
        config.policy = VersionPolicy::Latest(1);  // TF Serving's default policy
        break;
    }
    for (const auto& [label, version] : entry.version_labels()) config.version_labels[label] = version;
    MF_RETURN_IF_ERROR(ValidateModelConfig(config));
    if (!names.insert(config.name).second) {
      return InvalidArgument("model config: model '" + config.name + "' is listed twice");
    }
    configs.push_back(std::move(config));
  }
  if (configs.empty()) return InvalidArgument("model config: model_config_list has no models");
  return configs;
}

StatusOr<std::vector<ModelConfig>> LoadModelServerConfigFile(const std::string& path) {
  tensorflow::serving::ModelServerConfig proto;
  MF_RETURN_IF_ERROR(ParseTextProtoFile(path, &proto));
  auto configs = ModelConfigsFromProto(proto);
  if (!configs.ok()) return configs.status().WithContext(path);
  return configs;
}

}  // namespace mf::server
