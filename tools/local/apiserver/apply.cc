#include "tools/local/apiserver/apply.h"

#include <map>
#include <set>
#include <vector>

#include "tools/local/apiserver/patch.h"

namespace mf::local {
namespace {

using json = nlohmann::json;
using Path = std::vector<std::string>;  // "f:spec", "k:{\"name\":\"web\"}"
using FieldSet = std::set<Path>;

// Fields the server owns or that identify the object; never part of a field set.
bool Ignored(const Path& p) {
  if (p.size() == 1) return p[0] == "f:apiVersion" || p[0] == "f:kind";
  if (p.size() == 2 && p[0] == "f:metadata") {
    static const std::set<std::string> kServerFields = {"f:name", "f:namespace", "f:uid", "f:resourceVersion",
        "f:generation", "f:creationTimestamp", "f:deletionTimestamp", "f:deletionGracePeriodSeconds",
        "f:managedFields", "f:selfLink", "f:generateName"};
    return kServerFields.contains(p[1]);
  }
  return false;
}

// The merge key of a list, or "" when the list is atomic (a leaf for ownership).
std::string ListKey(const std::string& field, const json& list) {
  std::string key(StrategicMergeKey(field));
  if (key.empty()) return "";
  for (const auto& e : list) {
    if (!e.is_object() || !e.contains(key)) return "";
  }
  return key;
}

std::string ItemElement(const std::string& key, const json& item) {
  return "k:" + json{{key, item[key]}}.dump();
}

void Collect(const json& value, const Path& path, const std::string& field, FieldSet* out) {
  if (value.is_object() && !value.empty()) {
    for (const auto& [k, child] : value.items()) {
      Path p = path;
      p.push_back("f:" + k);
      if (Ignored(p)) continue;
      Collect(child, p, k, out);
    }
    return;
  }
  if (value.is_array() && !value.empty()) {
    std::string key = ListKey(field, value);
    if (!key.empty()) {
      for (const auto& item : value) {
        Path p = path;
        p.push_back(ItemElement(key, item));
        out->insert(p);
        Collect(item, p, "", out);
      }
      return;
    }
  }
  if (!path.empty()) out->insert(path);
}

FieldSet LeafPaths(const json& object) {
  FieldSet out;
  Collect(object, {}, "", &out);
  return out;
}

// The node a path names, or null.
const json* At(const json& root, const Path& path) {
  const json* node = &root;
  for (const auto& element : path) {
    if (element.rfind("f:", 0) == 0) {
      std::string k = element.substr(2);
      if (!node->is_object() || !node->contains(k)) return nullptr;
      node = &(*node)[k];
    } else if (element.rfind("k:", 0) == 0) {
      json key = json::parse(element.substr(2), nullptr, false);
      if (!node->is_array() || !key.is_object() || key.empty()) return nullptr;
      const json* found = nullptr;
      for (const auto& item : *node) {
        bool match = item.is_object();
        for (const auto& [k, v] : key.items()) match = match && item.contains(k) && item[k] == v;
        if (match) {
          found = &item;
          break;
        }
      }
      if (!found) return nullptr;
      node = found;
    } else {
      return nullptr;
    }
  }
  return node;
}

void RemoveAt(json& root, const Path& path) {
  if (path.empty()) return;
  Path parent_path(path.begin(), path.end() - 1);
  json* parent = const_cast<json*>(At(root, parent_path));
  if (!parent) return;
  const std::string& last = path.back();
  if (last.rfind("f:", 0) == 0 && parent->is_object()) {
    parent->erase(last.substr(2));
  } else if (last.rfind("k:", 0) == 0 && parent->is_array()) {
    const json* item = At(root, path);
    for (auto it = parent->begin(); it != parent->end(); ++it) {
      if (&*it == item) {
        parent->erase(it);
        break;
      }
    }
  }
}

json MergeApplied(const json& target, const json& applied, const std::string& field) {
  if (applied.is_object()) {
    json result = target.is_object() ? target : json::object();
    for (const auto& [k, v] : applied.items()) result[k] = MergeApplied(result.contains(k) ? result[k] : json(), v, k);
    return result;
  }
  if (applied.is_array()) {
    std::string key = ListKey(field, applied);
    if (key.empty() || !target.is_array() || !ListKey(field, target).size()) return applied;
    json result = target;
    for (const auto& item : applied) {
      auto it = std::find_if(result.begin(), result.end(), [&](const json& e) { return e[key] == item[key]; });
      if (it != result.end()) *it = MergeApplied(*it, item, "");
      else result.push_back(item);
    }
    return result;
  }
  return applied;
}

json ToFieldsV1(const FieldSet& set) {
  json root = json::object();
  for (const auto& path : set) {
    json* node = &root;
    for (const auto& element : path) node = &(*node)[element];
    if (node->is_null()) *node = json::object();
    if (!node->empty() && path.back().rfind("k:", 0) == 0) (*node)["."] = json::object();
  }
  // Keyed items that have children also own themselves (".").
  std::function<void(json&, bool)> mark = [&](json& node, bool is_item) {
    if (is_item && !node.empty() && !node.contains(".")) node["."] = json::object();
    for (auto& [k, child] : node.items()) {
      if (k != ".") mark(child, k.rfind("k:", 0) == 0);
    }
  };
  mark(root, false);
  return root;
}

void FromFieldsV1(const json& node, Path& path, FieldSet* out) {
  if (!node.is_object()) return;
  if (node.empty() || node.contains(".")) {
    if (!path.empty()) out->insert(path);
  }
  for (const auto& [k, child] : node.items()) {
    if (k == ".") continue;
    path.push_back(k);
    FromFieldsV1(child, path, out);
    path.pop_back();
  }
}

struct Manager {
  json entry;  // the managedFields entry, fieldsV1 replaced on write
  FieldSet fields;
};

std::vector<Manager> ReadManagers(const json& object) {
  std::vector<Manager> out;
  if (!object.is_object() || !object.contains("metadata")) return out;
  const json mf = object["metadata"].value("managedFields", json::array());
  if (!mf.is_array()) return out;
  for (const auto& e : mf) {
    if (!e.is_object()) continue;
    Manager m{e, {}};
    Path p;
    FromFieldsV1(e.value("fieldsV1", json::object()), p, &m.fields);
    out.push_back(std::move(m));
  }
  return out;
}

void WriteManagers(json& object, std::vector<Manager>& managers) {
  json mf = json::array();
  for (auto& m : managers) {
    if (m.fields.empty()) continue;
    m.entry["fieldsType"] = "FieldsV1";
    m.entry["fieldsV1"] = ToFieldsV1(m.fields);
    mf.push_back(m.entry);
  }
  if (mf.empty()) object["metadata"].erase("managedFields");
  else object["metadata"]["managedFields"] = mf;
}

std::string Dotted(const Path& p) {
  std::string out;
  for (const auto& e : p) out += (e.rfind("f:", 0) == 0 ? "." + e.substr(2) : "[" + e.substr(2) + "]");
  return out;
}

Manager& Entry(std::vector<Manager>& managers, const std::string& name, const std::string& operation,
               const std::string& api_version, const std::string& time) {
  for (auto& m : managers) {
    if (m.entry.value("manager", "") == name && m.entry.value("operation", "") == operation &&
        !m.entry.contains("subresource")) {
      m.entry["time"] = time;
      m.entry["apiVersion"] = api_version;
      return m;
    }
  }
  managers.push_back({{{"manager", name}, {"operation", operation}, {"apiVersion", api_version}, {"time", time}}, {}});
  return managers.back();
}

}  // namespace

StatusOr<json> ServerSideApply(const json& current, const json& applied, const ApplyRequest& request) {
  const FieldSet applied_set = LeafPaths(applied);
  json result = current.is_null() ? json::object() : current;
  std::vector<Manager> managers = ReadManagers(result);

  std::vector<std::string> conflicts;
  for (auto& m : managers) {
    bool self = m.entry.value("manager", "") == request.manager && m.entry.value("operation", "") == "Apply";
    if (self) continue;
    for (auto it = m.fields.begin(); it != m.fields.end();) {
      if (applied_set.contains(*it)) {
        const json* have = At(result, *it);
        const json* want = At(applied, *it);
        bool differs = !have || !want || *have != *want;
        if (differs && request.force) {
          it = m.fields.erase(it);
          continue;
        }
        if (differs) conflicts.push_back("conflict with \"" + m.entry.value("manager", "") + "\"" +
                                         (m.entry.value("operation", "") == "Update" ? " using " + m.entry.value("apiVersion", "") : "") +
                                         ": " + Dotted(*it));
      }
      ++it;
    }
  }
  if (!conflicts.empty()) {
    std::string message = "Apply failed with " + std::to_string(conflicts.size()) + " conflict" + (conflicts.size() > 1 ? "s" : "") + ": ";
    for (size_t i = 0; i < conflicts.size(); ++i) message += (i ? "\n" : "") + conflicts[i];
    return Aborted(message);
  }

  Manager& self = Entry(managers, request.manager, "Apply", request.api_version, request.time);
  // Fields this manager applied before and dropped now go away unless someone else owns them.
  for (const auto& path : self.fields) {
    if (applied_set.contains(path)) continue;
    bool owned_elsewhere = std::any_of(managers.begin(), managers.end(), [&](const Manager& m) {
      return &m != &self && m.fields.contains(path);
    });
    if (!owned_elsewhere) RemoveAt(result, path);
  }
  json body = applied;
  body.erase("status");  // status is applied through the status subresource
  result = MergeApplied(result, body, "");
  self.fields = LeafPaths(body);
  if (!result.contains("metadata") || !result["metadata"].is_object()) result["metadata"] = json::object();
  WriteManagers(result, managers);
  return result;
}

void RecordUpdate(json& after, const json& before, const std::string& manager, const std::string& api_version,
                  const std::string& time) {
  if (!after.is_object() || manager.empty()) return;
  FieldSet after_set = LeafPaths(after);
  FieldSet changed;
  for (const auto& p : after_set) {
    const json* old = At(before, p);
    const json* now = At(after, p);
    if (!old || !now || *old != *now) changed.insert(p);
  }
  FieldSet removed;
  for (const auto& p : LeafPaths(before)) {
    if (!after_set.contains(p)) removed.insert(p);
  }
  if (changed.empty() && removed.empty()) return;
  // The client may send managedFields back verbatim (a PUT of a GET); ownership comes from before.
  std::vector<Manager> managers = ReadManagers(before);
  for (auto& m : managers) {
    for (const auto& p : changed) m.fields.erase(p);
    for (const auto& p : removed) m.fields.erase(p);
  }
  if (!changed.empty()) {
    Manager& self = Entry(managers, manager, "Update", api_version, time);
    self.fields.insert(changed.begin(), changed.end());
  }
  if (!after.contains("metadata") || !after["metadata"].is_object()) after["metadata"] = json::object();
  WriteManagers(after, managers);
}

}  // namespace mf::local
