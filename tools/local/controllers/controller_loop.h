// The thin apply layer shared by the built-in controllers: a thread that watches some resources,
// turns each event into the keys ("ns/name") of primary objects to reconcile, and reconciles
// each key (deduplicated) with a function that reads the store, calls a pure planner and writes
// the difference. Every key is also resynced periodically, so a lost event or a failed write
// (a 409 conflict) heals on the next pass; that is the only requeue.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tools/local/store/store.h"

namespace mf::local {

class ControllerLoop {
 public:
  using KeysFn = std::function<std::vector<std::string>(const WatchEvent&)>;
  using ReconcileFn = std::function<Status(const std::string& ns, const std::string& name)>;

  ControllerLoop(std::string name, Store* store, GroupVersionResource primary, ReconcileFn reconcile,
                 std::chrono::milliseconds resync = std::chrono::seconds(2));
  ~ControllerLoop();  // Stop()
  ControllerLoop(const ControllerLoop&) = delete;
  ControllerLoop& operator=(const ControllerLoop&) = delete;

  // Events of `gvr` enqueue the keys `keys` returns (must be called before Start).
  void Watch(GroupVersionResource gvr, KeysFn keys);
  Status Start();
  void Stop();

 private:
  void Run();

  const std::string name_;
  Store* const store_;
  const GroupVersionResource primary_;
  const ReconcileFn reconcile_;
  const std::chrono::milliseconds resync_;
  std::vector<std::pair<GroupVersionResource, KeysFn>> sources_;
  std::vector<std::shared_ptr<Watcher>> watchers_;

  std::mutex mu_;
  std::condition_variable wake_;
  bool events_pending_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

// Key helpers for the common mappings.
std::string KeyOf(const nlohmann::json& object);
// The key of the object's controller when it is of `kind` (same namespace), else none.
std::vector<std::string> ControllerKeyOf(const nlohmann::json& object, std::string_view kind);

// Creates `desired` or, when it exists, updates it if any field `desired` sets (besides
// metadata, where labels, annotations and ownerReferences count) differs. Returns the stored object.
StatusOr<nlohmann::json> CreateOrUpdate(Store* store, const GroupVersionResource& gvr,
                                        const nlohmann::json& desired);
// Replaces .status through the status subresource when it differs.
Status UpdateStatusIfChanged(Store* store, const GroupVersionResource& gvr, const nlohmann::json& object,
                             const nlohmann::json& status);

}  // namespace mf::local
