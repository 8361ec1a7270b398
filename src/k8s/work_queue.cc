#include "k8s/work_queue.h"

#include <algorithm>

#include "common/logging.h"

namespace mf::k8s {

WorkQueue::WorkQueue() : WorkQueue(ItemRateLimiter::Options()) {}

WorkQueue::WorkQueue(ItemRateLimiter::Options rate_limit) : limiter_(rate_limit) {
  delay_thread_ = std::thread([this] { RunDelays(); });
}

WorkQueue::~WorkQueue() {
  ShutDown();
  delay_thread_.join();
}

void WorkQueue::Add(const std::string& key) {
  std::lock_guard lock(mu_);
  if (shutting_down_) return;
  if (dirty_.count(key)) {
    // Already queued: if in the later lane, it moves ahead.
    if (!in_later_.erase(key)) return;
    later_.erase(std::find(later_.begin(), later_.end(), key));
    queue_.push_back(key);
    return;
  }
  QueueLocked(key, queue_);
}

void WorkQueue::QueueLocked(std::string key, std::deque<std::string>& lane) {
  dirty_.insert(key);
  if (processing_.count(key)) return;  // Done() queues it again
  if (&lane == &later_) in_later_.insert(key);
  lane.push_back(std::move(key));
  cv_.notify_one();
}

void WorkQueue::AddAfter(const std::string& key, Clock::duration delay) {
  if (delay <= Clock::duration::zero()) {
    Add(key);
    return;
  }
  std::lock_guard lock(mu_);
  if (shutting_down_) return;
  const Clock::time_point deadline = Clock::now() + delay;
  if (auto it = waiting_deadline_.find(key); it != waiting_deadline_.end()) {
    if (it->second <= deadline) return;  // an earlier add is already pending
    auto [first, last] = waiting_.equal_range(it->second);
    for (auto w = first; w != last; ++w) {
      if (w->second == key) {
        waiting_.erase(w);
        break;
      }
    }
  }
  waiting_.emplace(deadline, key);
  waiting_deadline_[key] = deadline;
  delay_cv_.notify_one();
}

void WorkQueue::AddRateLimited(const std::string& key) { AddAfter(key, limiter_.When(key)); }

void WorkQueue::Forget(const std::string& key) { limiter_.Forget(key); }

int WorkQueue::NumRequeues(const std::string& key) { return limiter_.NumRequeues(key); }

std::optional<std::string> WorkQueue::Get() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !queue_.empty() || !later_.empty() || shutting_down_; });
  if (queue_.empty() && later_.empty()) return std::nullopt;
  const bool from_later = queue_.empty() || (!later_.empty() && taken_since_later_ + 1 >= kLaterShare);
  std::deque<std::string>& lane = from_later ? later_ : queue_;
  taken_since_later_ = from_later || later_.empty() ? 0 : taken_since_later_ + 1;
  std::string key = std::move(lane.front());
  lane.pop_front();
  if (from_later) in_later_.erase(key);
  processing_.insert(key);
  dirty_.erase(key);
  return key;
}

void WorkQueue::Done(const std::string& key) {
  std::lock_guard lock(mu_);
  processing_.erase(key);
  if (dirty_.count(key)) {
    queue_.push_back(key);  // it changed while being processed
    cv_.notify_one();
  }
}

void WorkQueue::ShutDown() {
  std::lock_guard lock(mu_);
  shutting_down_ = true;
  cv_.notify_all();
  delay_cv_.notify_all();
}

bool WorkQueue::ShuttingDown() const {
  std::lock_guard lock(mu_);
  return shutting_down_;
}

size_t WorkQueue::Len() const {
  std::lock_guard lock(mu_);
  return queue_.size() + later_.size();
}

void WorkQueue::RunDelays() {
  std::unique_lock lock(mu_);
  while (!shutting_down_) {
    if (waiting_.empty()) {
      delay_cv_.wait(lock);
      continue;
    }
    const Clock::time_point next = waiting_.begin()->first;
    if (Clock::now() < next) {
      delay_cv_.wait_until(lock, next);
      continue;
    }
    std::string key = waiting_.begin()->second;
    waiting_.erase(waiting_.begin());
    waiting_deadline_.erase(key);
    if (!dirty_.count(key)) QueueLocked(std::move(key), later_);
  }
}

WorkerPool::WorkerPool(WorkQueue& queue, int workers, Reconciler reconcile) : queue_(queue) {
  for (int i = 0; i < std::max(1, workers); ++i) {
    threads_.emplace_back([this, reconcile] {
      while (std::optional<std::string> key = queue_.Get()) {
        ReconcileResult result;
        try {
          result = reconcile(*key);
        } catch (const std::exception& e) {
          // Exceptions never cross the worker thread; the key is retried with backoff.
          result.status = Internal(std::string("reconcile threw: ") + e.what());
        }
        if (!result.status.ok()) {
          log::Warning("reconcile failed, requeueing with backoff",
                       {{"key", *key},
                        {"error", result.status.message()},
                        {"requeues", std::to_string(queue_.NumRequeues(*key))}});
          queue_.AddRateLimited(*key);
        } else {
          queue_.Forget(*key);
          if (result.requeue_after > Clock::duration::zero()) queue_.AddAfter(*key, result.requeue_after);
        }
        queue_.Done(*key);
      }
    });
  }
}

WorkerPool::~WorkerPool() {
  queue_.ShutDown();
  Wait();
}

void WorkerPool::Wait() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace mf::k8s
