// Table output (Accept: application/json;as=Table;g=meta.k8s.io;v=v1), which kubectl get asks for
// and prints as is: the resource's printer columns evaluated on each object.
#pragma once

#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/local/apiserver/resources.h"

namespace mf::local {

// includeObject: "None" | "Metadata" (default) | "Object".
nlohmann::json ToTable(const ResourceInfo& resource, const std::vector<nlohmann::json>& objects,
                       const std::string& resource_version, const std::string& include_object,
                       std::chrono::system_clock::time_point now);

// "5s", "3m", "2d5h": kubectl's HumanDuration, for date columns.
std::string HumanDuration(std::chrono::seconds d);

}  // namespace mf::local
