// Records core/v1 Events about objects (what `kubectl describe` shows), asynchronously so a
// reconcile never waits on it. Repeats of the same event (same object, type, reason and message)
// are aggregated into one Event whose count and lastTimestamp are patched, as client-go's
// EventCorrelator does, instead of flooding etcd with copies.
#pragma once

#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "k8s/client.h"

namespace mf::k8s {

enum class EventType { kNormal, kWarning };

class EventRecorder {
 public:
  struct Options {
    std::string component;         // source.component / reportingComponent, e.g. "modelfleet-operator"
    std::string instance;          // source.host / reportingInstance, e.g. the pod name
    size_t max_queued = 1000;      // events beyond this are dropped (with an error), never block
    size_t max_aggregated = 4096;  // distinct events remembered for aggregation (LRU)
  };
  EventRecorder(Client& client, Options options);
  ~EventRecorder();  // writes what is queued, then stops
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Queues an event about `involved` (an object with kind, metadata.name and, if namespaced,
  // metadata.namespace). InvalidArgument for a malformed call, ResourceExhausted when the queue
  // is full; nothing is queued then.
  Status Record(const Json& involved, EventType type, const std::string& reason, const std::string& message);
  // Blocks until every queued event has been written (or failed).
  void Flush();

 private:
  struct Pending {
    Json involved_ref;
    std::string ns, type, reason, message;
    std::chrono::system_clock::time_point when;
  };
  struct Aggregate {
    std::string name;
    int64_t count = 0;
    std::string first_timestamp;
    std::list<std::string>::iterator lru;
  };
  void Run();
  void Write(const Pending& p);
  void Remember(const std::string& key, Aggregate aggregate);

  Client& client_;
  const Options options_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Pending> queue_;
  bool writing_ = false;
  bool stopping_ = false;
  // Only the writer thread touches these.
  std::map<std::string, Aggregate> aggregates_;
  std::list<std::string> lru_;  // most recent first
  uint64_t sequence_ = 0;
  std::thread thread_;
};

}  // namespace mf::k8s
