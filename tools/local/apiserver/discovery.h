// The documents clients read before they talk to resources: /version, legacy discovery (/api,
// /apis, per group and group-version), OpenAPI v3 (/openapi/v3 and one document per
// group-version, with the PATCH operations and their fieldValidation parameter that kubectl
// apply checks for, and the x-kubernetes-group-version-kind schemas kubectl explain reads) and
// the Swagger 2.0 document /openapi/v2. Built-in kinds' schemas are the generated, itemized ones
// of tools/local/openapi; custom resources' come from their CRDs.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tools/local/apiserver/resources.h"

namespace mf::local {

// What `kubectl version` shows; the kubectl dispatcher picks its client version from it.
nlohmann::json VersionInfo();
nlohmann::json CoreApiVersions(const std::string& server_address);
nlohmann::json ApiGroupList(const ResourceCatalog::Snapshot& snap);
// nullopt when no resource of the group is served.
std::optional<nlohmann::json> ApiGroup(const ResourceCatalog::Snapshot& snap, const std::string& group);
std::optional<nlohmann::json> ApiResourceList(const ResourceCatalog::Snapshot& snap, const std::string& group,
                                              const std::string& version);

// Aggregated discovery (apidiscovery.k8s.io/v2 APIGroupDiscoveryList), what kubectl asks /api and
// /apis for first: every group, version and resource in one document. core: the "" group only
// (/api), else every named group (/apis).
inline constexpr const char* kAggregatedDiscoveryContentType =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
nlohmann::json AggregatedDiscovery(const ResourceCatalog::Snapshot& snap, bool core);

nlohmann::json OpenApiV3Root(const ResourceCatalog::Snapshot& snap);
// `path` is "api/v1" or "apis/<group>/<version>".
std::optional<nlohmann::json> OpenApiV3Document(const ResourceCatalog::Snapshot& snap, const std::string& path);
// Every served resource in one Swagger 2.0 document (definitions: the same schemas as v3).
nlohmann::json OpenApiV2Document(const ResourceCatalog::Snapshot& snap);
// Whether an Accept header admits application/json (absent, */*, application/*, application/json,
// not with q=0); /openapi/v2 answers 406 otherwise, e.g. to client-go's protobuf-only request.
bool AcceptsJson(std::string_view accept);

}  // namespace mf::local
