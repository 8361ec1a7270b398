// A controller work queue with client-go's guarantees (workqueue.RateLimitingInterface):
//  - de-duplicating: a key added many times before a worker takes it is processed once;
//  - never two workers on one key: a key added while it is being processed is parked in the
//    dirty set and queued again only when Done() is called for it;
//  - delayed requeue (AddAfter) and rate-limited requeue (AddRateLimited: per-key exponential
//    backoff combined with an overall token bucket);
//  - two lanes: keys from Add() (something changed: a watch event) go ahead of keys whose delay
//    ran out (resyncs, retries, periodic checks), so a new object is not reconciled behind a
//    resync of thousands; a key in the later lane that is Add()ed moves ahead. While both lanes
//    hold keys, every kLaterShare-th Get() takes from the later one, so retries never starve;
//  - ShutDown(): Get() returns nullopt once the queue is drained, workers exit, delayed adds
//    are dropped.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "k8s/rate_limit.h"

namespace mf::k8s {

class WorkQueue {
 public:
  WorkQueue();
  explicit WorkQueue(ItemRateLimiter::Options rate_limit);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  void Add(const std::string& key);
  // Adds the key after `delay` (at the earliest deadline if added again while waiting).
  void AddAfter(const std::string& key, Clock::duration delay);
  // Adds the key after its rate-limited backoff; counts a failure of the key.
  void AddRateLimited(const std::string& key);
  // Resets the key's failure count (after it was processed successfully).
  void Forget(const std::string& key);
  int NumRequeues(const std::string& key);

  // Blocks for the next key; nullopt after ShutDown() once no key is left.
  std::optional<std::string> Get();
  // Marks the key processed; re-queues it when it was added again meanwhile.
  void Done(const std::string& key);

  // Stops accepting keys; workers drain what is queued, then Get() returns nullopt.
  void ShutDown();
  bool ShuttingDown() const;
  // Keys queued (not processing, not waiting on a delay), both lanes.
  size_t Len() const;

  static constexpr int kLaterShare = 4;

 private:
  void RunDelays();
  // Queues a key that is not dirty yet into `lane` (unless a worker holds it: Done() queues it).
  void QueueLocked(std::string key, std::deque<std::string>& lane);

  ItemRateLimiter limiter_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;     // Add()ed: something changed
  std::deque<std::string> later_;     // delays that ran out: resyncs, retries, periodic checks
  std::set<std::string> in_later_;    // the keys of later_
  int taken_since_later_ = 0;         // Get()s from queue_ while later_ waited
  std::set<std::string> dirty_;       // queued or to be re-queued
  std::set<std::string> processing_;  // handed to a worker, Done() not yet called
  bool shutting_down_ = false;

  // Delayed adds: deadline-ordered, at most one pending deadline per key.
  std::condition_variable delay_cv_;
  std::multimap<Clock::time_point, std::string> waiting_;
  std::map<std::string, Clock::time_point> waiting_deadline_;
  std::thread delay_thread_;
};

// What a worker does with a key. A non-OK Status requeues the key with rate-limited backoff; OK
// forgets its failures. `requeue_after` > 0 requeues it after that delay even on success
// (a periodic check, e.g. a canary step's pause).
struct ReconcileResult {
  Status status;
  Clock::duration requeue_after = Clock::duration::zero();
};
using Reconciler = std::function<ReconcileResult(const std::string& key)>;

// Runs `workers` threads taking keys from `queue` until it shuts down; Wait() joins them.
class WorkerPool {
 public:
  WorkerPool(WorkQueue& queue, int workers, Reconciler reconcile);
  ~WorkerPool();  // shuts the queue down and joins
  void Wait();

 private:
  WorkQueue& queue_;
  std::vector<std::thread> threads_;
};

}  // namespace mf::k8s
