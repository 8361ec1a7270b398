// The OpenAPI schemas of the built-in kinds modelfleet-local serves (io.k8s.api.apps.v1.Deployment,
// ...), generated from the Kubernetes Python client by gen_builtin_schemas.py and embedded at build
// time. They give `kubectl explain` its fields and descriptions, and let the server drop and
// report unknown fields of built-in objects the way kube-apiserver's strict decoding does.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mf::local {

inline constexpr const char* kComponentsRef = "#/components/schemas/";

// components.schemas: name -> OpenAPI v3 schema, with "#/components/schemas/<name>" references.
const nlohmann::json& BuiltinSchemas();

// The schema name of a built-in kind ("io.k8s.api.apps.v1.Deployment"); nullopt when the
// generated set has no schema whose x-kubernetes-group-version-kind matches.
std::optional<std::string> BuiltinSchemaName(const std::string& group, const std::string& version,
                                             const std::string& kind);

// Adds to `names` every schema reachable by $ref from the schemas already in it.
void AddReferencedSchemas(const nlohmann::json& schemas, std::set<std::string>& names);

// Removes the fields of `object` the named schema does not declare, recursively through $refs,
// and returns their paths as kube-apiserver's strict decoding names them
// ("spec.template.spec.containers[0].imagePullPolicyy"). Schemas marked
// x-kubernetes-preserve-unknown-fields (arbitrary JSON) are not descended into.
// Paths in `keep` are left in place and not reported (an update keeps what the stored object
// already had, e.g. fields the in-process controllers wrote).
std::vector<std::string> PruneUnknownBuiltinFields(nlohmann::json& object, const std::string& schema_name,
                                                   const std::set<std::string>& keep = {});

// An OpenAPI v3 schema as a Swagger 2.0 definition: references point into #/definitions/ and a
// reference wrapped in allOf (v3's way to give it siblings) becomes a plain $ref.
nlohmann::json ToSwagger2Schema(const nlohmann::json& schema);

}  // namespace mf::local
