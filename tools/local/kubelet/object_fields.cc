#include "tools/local/kubelet/object_fields.h"

#include <ctime>

namespace mf::local {
namespace {

const Json& EmptyObject() {
  static const Json kEmpty = Json::object();
  return kEmpty;
}

const Json* Walk(const Json& obj, std::initializer_list<std::string_view> path) {
  const Json* at = &obj;
  for (std::string_view key : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

}  // namespace

std::string StringAt(const Json& obj, std::initializer_list<std::string_view> path, std::string fallback) {
  const Json* v = Walk(obj, path);
  return v && v->is_string() ? v->get<std::string>() : fallback;
}

int64_t IntAt(const Json& obj, std::initializer_list<std::string_view> path, int64_t fallback) {
  const Json* v = Walk(obj, path);
  return v && v->is_number_integer() ? v->get<int64_t>() : fallback;
}

const Json& ObjectAt(const Json& obj, std::initializer_list<std::string_view> path) {
  const Json* v = Walk(obj, path);
  return v && v->is_object() ? *v : EmptyObject();
}

std::string NameOf(const Json& obj) { return StringAt(obj, {"metadata", "name"}); }
std::string NamespaceOf(const Json& obj) { return StringAt(obj, {"metadata", "namespace"}); }
std::string Uid(const Json& obj) { return StringAt(obj, {"metadata", "uid"}); }

bool IsBeingDeleted(const Json& obj) {
  const Json* v = Walk(obj, {"metadata", "deletionTimestamp"});
  return v && !v->is_null();
}

std::string FormatTime(Clock::time_point t) {
  std::time_t secs = Clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void SetCondition(Json& conditions, std::string_view type, bool status, std::string_view reason,
                  std::string_view message, Clock::time_point now) {
  if (!conditions.is_array()) conditions = Json::array();
  const std::string status_text = status ? "True" : "False";
  for (Json& c : conditions) {
    if (StringAt(c, {"type"}) != type) continue;
    if (StringAt(c, {"status"}) != status_text) c["lastTransitionTime"] = FormatTime(now);
    c["status"] = status_text;
    c["reason"] = reason;
    c["message"] = message;
    return;
  }
  conditions.push_back({{"type", type},
                        {"status", status_text},
                        {"reason", reason},
                        {"message", message},
                        {"lastTransitionTime", FormatTime(now)}});
}

Status CatchMalformed(std::string_view what, const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string(what) + " has a field of an unexpected type: " + e.what());
  }
}

}  // namespace mf::local
