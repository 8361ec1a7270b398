#include "k8s/store.h"

namespace mf::k8s {

Store::Store() {
  index_funcs_["namespace"] = [](const nlohmann::json& o) -> std::vector<std::string> {
    const auto meta = o.find("metadata");
    if (meta == o.end() || !meta->is_object()) return {};
    const auto ns = meta->find("namespace");
    if (ns == meta->end() || !ns->is_string()) return {};
    return {ns->get<std::string>()};
  };
}

bool Store::AddIndex(const std::string& name, IndexFunc fn) {
  std::lock_guard lock(mu_);
  if (!objects_.empty() || index_funcs_.count(name)) return false;
  index_funcs_[name] = std::move(fn);
  return true;
}

Store::IndexValues Store::ComputeLocked(const nlohmann::json& object) const {
  IndexValues values;
  for (const auto& [name, fn] : index_funcs_) values[name] = fn(object);
  return values;
}

void Store::UnindexLocked(const std::string& key) {
  auto filed = filed_.find(key);
  if (filed == filed_.end()) return;
  for (const auto& [name, values] : filed->second) {
    auto& index = indexes_[name];
    for (const std::string& value : values) {
      if (auto it = index.find(value); it != index.end()) {
        it->second.erase(key);
        if (it->second.empty()) index.erase(it);
      }
    }
  }
  filed_.erase(filed);
}

ObjectPtr Store::Upsert(const std::string& key, ObjectPtr object) {
  std::lock_guard lock(mu_);
  IndexValues values = ComputeLocked(*object);  // may throw: nothing changed yet
  ObjectPtr previous;
  if (auto it = objects_.find(key); it != objects_.end()) previous = it->second;
  UnindexLocked(key);
  for (const auto& [name, index_values] : values) {
    for (const std::string& value : index_values) indexes_[name][value].insert(key);
  }
  filed_[key] = std::move(values);
  objects_[key] = std::move(object);
  return previous;
}

ObjectPtr Store::Erase(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return nullptr;
  ObjectPtr previous = it->second;
  UnindexLocked(key);
  objects_.erase(it);
  return previous;
}

ObjectPtr Store::Get(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Store::List() const {
  std::lock_guard lock(mu_);
  std::vector<ObjectPtr> out;
  out.reserve(objects_.size());
  for (const auto& [key, object] : objects_) out.push_back(object);
  return out;
}

std::vector<std::string> Store::Keys() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(objects_.size());
  for (const auto& [key, object] : objects_) out.push_back(key);
  return out;
}

std::vector<ObjectPtr> Store::ByIndex(const std::string& name, const std::string& value) const {
  std::lock_guard lock(mu_);
  std::vector<ObjectPtr> out;
  auto index = indexes_.find(name);
  if (index == indexes_.end()) return out;
  auto keys = index->second.find(value);
  if (keys == index->second.end()) return out;
  for (const std::string& key : keys->second) out.push_back(objects_.at(key));
  return out;
}

size_t Store::Size() const {
  std::lock_guard lock(mu_);
  return objects_.size();
}

}  // namespace mf::k8s
