// A container's environment and command line, computed as Kubernetes does: envFrom first, then
// env in order (later entries override), each value expanded with $(VAR) against the variables
// defined before it; downward-API fieldRefs; configMapKeyRef / secretKeyRef read through a lookup
// so this file stays pure. A missing non-optional ConfigMap, Secret or key is an error the
// kubelet reports as CreateContainerConfigError and retries.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tools/local/kubelet/image_map.h"
#include "tools/local/kubelet/object_fields.h"

namespace mf::local {

using EnvList = std::vector<std::pair<std::string, std::string>>;

// Fetches a ConfigMap ("configmaps") or Secret ("secrets") from the pod's namespace.
using ObjectLookup = std::function<std::optional<Json>(std::string_view resource, std::string_view name)>;

// Kubernetes' $(VAR) expansion: $(NAME) becomes its value when defined and stays as written
// otherwise; $$ is an escaped $; anything else is literal.
std::string ExpandVars(std::string_view input, const std::map<std::string, std::string>& vars);

// The variables a container asks for (no host variables; the kubelet adds its own on top).
StatusOr<EnvList> BuildContainerEnv(const Json& pod, const Json& container, const ObjectLookup& lookup);

// argv for the container: `command` (with `args`) when given, else the image's program from the
// map followed by `args`. Every element is $(VAR)-expanded against `env`. An image not in the map
// with no command is INVALID_ARGUMENT naming the image and the map.
StatusOr<std::vector<std::string>> BuildContainerArgv(const Json& container, const ImageMap& images,
                                                      const EnvList& env);

// Standard base64 (with or without padding), as Secret .data holds; nullopt when malformed.
std::optional<std::string> DecodeBase64(std::string_view text);

}  // namespace mf::local
