// The resource model the API layer serves: for every resource (built-in or defined by a CRD) its
// names, scope, subresources, printer columns and OpenAPI schema. Discovery, OpenAPI, Table
// output and routing all read one immutable snapshot, replaced whenever a CRD changes.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "tools/local/store/store.h"

namespace mf::local {

struct PrinterColumn {
  std::string name;
  std::string type;  // string | integer | number | boolean | date
  std::string format;
  std::string description;
  std::string json_path;  // ".spec.replicas"; empty for the computed built-in columns
  int priority = 0;
};

struct ScaleSubresource {
  std::string spec_replicas_path = ".spec.replicas";
  std::string status_replicas_path = ".status.replicas";
  std::string label_selector_path;  // optional
};

struct ResourceInfo {
  ResourceType type;  // gvr, kind, scope, status subresource, admission
  std::string singular;
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  std::optional<ScaleSubresource> scale;
  bool has_log = false;  // pods/log
  std::vector<PrinterColumn> columns;  // besides Name; empty: Age only
  nlohmann::json schema;               // OpenAPI v3 schema of the kind (object)
  bool is_custom = false;              // served from a CRD

  const GroupVersionResource& gvr() const { return type.gvr; }
};

class ResourceCatalog {
 public:
  using Snapshot = std::vector<ResourceInfo>;
  ResourceCatalog();  // starts with the built-in resources

  std::shared_ptr<const Snapshot> snapshot() const;
  // Replaces every resource served from the CRD named `crd_name` by `resources`.
  void SetCrdResources(const std::string& crd_name, std::vector<ResourceInfo> resources);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_;
  std::vector<ResourceInfo> builtins_;
  std::vector<std::pair<std::string, std::vector<ResourceInfo>>> crds_;
};

// Lookup helpers over a snapshot.
const ResourceInfo* FindResource(const ResourceCatalog::Snapshot& snap, const std::string& group,
                                 const std::string& version, const std::string& resource);

std::vector<ResourceInfo> BuiltinResources();

// The resources a CustomResourceDefinition object defines (one per served version), with
// defaulting/validation from its schema. INVALID_ARGUMENT when the CRD itself is invalid.
StatusOr<std::vector<ResourceInfo>> ResourcesFromCrd(const nlohmann::json& crd);
// Checks a CRD before it is stored (names, versions, schemas).
Status ValidateCrd(nlohmann::json& crd, const nlohmann::json* old);

}  // namespace mf::local
