#include "tools/local/apiserver/patch.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <vector>

namespace mf::local {
namespace {

using json = nlohmann::json;

json MergePatchValue(const json& target, const json& patch) {
  if (!patch.is_object()) return patch;
  json result = target.is_object() ? target : json::object();
  for (const auto& [key, value] : patch.items()) {
    if (value.is_null()) {
      result.erase(key);
    } else {
      result[key] = MergePatchValue(result.contains(key) ? result[key] : json(), value);
    }
  }
  return result;
}

// RFC 6901 pointer parsing with explicit errors (json_pointer throws on bad syntax).
StatusOr<json::json_pointer> Pointer(const json& op, const char* field) {
  if (!op.contains(field) || !op[field].is_string()) {
    return InvalidArgument(std::string("json patch operation needs a string \"") + field + "\"");
  }
  std::string text = op[field].get<std::string>();
  if (!text.empty() && text.front() != '/') return InvalidArgument("json patch path \"" + text + "\" must start with '/'");
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '~' && (i + 1 >= text.size() || (text[i + 1] != '0' && text[i + 1] != '1'))) {
      return InvalidArgument("json patch path \"" + text + "\" has an invalid escape");
    }
  }
  return json::json_pointer(text);
}

Status AddAt(json& doc, const json::json_pointer& ptr, json value) {
  if (ptr.empty()) {
    doc = std::move(value);
    return Status::Ok();
  }
  json::json_pointer parent_ptr = ptr.parent_pointer();
  if (!doc.contains(parent_ptr)) return InvalidArgument("json patch: no parent for path " + ptr.to_string());
  json& parent = doc[parent_ptr];
  const std::string& last = ptr.back();
  if (parent.is_object()) {
    parent[last] = std::move(value);
  } else if (parent.is_array()) {
    if (last == "-") {
      parent.push_back(std::move(value));
    } else {
      size_t index = 0;
      auto [p, ec] = std::from_chars(last.data(), last.data() + last.size(), index);
      if (ec != std::errc() || p != last.data() + last.size() || index > parent.size()) {
        return InvalidArgument("json patch: index " + last + " out of range at " + ptr.to_string());
      }
      parent.insert(parent.begin() + static_cast<std::ptrdiff_t>(index), std::move(value));
    }
  } else {
    return InvalidArgument("json patch: parent of " + ptr.to_string() + " is not an object or array");
  }
  return Status::Ok();
}

Status RemoveAt(json& doc, const json::json_pointer& ptr) {
  if (ptr.empty() || !doc.contains(ptr)) return InvalidArgument("json patch: nothing to remove at " + ptr.to_string());
  json& parent = doc[ptr.parent_pointer()];
  if (parent.is_object()) {
    parent.erase(ptr.back());
  } else {
    const std::string& last = ptr.back();
    size_t index = 0;
    auto [p, ec] = std::from_chars(last.data(), last.data() + last.size(), index);
    if (ec != std::errc() || p != last.data() + last.size() || index >= parent.size()) {
      return InvalidArgument("json patch: index " + last + " out of range at " + ptr.to_string());
    }
    parent.erase(index);
  }
  return Status::Ok();
}

// ---- strategic merge patch ----

constexpr std::string_view kPatchDirective = "$patch";
constexpr std::string_view kDeleteFromPrimitivePrefix = "$deleteFromPrimitiveList/";
constexpr std::string_view kSetElementOrderPrefix = "$setElementOrder/";
constexpr std::string_view kRetainKeys = "$retainKeys";

StatusOr<json> StrategicMerge(const json& target, const json& patch);

StatusOr<json> MergeList(std::string_view field, const json& target, const json& patch) {
  if (!patch.is_array()) return patch;
  std::string_view key = StrategicMergeKey(field);
  json base = target.is_array() ? target : json::array();
  if (IsMergedPrimitiveList(field)) {
    for (const auto& v : patch) {
      if (std::find(base.begin(), base.end(), v) == base.end()) base.push_back(v);
    }
    return base;
  }
  if (key.empty()) {
    // Atomic list, unless the patch is a single {"$patch": "replace"} marker.
    json out = json::array();
    for (const auto& v : patch) {
      if (!(v.is_object() && v.contains(kPatchDirective))) out.push_back(v);
    }
    return out;
  }
  // A {"$patch":"replace"} element replaces the list with the patch's other elements.
  for (const auto& v : patch) {
    if (v.is_object() && v.value(std::string(kPatchDirective), "") == "replace") {
      json out = json::array();
      for (const auto& e : patch) {
        if (!(e.is_object() && e.contains(kPatchDirective))) out.push_back(e);
      }
      return out;
    }
  }
  for (const auto& element : patch) {
    if (!element.is_object() || !element.contains(key)) {
      return InvalidArgument("strategic merge patch: every element of " + std::string(field) +
                             " must be an object with the merge key \"" + std::string(key) + "\"");
    }
    auto existing = std::find_if(base.begin(), base.end(), [&](const json& e) {
      return e.is_object() && e.contains(key) && e[std::string(key)] == element[std::string(key)];
    });
    std::string directive = element.value(std::string(kPatchDirective), "");
    if (directive == "delete") {
      if (existing != base.end()) base.erase(existing);
      continue;
    }
    if (!directive.empty() && directive != "merge") {
      return InvalidArgument("strategic merge patch: unknown $patch directive \"" + directive + "\"");
    }
    if (existing != base.end()) {
      MF_ASSIGN_OR_RETURN(*existing, StrategicMerge(*existing, element));
    } else {
      MF_ASSIGN_OR_RETURN(json added, StrategicMerge(json::object(), element));
      base.push_back(std::move(added));
    }
  }
  return base;
}

StatusOr<json> StrategicMerge(const json& target, const json& patch) {
  if (!patch.is_object()) return patch;
  std::string directive = patch.value(std::string(kPatchDirective), "");
  if (directive == "delete") return json();
  json result = (target.is_object() && directive != "replace") ? target : json::object();
  if (!directive.empty() && directive != "replace" && directive != "merge") {
    return InvalidArgument("strategic merge patch: unknown $patch directive \"" + directive + "\"");
  }
  if (auto retain = patch.find(kRetainKeys); retain != patch.end()) {
    if (!retain->is_array()) return InvalidArgument("strategic merge patch: $retainKeys must be a list");
    for (auto it = result.begin(); it != result.end();) {
      if (std::find(retain->begin(), retain->end(), it.key()) == retain->end()) it = result.erase(it);
      else ++it;
    }
  }
  for (const auto& [key, value] : patch.items()) {
    if (key == kPatchDirective || key == kRetainKeys || key.starts_with(kSetElementOrderPrefix)) continue;
    if (key.starts_with(kDeleteFromPrimitivePrefix)) {
      std::string field = key.substr(kDeleteFromPrimitivePrefix.size());
      if (!value.is_array()) return InvalidArgument("strategic merge patch: " + key + " must be a list");
      if (result.contains(field) && result[field].is_array()) {
        json kept = json::array();
        for (const auto& v : result[field]) {
          if (std::find(value.begin(), value.end(), v) == value.end()) kept.push_back(v);
        }
        result[field] = kept;
      }
      continue;
    }
    if (value.is_null()) {
      result.erase(key);
    } else if (value.is_object()) {
      MF_ASSIGN_OR_RETURN(json merged, StrategicMerge(result.contains(key) ? result[key] : json(), value));
      if (merged.is_null()) result.erase(key);
      else result[key] = std::move(merged);
    } else if (value.is_array()) {
      MF_ASSIGN_OR_RETURN(result[key], MergeList(key, result.contains(key) ? result[key] : json(), value));
    } else {
      result[key] = value;
    }
  }
  return result;
}

}  // namespace

std::string_view StrategicMergeKey(std::string_view field) {
  // From the patchMergeKey tags of k8s.io/api for the kinds the local cluster serves.
  static const std::pair<std::string_view, std::string_view> kKeys[] = {
      {"containers", "name"},        {"initContainers", "name"},   {"ephemeralContainers", "name"},
      {"env", "name"},               {"volumes", "name"},          {"volumeMounts", "mountPath"},
      {"volumeDevices", "devicePath"}, {"imagePullSecrets", "name"}, {"conditions", "type"},
      {"ownerReferences", "uid"},    {"hostAliases", "ip"},        {"topologySpreadConstraints", "topologyKey"},
      {"containerStatuses", "name"}, {"initContainerStatuses", "name"}, {"resourceClaims", "name"},
  };
  for (const auto& [f, k] : kKeys) {
    if (f == field) return k;
  }
  return "";
}

bool IsMergedPrimitiveList(std::string_view field) { return field == "finalizers"; }

StatusOr<json> ApplyMergePatch(const json& target, const json& patch) {
  if (!patch.is_object()) return InvalidArgument("a merge patch must be a JSON object");
  return MergePatchValue(target, patch);
}

StatusOr<json> ApplyJsonPatch(const json& target, const json& patch) {
  if (!patch.is_array()) return InvalidArgument("a JSON patch must be a list of operations");
  json doc = target;
  for (const auto& op : patch) {
    if (!op.is_object() || !op.contains("op") || !op["op"].is_string()) {
      return InvalidArgument("each JSON patch operation must be an object with a string \"op\"");
    }
    std::string name = op["op"].get<std::string>();
    MF_ASSIGN_OR_RETURN(auto path, Pointer(op, "path"));
    if (name == "add" || name == "replace" || name == "test") {
      if (!op.contains("value")) return InvalidArgument("json patch " + name + " needs a \"value\"");
    }
    if (name == "add") {
      MF_RETURN_IF_ERROR(AddAt(doc, path, op["value"]));
    } else if (name == "remove") {
      MF_RETURN_IF_ERROR(RemoveAt(doc, path));
    } else if (name == "replace") {
      if (!doc.contains(path)) return InvalidArgument("json patch: nothing to replace at " + path.to_string());
      doc[path] = op["value"];
    } else if (name == "test") {
      if (!doc.contains(path) || doc[path] != op["value"]) {
        return InvalidArgument("json patch: test failed at " + path.to_string());
      }
    } else if (name == "move" || name == "copy") {
      MF_ASSIGN_OR_RETURN(auto from, Pointer(op, "from"));
      if (!doc.contains(from)) return InvalidArgument("json patch: nothing at " + from.to_string());
      json value = doc[from];
      if (name == "move") MF_RETURN_IF_ERROR(RemoveAt(doc, from));
      MF_RETURN_IF_ERROR(AddAt(doc, path, std::move(value)));
    } else {
      return InvalidArgument("unknown JSON patch operation \"" + name + "\"");
    }
  }
  return doc;
}

StatusOr<json> ApplyStrategicMergePatch(const json& target, const json& patch) {
  if (!patch.is_object()) return InvalidArgument("a strategic merge patch must be a JSON object");
  MF_ASSIGN_OR_RETURN(json result, StrategicMerge(target, patch));
  if (!result.is_object()) return InvalidArgument("a strategic merge patch may not delete the whole object");
  return result;
}

}  // namespace mf::local
