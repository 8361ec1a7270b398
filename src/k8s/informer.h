// A shared informer: lists a collection, then watches it from the list's resourceVersion, keeps
// an indexed cache (Store) and delivers add/update/delete notifications to handlers in the order
// the changes happened, on one dispatch thread, so a slow handler never stalls the watch.
//
// Invariants the tests hold it to:
//  - every change is delivered exactly once and in order, across watch timeouts, dropped
//    connections (re-watch from the last resourceVersion seen, bookmarks included) and
//    410 Gone (relist; the relist is diffed against the cache, so unchanged objects are not
//    re-announced and objects deleted meanwhile get a delete notification);
//  - a notification is queued in the same critical section that changes the cache, so a
//    handler that reads the cache sees at least the state its notification describes;
//  - resync (if enabled) re-delivers every cached object as an update(old == new).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "k8s/client.h"
#include "k8s/store.h"

namespace mf::k8s {

struct EventHandlers {
  std::function<void(const ObjectPtr& object)> on_add;
  std::function<void(const ObjectPtr& old_object, const ObjectPtr& new_object)> on_update;
  // The object's final state from the DELETED event, or the last cached state when the
  // deletion was only noticed by a relist.
  std::function<void(const ObjectPtr& last_known)> on_delete;
};

struct InformerOptions {
  ResourceRef collection;  // gvr + namespace ("" = all namespaces); name must be empty
  std::string label_selector;
  std::string field_selector;
  std::chrono::milliseconds resync_period{0};  // 0: never
  // Applied to every object before it is cached and delivered, e.g. to drop metadata.managedFields
  // or fields the controller never reads (client-go's TransformFunc): the cache is the controller's
  // memory. Must keep metadata.name, namespace and resourceVersion.
  std::function<void(nlohmann::json* object)> transform;
  std::chrono::seconds watch_timeout{300};  // server-side; client-go picks 5-10 min
  std::chrono::milliseconds error_backoff_base{100};
  std::chrono::milliseconds error_backoff_cap{30'000};
};

class Informer {
 public:
  Informer(Client& client, InformerOptions options);
  ~Informer();
  Informer(const Informer&) = delete;
  Informer& operator=(const Informer&) = delete;

  // Both must be called before Start().
  void AddEventHandlers(EventHandlers handlers);
  bool AddIndex(const std::string& name, IndexFunc fn) { return store_.AddIndex(name, std::move(fn)); }

  // Validates the options, then starts the list/watch and dispatch threads.
  Status Start();
  // Stops both threads; notifications not yet delivered are dropped. Idempotent.
  void Stop();

  const Store& store() const { return store_; }
  // True once the first list has been stored and its notifications delivered.
  bool HasSynced() const { return synced_.load(); }
  bool WaitForSync(std::chrono::milliseconds timeout) const;

  struct Stats {
    int64_t lists = 0;    // lists stored in the cache (the first one, then one per relist)
    int64_t watches = 0;  // watch calls started
  };
  Stats stats() const { return {lists_.load(), watches_.load()}; }

 private:
  // kResync carries only the key: the object is read from the cache when it is delivered, so a
  // resync of thousands of objects never holds them all parsed at once (48 MB at 5,000
  // ModelDeployments).
  enum class Kind { kAdd, kUpdate, kDelete, kSynced, kResync };
  struct Notification {
    Kind kind;
    ObjectPtr old_object;
    ObjectPtr new_object;
    std::string key;  // kResync
  };

  void RunReflector(std::stop_token stop);
  void RunDispatcher(std::stop_token stop);
  // Lists and replaces the cache; sets *resource_version.
  Status ListAndReplace(std::string* resource_version);
  // One watch call; updates *resource_version as events arrive.
  Status WatchOnce(std::string* resource_version, std::stop_token stop);
  void ApplyEvent(WatchEvent&& event, std::string* resource_version);
  void EnqueueLocked(Kind kind, ObjectPtr old_object, ObjectPtr new_object);
  static void Deliver(const EventHandlers& h, const Notification& n);
  bool Backoff(int failures, std::stop_token stop);

  Client& client_;
  const InformerOptions options_;
  Store store_;
  std::vector<EventHandlers> handlers_;

  // Guards cache changes together with the queueing of their notifications.
  std::mutex mu_;
  std::condition_variable_any queue_cv_;
  std::deque<Notification> queue_;

  std::atomic<bool> synced_{false};
  mutable std::mutex sync_mu_;
  mutable std::condition_variable sync_cv_;
  std::atomic<int64_t> lists_{0}, watches_{0};
  std::jthread reflector_, dispatcher_;
};

}  // namespace mf::k8s
