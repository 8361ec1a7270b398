// What kube-apiserver does with a CRD's structural OpenAPI v3 schema on every write: prune
// unknown fields, apply defaults, validate, including the CEL rules (x-kubernetes-validations,
// see cel/rules.h); everything else a structural schema can say is, except `format`.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mf::local {

// Removes fields the schema does not declare (unless x-kubernetes-preserve-unknown-fields).
// Returns the dotted paths removed, for strict field validation. At the root, apiVersion, kind
// and metadata are always kept.
std::vector<std::string> PruneUnknownFields(nlohmann::json& object, const nlohmann::json& schema);
// Fills in `default`s of missing properties, recursively (after pruning, as kube-apiserver).
void ApplyDefaults(nlohmann::json& object, const nlohmann::json& schema);
// Every violation as "path: message" in kube-apiserver's wording; empty when valid. Once the
// structure is valid, the schema's CEL rules run; `old` (the stored object on update, null on
// create) gives transition rules their oldSelf.
std::vector<std::string> ValidateAgainstSchema(const nlohmann::json& object, const nlohmann::json& schema,
                                               const nlohmann::json* old = nullptr);
// The CEL rules of a CRD version's schema (found at `path`) that do not compile, as
// "field: message" errors for refusing the CRD.
std::vector<std::string> ValidateSchemaRules(const nlohmann::json& schema, const std::string& path);

// A simple JSONPath as printer columns and scale subresources use: ".a.b", ".a[0].b",
// ".conditions[?(@.type==\"Ready\")].status". Null when a step is missing.
nlohmann::json EvaluateJsonPath(const nlohmann::json& object, const std::string& path);
// Sets the value at a simple dotted path (".spec.replicas"), creating objects on the way.
bool SetAtJsonPath(nlohmann::json& object, const std::string& path, nlohmann::json value);

}  // namespace mf::local
