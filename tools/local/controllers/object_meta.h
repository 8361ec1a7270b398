// Small accessors over unstructured Kubernetes objects (nlohmann::json), shared by the built-in
// controllers and the local kubelet: metadata fields, owner references, label selectors, pod
// readiness and RFC 3339 timestamps. Objects are read defensively: a missing or mistyped field
// reads as empty, never throws, because the store holds whatever clients wrote.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "tools/local/store/object_meta.h"  // Uid, IsBeingDeleted, Finalizers, FormatTime

namespace mf::local {

using Json = nlohmann::json;
using Clock = std::chrono::system_clock;

// Reads obj[a][b]... as a string / integer / object, or the fallback when absent or mistyped.
std::string StringAt(const Json& obj, std::initializer_list<std::string_view> path,
                     std::string fallback = "");
int64_t IntAt(const Json& obj, std::initializer_list<std::string_view> path, int64_t fallback);
const Json& ObjectAt(const Json& obj, std::initializer_list<std::string_view> path);

std::string NameOf(const Json& obj);
std::string NamespaceOf(const Json& obj);
std::map<std::string, std::string> LabelsOf(const Json& obj);

// The uid of obj's controlling owner (ownerReferences[].controller == true), if any.
std::optional<std::string> ControllerUidOf(const Json& obj);
// An ownerReference naming `owner` as controller, as the built-in controllers write it.
Json ControllerRef(const Json& owner, std::string_view api_version, std::string_view kind);

// Whether `labels` satisfy a metav1.LabelSelector (matchLabels + matchExpressions with In,
// NotIn, Exists, DoesNotExist). An empty selector matches everything, as in Kubernetes; a
// malformed one is INVALID_ARGUMENT so the caller can report it instead of matching wrongly.
StatusOr<bool> LabelSelectorMatches(const Json& selector,
                                    const std::map<std::string, std::string>& labels);
// A Service's selector is a plain map; an empty one selects nothing (manual endpoints).
bool MapSelectorMatches(const Json& selector, const std::map<std::string, std::string>& labels);

// Pod condition Ready == "True".
bool IsPodReady(const Json& pod);
// Ready for at least min_ready_seconds (measured from the Ready condition's lastTransitionTime).
bool IsPodAvailable(const Json& pod, int64_t min_ready_seconds, Clock::time_point now);

// Parses metav1.Time as written by FormatTime (fractional seconds accepted).
std::optional<Clock::time_point> ParseTime(std::string_view text);

// Runs `fn`; a nlohmann::json exception from it (a stored object with a field of an unexpected
// type, e.g. "replicas": "3") becomes INVALID_ARGUMENT naming `what`, so bad input is reported
// and never escapes a controller or kubelet thread.
Status CatchMalformed(std::string_view what, const std::function<Status()>& fn);

// The same for a function returning StatusOr<T>: the planners' checked entry points.
template <typename T>
StatusOr<T> CatchMalformed(std::string_view what, const std::function<StatusOr<T>()>& fn) {
  std::optional<T> result;
  Status s = CatchMalformed(what, std::function<Status()>([&]() -> Status {
    auto value = fn();
    if (!value.ok()) return value.status();
    result = std::move(value).value();
    return Status::Ok();
  }));
  if (!s.ok()) return s;
  return std::move(*result);
}

// Resolves an IntOrString such as 3 or "25%" against `total`: percentages round up for surge
// and down for unavailability, as the Deployment controller does.
StatusOr<int64_t> ResolveIntOrPercent(const Json& value, int64_t total, bool round_up,
                                      std::string_view field);

// Sets or updates a condition in `conditions` (an array), keeping lastTransitionTime when the
// status did not change; lastUpdateTime is written only when `with_update_time` (Deployments).
void SetCondition(Json& conditions, std::string_view type, bool status, std::string_view reason,
                  std::string_view message, Clock::time_point now, bool with_update_time);

}  // namespace mf::local
