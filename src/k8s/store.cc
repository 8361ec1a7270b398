#include "k8s/store.h"

#include <algorithm>

namespace mf::k8s {
namespace {

std::string Pack(const nlohmann::json& object) {
  std::string packed;
  nlohmann::json::to_cbor(object, packed);
  packed.shrink_to_fit();
  return packed;
}

ObjectPtr Unpack(const std::string& packed) {
  return std::make_shared<const nlohmann::json>(nlohmann::json::from_cbor(packed));
}

// Parsed outside the store's lock (copies taken under it), so readers never stall the watch.
std::vector<ObjectPtr> UnpackAll(const std::vector<std::string>& packed) {
  std::vector<ObjectPtr> out;
  out.reserve(packed.size());
  for (const std::string& p : packed) out.push_back(Unpack(p));
  return out;
}

}  // namespace

Store::Store() {
  AddIndex("namespace", [](const nlohmann::json& o) -> std::vector<std::string> {
    const auto meta = o.find("metadata");
    if (meta == o.end() || !meta->is_object()) return {};
    const auto ns = meta->find("namespace");
    if (ns == meta->end() || !ns->is_string()) return {};
    return {ns->get<std::string>()};
  });
}

bool Store::AddIndex(const std::string& name, IndexFunc fn) {
  std::lock_guard lock(mu_);
  const bool taken =
      std::any_of(index_funcs_.begin(), index_funcs_.end(), [&](const auto& f) { return f.first == name; });
  if (!objects_.empty() || taken) return false;
  index_funcs_.emplace_back(name, std::move(fn));
  indexes_.emplace_back();
  return true;
}

void Store::UnindexLocked(const std::string& key, const Entry& entry) {
  for (size_t i = 0; i < entry.filed.size(); ++i) {
    auto& index = indexes_[i];
    for (const std::string& value : entry.filed[i]) {
      if (auto it = index.find(value); it != index.end()) {
        it->second.erase(key);
        if (it->second.empty()) index.erase(it);
      }
    }
  }
}

bool Store::Upsert(const std::string& key, const nlohmann::json& object) {
  Entry entry;
  entry.packed = Pack(object);
  std::lock_guard lock(mu_);
  entry.filed.reserve(index_funcs_.size());
  for (const auto& [name, fn] : index_funcs_) entry.filed.push_back(fn(object));  // may throw: nothing changed yet
  auto [it, inserted] = objects_.try_emplace(key);
  if (!inserted) UnindexLocked(key, it->second);
  for (size_t i = 0; i < entry.filed.size(); ++i) {
    for (const std::string& value : entry.filed[i]) indexes_[i][value].insert(key);
  }
  it->second = std::move(entry);
  return !inserted;
}

ObjectPtr Store::Erase(const std::string& key) {
  std::string packed;
  {
    std::lock_guard lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return nullptr;
    UnindexLocked(key, it->second);
    packed = std::move(it->second.packed);
    objects_.erase(it);
  }
  return Unpack(packed);
}

ObjectPtr Store::Get(const std::string& key) const {
  std::string packed;
  {
    std::lock_guard lock(mu_);
    auto it = objects_.find(key);
    if (it == objects_.end()) return nullptr;
    packed = it->second.packed;
  }
  return Unpack(packed);
}

std::vector<ObjectPtr> Store::List() const {
  std::vector<std::string> packed;
  {
    std::lock_guard lock(mu_);
    packed.reserve(objects_.size());
    for (const auto& [key, entry] : objects_) packed.push_back(entry.packed);
  }
  return UnpackAll(packed);
}

std::vector<std::string> Store::Keys() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  out.reserve(objects_.size());
  for (const auto& [key, entry] : objects_) out.push_back(key);
  return out;
}

std::vector<ObjectPtr> Store::ByIndex(const std::string& name, const std::string& value) const {
  std::vector<std::string> packed;
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < index_funcs_.size(); ++i) {
      if (index_funcs_[i].first != name) continue;
      auto keys = indexes_[i].find(value);
      if (keys == indexes_[i].end()) break;
      for (const std::string& key : keys->second) packed.push_back(objects_.at(key).packed);
    }
  }
  return UnpackAll(packed);
}

size_t Store::Size() const {
  std::lock_guard lock(mu_);
  return objects_.size();
}

}  // namespace mf::k8s
