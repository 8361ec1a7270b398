// Readers of a custom resource's optional fields, shared by the ModelDeployment, TrainingJob and
// study parsers. An absent or null field leaves *out as it is (the caller's default); a present
// one of another type, out of range or not allowed is INVALID_ARGUMENT naming its path, e.g.
// "spec.runPolicy.backoffLimit is 99; it must be between 0 and 20".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mf::op {

using Json = nlohmann::json;

// RFC 1035 label (a Service name): [a-z]([-a-z0-9]*[a-z0-9])?, at most 63 characters.
bool IsDns1035Label(std::string_view s);
// RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters.
bool IsDns1123Label(std::string_view s);

Status OptionalString(const Json& obj, const char* key, const std::string& path, std::string* out);
Status OptionalObject(const Json& obj, const char* key, const std::string& path, Json* out);
// An integer from min to max.
Status OptionalInt(const Json& obj, const char* key, const std::string& path, int64_t min, int64_t max, int64_t* out);
Status OptionalInt(const Json& obj, const char* key, const std::string& path, int64_t min, int64_t max,
                   std::optional<int64_t>* out);
// A finite number from min to max (pass infinities for no bound).
Status OptionalNumber(const Json& obj, const char* key, const std::string& path, double min, double max,
                      std::optional<double>* out);
// One of `allowed`; an empty string counts as absent.
Status OptionalEnum(const Json& obj, const char* key, const std::string& path, const std::vector<std::string>& allowed,
                    std::string* out);

}  // namespace mf::op
