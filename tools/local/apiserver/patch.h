// The patch formats kube-apiserver accepts on PATCH, applied to unstructured objects:
// RFC 7386 JSON merge patch, RFC 6902 JSON patch, and strategic merge patch (merge keys for the
// lists ModelFleet's built-in kinds use, the $patch / $deleteFromPrimitiveList / $setElementOrder
// / $retainKeys directives). Each returns the patched copy or INVALID_ARGUMENT; the input is never
// changed, so a bad patch changes nothing.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace mf::local {

StatusOr<nlohmann::json> ApplyMergePatch(const nlohmann::json& target, const nlohmann::json& patch);
StatusOr<nlohmann::json> ApplyJsonPatch(const nlohmann::json& target, const nlohmann::json& patch);
StatusOr<nlohmann::json> ApplyStrategicMergePatch(const nlohmann::json& target, const nlohmann::json& patch);

// The merge key of a list field in built-in kinds (strategic merge), e.g. "containers" -> "name";
// empty when the list is atomic (replaced whole).
std::string_view StrategicMergeKey(std::string_view field);
// True for lists of scalars merged as sets (patchStrategy "merge" on []string, e.g. finalizers).
bool IsMergedPrimitiveList(std::string_view field);

}  // namespace mf::local
