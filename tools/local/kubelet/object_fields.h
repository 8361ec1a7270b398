// Small accessors over unstructured Kubernetes objects (nlohmann::json) for the node agent:
// fields read defensively (a missing or mistyped field reads as empty, never throws, because the
// API server hands back whatever clients wrote), RFC 3339 times, and conditions.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mf::local {

using Json = nlohmann::json;
using Clock = std::chrono::system_clock;

// Reads obj[a][b]... as a string / integer / object, or the fallback when absent or mistyped.
std::string StringAt(const Json& obj, std::initializer_list<std::string_view> path, std::string fallback = "");
int64_t IntAt(const Json& obj, std::initializer_list<std::string_view> path, int64_t fallback);
const Json& ObjectAt(const Json& obj, std::initializer_list<std::string_view> path);

std::string NameOf(const Json& obj);
std::string NamespaceOf(const Json& obj);
std::string Uid(const Json& obj);
bool IsBeingDeleted(const Json& obj);

// metav1.Time: "2006-01-02T15:04:05Z".
std::string FormatTime(Clock::time_point t);

// Sets or updates a condition in `conditions` (an array), keeping lastTransitionTime when the
// status did not change.
void SetCondition(Json& conditions, std::string_view type, bool status, std::string_view reason,
                  std::string_view message, Clock::time_point now);

// Runs `fn`; a nlohmann::json exception from it (an object with a field of an unexpected type)
// becomes INVALID_ARGUMENT naming `what`, so bad input is reported and never escapes a thread.
Status CatchMalformed(std::string_view what, const std::function<Status()>& fn);

}  // namespace mf::local
