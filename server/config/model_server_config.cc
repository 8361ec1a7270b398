#include "server/config/model_server_config.h"

#include <algorithm>
#include <cctype>

#include "server/config/model_server_config_yaml.h"
#include "server/config/text_proto.h"

namespace mf::server {

Status CheckModelPlatform(const std::string& model, const std::string& platform) {
  // "tensorflow" is what nearly every TF Serving config says: a config moved over unchanged
  // serves the model.onnx put in each version directory (a SavedModel there fails to load, and
  // its model status says so).
  if (platform.empty() || platform == "onnx" || platform == "onnxruntime_onnx" || platform == "onnx_onnxv1" ||
      platform == "tensorflow") {
    return Status::Ok();
  }
  return InvalidArgument("model config '" + model + "': model_platform '" + platform +
                         "' is not supported; ModelFleet serves ONNX models (use \"onnx\")");
}

Status ModelListBuilder::Add(ModelConfig config) {
  MF_RETURN_IF_ERROR(ValidateModelConfig(config));
  if (!names_.insert(config.name).second) {
    return InvalidArgument("model config: model '" + config.name + "' is listed twice");
  }
  configs_.push_back(std::move(config));
  return Status::Ok();
}

StatusOr<std::vector<ModelConfig>> ModelListBuilder::Finish() && {
  if (configs_.empty()) return InvalidArgument("model config: model_config_list has no models");
  return std::move(configs_);
}

StatusOr<std::vector<ModelConfig>> ModelConfigsFromProto(const tensorflow::serving::ModelServerConfig& proto) {
  if (proto.config_case() == tensorflow::serving::ModelServerConfig::kCustomModelConfig) {
    return InvalidArgument("model config: custom_model_config is not supported; use model_config_list");
  }
  ModelListBuilder list;
  for (const auto& entry : proto.model_config_list().config()) {
    ModelConfig config;
    config.name = entry.name();
    config.base_path = entry.base_path();
    MF_RETURN_IF_ERROR(CheckModelPlatform(config.name, entry.model_platform()));
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
        if (policy.latest().num_versions() > kMaxLatestVersions) {
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
    MF_RETURN_IF_ERROR(list.Add(std::move(config)));
  }
  return std::move(list).Finish();
}

bool IsYamlConfigPath(std::string_view path) {
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() &&
           std::equal(suffix.begin(), suffix.end(), path.end() - static_cast<std::ptrdiff_t>(suffix.size()),
                      [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); });
  };
  return ends_with(".yaml") || ends_with(".yml");
}

StatusOr<std::vector<ModelConfig>> LoadModelServerConfigFile(const std::string& path) {
  if (IsYamlConfigPath(path)) return LoadModelServerConfigYamlFile(path);
  tensorflow::serving::ModelServerConfig proto;
  MF_RETURN_IF_ERROR(ParseTextProtoFile(path, &proto));
  auto configs = ModelConfigsFromProto(proto);
  if (!configs.ok()) return configs.status().WithContext(path);
  return configs;
}

}  // namespace mf::server
