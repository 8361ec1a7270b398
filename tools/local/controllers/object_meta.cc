#include "tools/local/controllers/object_meta.h"

#include <cmath>
#include <ctime>
#include <set>

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

std::string StringAt(const Json& obj, std::initializer_list<std::string_view> path,
                     std::string fallback) {
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

std::map<std::string, std::string> LabelsOf(const Json& obj) {
  std::map<std::string, std::string> labels;
  for (const auto& [k, v] : ObjectAt(obj, {"metadata", "labels"}).items()) {
    if (v.is_string()) labels[k] = v.get<std::string>();
  }
  return labels;
}

std::optional<std::string> ControllerUidOf(const Json& obj) {
  const Json* refs = Walk(obj, {"metadata", "ownerReferences"});
  if (!refs || !refs->is_array()) return std::nullopt;
  for (const Json& ref : *refs) {
    if (ref.is_object() && ref.value("controller", false) && ref.contains("uid") &&
        ref["uid"].is_string()) {
      return ref["uid"].get<std::string>();
    }
  }
  return std::nullopt;
}

Json ControllerRef(const Json& owner, std::string_view api_version, std::string_view kind) {
  return Json{{"apiVersion", api_version}, {"kind", kind},          {"name", NameOf(owner)},
              {"uid", Uid(owner)},       {"controller", true},    {"blockOwnerDeletion", true}};
}

StatusOr<bool> LabelSelectorMatches(const Json& selector,
                                    const std::map<std::string, std::string>& labels) {
  if (selector.is_null()) return true;
  if (!selector.is_object()) return InvalidArgument("label selector must be an object");
  if (auto it = selector.find("matchLabels"); it != selector.end() && !it->is_null()) {
    if (!it->is_object()) return InvalidArgument("selector.matchLabels must be an object");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) return InvalidArgument("selector.matchLabels." + k + " must be a string");
      auto found = labels.find(k);
      if (found == labels.end() || found->second != v.get<std::string>()) return false;
    }
  }
  if (auto it = selector.find("matchExpressions"); it != selector.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument("selector.matchExpressions must be a list");
    for (const Json& expr : *it) {
      std::string key = StringAt(expr, {"key"});
      std::string op = StringAt(expr, {"operator"});
      std::set<std::string> values;
      if (auto v = expr.find("values"); v != expr.end() && v->is_array()) {
        for (const Json& s : *v) {
          if (s.is_string()) values.insert(s.get<std::string>());
        }
      }
      if (key.empty()) return InvalidArgument("selector.matchExpressions[].key is required");
      auto found = labels.find(key);
      bool has = found != labels.end();
      if (op == "In" || op == "NotIn") {
        if (values.empty()) {
          return InvalidArgument("selector operator " + op + " on '" + key + "' needs values");
        }
        bool in = has && values.count(found->second) > 0;
        if (op == "In" ? !in : in) return false;
      } else if (op == "Exists") {
        if (!has) return false;
      } else if (op == "DoesNotExist") {
        if (has) return false;
      } else {
        return InvalidArgument("selector operator '" + op +
                               "' is not one of In, NotIn, Exists, DoesNotExist");
      }
    }
  }
  return true;
}

bool MapSelectorMatches(const Json& selector, const std::map<std::string, std::string>& labels) {
  if (!selector.is_object() || selector.empty()) return false;
  for (const auto& [k, v] : selector.items()) {
    auto found = labels.find(k);
    if (!v.is_string() || found == labels.end() || found->second != v.get<std::string>()) {
      return false;
    }
  }
  return true;
}

namespace {
const Json* ReadyCondition(const Json& pod) {
  const Json* conditions = Walk(pod, {"status", "conditions"});
  if (!conditions || !conditions->is_array()) return nullptr;
  for (const Json& c : *conditions) {
    if (StringAt(c, {"type"}) == "Ready") return &c;
  }
  return nullptr;
}
}  // namespace

bool IsPodReady(const Json& pod) {
  const Json* c = ReadyCondition(pod);
  return c && StringAt(*c, {"status"}) == "True";
}

bool IsPodAvailable(const Json& pod, int64_t min_ready_seconds, Clock::time_point now) {
  if (!IsPodReady(pod)) return false;
  if (min_ready_seconds <= 0) return true;
  auto since = ParseTime(StringAt(*ReadyCondition(pod), {"lastTransitionTime"}));
  return since && *since + std::chrono::seconds(min_ready_seconds) <= now;
}

std::optional<Clock::time_point> ParseTime(std::string_view text) {
  std::tm tm{};
  std::string s(text);
  const char* end = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end) return std::nullopt;
  // Fractional seconds and a 'Z' suffix are accepted; other offsets are not written by k8s.
  if (*end == '.') {
    ++end;
    while (*end >= '0' && *end <= '9') ++end;
  }
  if (*end != 'Z' || end[1] != '\0') return std::nullopt;
  return Clock::from_time_t(timegm(&tm));
}

StatusOr<int64_t> ResolveIntOrPercent(const Json& value, int64_t total, bool round_up,
                                      std::string_view field) {
  if (value.is_number_integer()) {
    if (value.get<int64_t>() < 0) return InvalidArgument(std::string(field) + " must be >= 0");
    return value.get<int64_t>();
  }
  if (value.is_string()) {
    std::string s = value.get<std::string>();
    if (s.size() >= 2 && s.back() == '%') {
      int64_t pct = 0;
      bool digits = true;
      for (size_t i = 0; i + 1 < s.size(); ++i) {
        if (s[i] < '0' || s[i] > '9' || pct > 1000000) {
          digits = false;
          break;
        }
        pct = pct * 10 + (s[i] - '0');
      }
      if (digits) {
        double scaled = static_cast<double>(pct) * static_cast<double>(total) / 100.0;
        return static_cast<int64_t>(round_up ? std::ceil(scaled) : std::floor(scaled));
      }
    }
  }
  return InvalidArgument(std::string(field) + " must be a non-negative integer or a percentage like \"25%\", got " +
                         value.dump());
}

void SetCondition(Json& conditions, std::string_view type, bool status, std::string_view reason,
                  std::string_view message, Clock::time_point now, bool with_update_time) {
  if (!conditions.is_array()) conditions = Json::array();
  std::string status_text = status ? "True" : "False";
  std::string now_text = FormatTime(now);
  for (Json& c : conditions) {
    if (StringAt(c, {"type"}) != type) continue;
    if (StringAt(c, {"status"}) != status_text) c["lastTransitionTime"] = now_text;
    if (with_update_time && (StringAt(c, {"status"}) != status_text ||
                             StringAt(c, {"reason"}) != reason ||
                             StringAt(c, {"message"}) != message)) {
      c["lastUpdateTime"] = now_text;
    }
    c["status"] = status_text;
    c["reason"] = reason;
    c["message"] = message;
    return;
  }
  Json c = {{"type", type}, {"status", status_text}, {"reason", reason}, {"message", message},
            {"lastTransitionTime", now_text}};
  if (with_update_time) c["lastUpdateTime"] = now_text;
  conditions.push_back(std::move(c));
}

Status CatchMalformed(std::string_view what, const std::function<Status()>& fn) {
  try {
    return fn();
  } catch (const Json::exception& e) {
    return InvalidArgument(std::string(what) + " has a field of an unexpected type: " + e.what());
  }
}

}  // namespace mf::local
