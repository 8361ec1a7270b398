// The object store behind modelfleet-local: what etcd plus the generic registry are to a real
// kube-apiserver. Objects are unstructured nlohmann::json (like client-go's unstructured), keyed by
// (group, version, resource plural, namespace, name).
//
// Invariants:
//  - One global resourceVersion counter; every committed change (create, update, delete, a
//    deletionTimestamp being set) takes the next value, and watchers see changes in that order.
//  - metadata.generation starts at 1 and is bumped only when the object minus metadata and status
//    changes. For types with a status subresource, writes to the main resource keep the stored
//    status and writes to the status subresource change only status.
//  - A write that fails (bad input, conflict, failed admission) changes nothing.
//  - Deleting an object that has finalizers only sets deletionTimestamp; it is removed when an
//    update empties its finalizers. Deletes cascade along ownerReferences (background, foreground
//    or orphan), as the garbage collector does.
//  - With a data directory every committed change is in the write-ahead log before the call
//    returns, so a restarted store has the same objects, resourceVersions and watch history.
//
// All methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace mf::local {

using json = nlohmann::json;

struct GroupVersionResource {
  std::string group;     // "" for the core group
  std::string version;   // "v1"
  std::string resource;  // plural: "pods", "deployments", "modeldeployments"

  // "v1" for core, "apps/v1" otherwise.
  std::string ApiVersion() const { return group.empty() ? version : group + "/" + version; }
  std::string ToString() const;  // "deployments.v1.apps", as kubectl prints it
  friend auto operator<=>(const GroupVersionResource&, const GroupVersionResource&) = default;
};

// What the store needs to know about a type; discovery and OpenAPI data live in the API layer.
struct ResourceType {
  GroupVersionResource gvr;
  std::string kind;  // "Deployment"
  bool namespaced = true;
  // Whether .status is written only through the status subresource.
  bool has_status_subresource = false;
  // Defaulting and validation, run on every create and update (main resource or status) after
  // the store has filled in metadata. It may modify `object`; `old` is null on create. An error
  // rejects the write (use INVALID_ARGUMENT so the API layer answers 422 Invalid).
  std::function<Status(json& object, const json* old)> admit;
};

struct ObjectRef {
  GroupVersionResource gvr;
  std::string ns;  // empty for cluster-scoped types
  std::string name;
};

// Label selector syntax as in kubectl -l: "a=b,c!=d,e in (x,y),f notin (z),g,!h".
// Field selector syntax as in --field-selector: "metadata.name=x,status.phase!=Running"; any
// dotted path to a scalar is accepted (a superset of what kube-apiserver allows per type).
struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  // Pages (kube-apiserver's limit/continue): at most `limit` matching objects (0: all) whose
  // (namespace, name) key sorts after `start_after` (empty: from the first).
  size_t limit = 0;
  std::optional<std::pair<std::string, std::string>> start_after;
  // The state as of this resourceVersion (0: the latest), rebuilt from the watch history by
  // undoing later changes, so every page of one list shows one consistent state. Older than the
  // retained history: OUT_OF_RANGE (IsResourceVersionTooOld); newer than the store: FAILED_PRECONDITION.
  uint64_t at_resource_version = 0;
};

struct ObjectList {
  std::vector<json> items;  // sorted by namespace, then name
  uint64_t resource_version = 0;  // the version the list shows (at_resource_version, or the latest)
  // With a limit: whether matching objects follow this page, and how many.
  bool more = false;
  size_t remaining = 0;
};

enum class Subresource { kMain, kStatus };

enum class PropagationPolicy { kBackground, kForeground, kOrphan };

// dryRun=All: every check and admission runs and the result is returned, but nothing is stored,
// journaled or sent to watchers (kubectl diff, --dry-run=server).
struct WriteOptions {
  bool dry_run = false;
};

struct DeleteOptions {
  PropagationPolicy propagation = PropagationPolicy::kBackground;
  bool dry_run = false;  // returns what the object would look like; no cascade runs
  std::optional<std::string> precondition_uid;
  std::optional<std::string> precondition_resource_version;
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };
std::string_view WatchEventTypeName(WatchEventType type);  // "ADDED", ... as on the wire

struct WatchEvent {
  WatchEventType type;
  // The object after the change (for DELETED: its last state); for BOOKMARK an object of the
  // watched kind carrying only metadata.resourceVersion; for ERROR a meta/v1 Status.
  json object;
  uint64_t resource_version = 0;
};

struct WatchOptions {
  ListOptions selectors;
  // 0: start with a synthetic ADDED event per existing object (a list), then live changes.
  // N: every change after resourceVersion N. Too old (compacted away) -> OUT_OF_RANGE, which
  // the API layer answers as 410 Gone / "Expired", like kube-apiserver.
  uint64_t resource_version = 0;
  bool send_initial_events = true;  // only with resource_version 0
  bool allow_bookmarks = false;
};

// One subscription. Events are queued by writers in commit order; a consumer that falls too far
// behind gets a final ERROR event (410 Expired) and the watch ends, as kube-apiserver does.
class Watcher {
 public:
  Watcher(GroupVersionResource gvr, std::string kind, bool allow_bookmarks, size_t max_queued);
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;

  // The next event, waiting up to `timeout`. nullopt when the wait timed out (or, with
  // allow_bookmarks, a BOOKMARK at the latest version when the queue is drained and the store
  // moved on), or when the watch has ended: check done().
  std::optional<WatchEvent> Next(std::chrono::milliseconds timeout);
  // Ends the watch; a blocked Next() returns. Idempotent.
  void Stop();
  bool done() const;
  // Called, without store locks held, after events were queued or the watch ended: lets an
  // asynchronous server wake the connection instead of blocking a thread in Next().
  void SetNotify(std::function<void()> notify);

 private:
  friend class Store;
  // Called by the store with its lock held.
  void Enqueue(WatchEvent event);
  void NoteVersion(uint64_t resource_version);
  void NotifyOutsideLock();

  const GroupVersionResource gvr_;
  const std::string kind_;
  const bool allow_bookmarks_;
  const size_t max_queued_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<WatchEvent> queue_;
  bool done_ = false;
  bool overflowed_ = false;
  uint64_t last_sent_version_ = 0;
  uint64_t latest_version_ = 0;
  std::function<void()> notify_;
};

struct StoreOptions {
  // Empty: memory only. Otherwise snapshot.json + wal.jsonl live here (created if missing).
  std::filesystem::path data_dir;
  // Changes kept for watches that resume from a resourceVersion; older ones answer 410.
  size_t history_limit = 20000;
  // The write-ahead log is folded into a new snapshot after this many records.
  size_t compact_after_records = 50000;
  // A watcher with this many undelivered events is ended with 410.
  size_t max_queued_events_per_watcher = 10000;
  // Source of the time written into creationTimestamp / deletionTimestamp (tests fix it).
  std::function<std::chrono::system_clock::time_point()> now = [] {
    return std::chrono::system_clock::now();
  };
};

class Store {
 public:
  // Opens (or creates) the store; with a data_dir, loads the snapshot and replays the log.
  // Types must be registered again after Open (objects of unknown types are kept and served
  // once their type is registered, as etcd keeps CRs while a CRD is re-created).
  static StatusOr<std::unique_ptr<Store>> Open(StoreOptions options);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Adds or replaces a type (CRD create/update). Replacing keeps the objects.
  void RegisterType(ResourceType type);
  // Removes a type and deletes all of its objects (CRD deletion). NOT_FOUND if unknown.
  Status UnregisterType(const GroupVersionResource& gvr);
  std::optional<ResourceType> FindType(const GroupVersionResource& gvr) const;
  std::vector<ResourceType> Types() const;

  // Fills in metadata (uid, creationTimestamp, generation, resourceVersion, name from
  // generateName), apiVersion and kind. ALREADY_EXISTS if the name is taken, NOT_FOUND if the
  // namespace (for namespaced types) does not exist or is terminating (FAILED_PRECONDITION).
  StatusOr<json> Create(const GroupVersionResource& gvr, std::string_view ns, json object,
                        const WriteOptions& write = {});
  StatusOr<json> Get(const ObjectRef& ref) const;
  // ns empty lists all namespaces.
  StatusOr<ObjectList> List(const GroupVersionResource& gvr, std::string_view ns,
                            const ListOptions& options = {}) const;
  // Replaces the object (or only its status). When object.metadata.resourceVersion is set and
  // differs from the stored one: ABORTED (409 Conflict). Removing the last finalizer of an object
  // being deleted removes it.
  StatusOr<json> Update(const ObjectRef& ref, json object, Subresource sub = Subresource::kMain,
                        const WriteOptions& write = {});
  // Read-modify-write under the store lock: `mutate` gets the current object and returns the
  // new one (or an error, which aborts with nothing changed). This is how PATCH and apply work.
  using MutateFn = std::function<StatusOr<json>(const json& current)>;
  StatusOr<json> GuaranteedUpdate(const ObjectRef& ref, Subresource sub, const MutateFn& mutate,
                                  const WriteOptions& write = {});
  // Returns the object as of the delete: with deletionTimestamp set when finalizers (or a
  // foreground deletion) keep it, or its last state when it was removed.
  StatusOr<json> Delete(const ObjectRef& ref, const DeleteOptions& options = {});

  // ns empty watches all namespaces.
  StatusOr<std::shared_ptr<Watcher>> Watch(const GroupVersionResource& gvr, std::string_view ns,
                                           const WatchOptions& options);

  uint64_t CurrentResourceVersion() const;

 private:
  class Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// True for the error Watch() returns when the requested resourceVersion was compacted away.
bool IsResourceVersionTooOld(const Status& status);

}  // namespace mf::local
