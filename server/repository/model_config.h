// What the server is asked to serve for one model: where its versions live, which of them to
// keep loaded, and the labels that name versions. Built from --model_name/--model_base_path or
// from one entry of ModelServerConfig's model_config_list.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "common/status.h"

namespace mf::server {

// TF Serving's FileSystemStoragePathSourceConfig.ServableVersionPolicy.
struct VersionPolicy {
  enum class Kind { kLatest, kAll, kSpecific };
  Kind kind = Kind::kLatest;
  int num_versions = 1;        // kLatest
  std::set<int64_t> versions;  // kSpecific

  static VersionPolicy Latest(int n) { return {Kind::kLatest, n, {}}; }
  static VersionPolicy All() { return {Kind::kAll, 0, {}}; }
  static VersionPolicy Specific(std::set<int64_t> v) { return {Kind::kSpecific, 0, std::move(v)}; }
  friend bool operator==(const VersionPolicy&, const VersionPolicy&) = default;
};

// The versions the policy wants loaded, out of those found on disk. Pure.
std::set<int64_t> SelectVersions(const VersionPolicy& policy, const std::set<int64_t>& on_disk);

struct ModelConfig {
  std::string name;
  std::string base_path;
  VersionPolicy policy;
  std::map<std::string, int64_t> version_labels;
  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

// Names must be non-empty and URL-path safe; base_path non-empty; latest N >= 1; specific
// needs at least one version >= 0; labels non-empty and version >= 0.
Status ValidateModelConfig(const ModelConfig& config);

}  // namespace mf::server
