// The informer's cache: objects keyed by "namespace/name", plus named secondary indexes
// (e.g. "by-owner" -> owner UID) maintained on every change, like client-go's cache.Indexer.
// Readers get copies (shared_ptr to immutable JSON), so a handler can never corrupt the cache.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace mf::k8s {

using ObjectPtr = std::shared_ptr<const nlohmann::json>;
// Index values an object is filed under (may be empty: not indexed). Objects come from the API
// server: read them with .at()/.find()/.value() (which throw or default), never with const
// operator[] on a key that may be missing (which asserts).
using IndexFunc = std::function<std::vector<std::string>(const nlohmann::json&)>;

class Store {
 public:
  // The built-in "namespace" index is always present.
  Store();

  // Adds a named index; must be called before the store holds objects (false otherwise, or
  // when the name is taken).
  bool AddIndex(const std::string& name, IndexFunc fn);

  // Inserts or replaces; returns the previous object (null if none). Index functions run
  // before anything changes, so one that throws leaves the store as it was.
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
  using IndexValues = std::map<std::string, std::vector<std::string>>;  // index name -> values
  IndexValues ComputeLocked(const nlohmann::json& object) const;
  void UnindexLocked(const std::string& key);

  mutable std::mutex mu_;
  std::map<std::string, ObjectPtr> objects_;
  std::map<std::string, IndexFunc> index_funcs_;
  // index name -> value -> keys, and what each key was filed under (to unfile it exactly).
  std::map<std::string, std::map<std::string, std::set<std::string>>> indexes_;
  std::map<std::string, IndexValues> filed_;
};

}  // namespace mf::k8s
