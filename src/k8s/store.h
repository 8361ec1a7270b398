// The informer's cache: objects keyed by "namespace/name", plus named secondary indexes
// (e.g. "by-owner" -> owner UID) maintained on every change, like client-go's cache.Indexer.
//
// Objects are kept packed (CBOR) and parsed on each read: at thousands of objects the cache is
// most of a controller's memory, and a parsed nlohmann::json costs a map node and a heap string
// per key, about ten times the bytes of its CBOR (bench/operator/cache_memory.cc). A read costs
// a parse of one object (microseconds for the compacted objects the operator caches), and every
// reader gets its own copy (shared_ptr to immutable JSON), so a handler can never corrupt the
// cache.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
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

  // Inserts or replaces; true when it replaced an object. Index functions run before anything
  // changes, so one that throws leaves the store as it was.
  bool Upsert(const std::string& key, const nlohmann::json& object);
  // Removes; returns the removed object (null if none).
  ObjectPtr Erase(const std::string& key);

  ObjectPtr Get(const std::string& key) const;
  std::vector<ObjectPtr> List() const;
  std::vector<std::string> Keys() const;
  // Objects whose index `name` contains `value`; empty when the index is unknown.
  std::vector<ObjectPtr> ByIndex(const std::string& name, const std::string& value) const;
  size_t Size() const;

 private:
  struct Entry {
    std::string packed;                           // the object as CBOR
    std::vector<std::vector<std::string>> filed;  // per index (index_funcs_ order): values filed under
  };
  void UnindexLocked(const std::string& key, const Entry& entry);

  mutable std::mutex mu_;
  std::map<std::string, Entry> objects_;
  std::vector<std::pair<std::string, IndexFunc>> index_funcs_;
  // Parallel to index_funcs_: value -> keys filed under it.
  std::vector<std::map<std::string, std::set<std::string>>> indexes_;
};

}  // namespace mf::k8s
