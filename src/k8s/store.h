// The informer's cache: objects keyed by "namespace/name", plus named secondary indexes
// (e.g. "by-owner" -> owner UID) maintained on every change, like client-go's cache.Indexer.
// Readers get copies (shared_ptr to immutable JSON), so a handler can never corrupt the cache.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mf::k8s {

using ObjectPtr = std::shared_ptr<const nlohmann::json>;
// Index values an object is filed under (may be empty: not indexed).
using IndexFunc = std::function<std::vector<std::string>(const nlohmann::json&)>;

class Store {
 public:
  // The built-in "namespace" index is always present.
  Store();

  // Adds a named index; must be called before the store holds objects (false otherwise, or
  // when the name is taken).
  bool AddIndex(const std::string& name, IndexFunc fn);

  // Inserts or replaces; returns the previous object (null if none).
  ObjectPtr Upsert(const std::string& key, ObjectPtr object);
  // Removes; returns the removed object (null if none).
  ObjectPtr Erase(const std::string& key);

  ObjectPtr Get(const std::string& key) const;
  std::vector<ObjectPtr> List() const;
  std::vector<std::string> Keys() const;
  // Objects whose index `name` contains `value`; empty when the index is unknown.
  std::vector<ObjectPtr> ByIndex(const std::string& name, const std::string& value) const;
  size_t Size() const;

 private:
  void IndexLocked(const std::string& key, const nlohmann::json& object, bool add);

  mutable std::mutex mu_;
  std::map<std::string, ObjectPtr> objects_;
  std::map<std::string, IndexFunc> index_funcs_;
  // index name -> value -> keys
  std::map<std::string, std::map<std::string, std::set<std::string>>> indexes_;
};

}  // namespace mf::k8s
