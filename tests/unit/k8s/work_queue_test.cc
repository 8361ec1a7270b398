#include "k8s/work_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>

namespace mf::k8s {
namespace {

using namespace std::chrono_literals;

ItemRateLimiter::Options Fast() { return {.base = 1ms, .cap = 50ms, .qps = 1000, .burst = 1000}; }

// Polls `pred` for up to `timeout`.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

TEST(WorkQueueTest, DeduplicatesQueuedKeys) {
  WorkQueue q(Fast());
  q.Add("ml/a");
  q.Add("ml/b");
  q.Add("ml/a");
  q.Add("ml/a");
  EXPECT_EQ(q.Len(), 2u);
  EXPECT_EQ(q.Get(), "ml/a");
  EXPECT_EQ(q.Get(), "ml/b");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, KeyAddedWhileProcessingIsRequeuedOnlyAfterDone) {
  WorkQueue q(Fast());
  q.Add("k");
  auto key = q.Get();
  ASSERT_EQ(key, "k");
  q.Add("k");
  q.Add("k");
  EXPECT_EQ(q.Len(), 0u);  // parked in dirty, not handed to a second worker
  q.Done("k");
  EXPECT_EQ(q.Len(), 1u);  // exactly once, however often it was added
  EXPECT_EQ(q.Get(), "k");
  q.Done("k");
  EXPECT_EQ(q.Len(), 0u);
}

TEST(WorkQueueTest, NeverTwoWorkersOnOneKey) {
  WorkQueue q(Fast());
  std::mutex mu;
  std::map<std::string, int> active;
  std::atomic<int> violations{0}, processed{0};
  std::atomic<int> max_parallel{0}, parallel{0};
  {
    WorkerPool pool(q, 8, [&](const std::string& key) {
      {
        std::lock_guard lock(mu);
        if (++active[key] > 1) ++violations;
      }
      const int now = ++parallel;
      int seen = max_parallel.load();
      while (now > seen && !max_parallel.compare_exchange_weak(seen, now)) {
      }
      std::this_thread::sleep_for(1ms);
      --parallel;
      {
        std::lock_guard lock(mu);
        --active[key];
      }
      ++processed;
      return ReconcileResult{};
    });
    for (int round = 0; round < 200; ++round) {
      for (int k = 0; k < 4; ++k) q.Add("key-" + std::to_string(k));
      std::this_thread::sleep_for(100us);
    }
    ASSERT_TRUE(Eventually([&] { return q.Len() == 0 && parallel.load() == 0; }));
  }
  EXPECT_EQ(violations.load(), 0);
  EXPECT_GT(max_parallel.load(), 1);  // the test did run keys concurrently
  EXPECT_GE(processed.load(), 4);
}

TEST(WorkQueueTest, RateLimitedRequeueBacksOffExponentiallyAndForgets) {
  ItemRateLimiter limiter({.base = 10ms, .cap = 80ms, .qps = 1000, .burst = 1000});
  EXPECT_EQ(limiter.When("a"), 10ms);
  EXPECT_EQ(limiter.When("a"), 20ms);
  EXPECT_EQ(limiter.When("a"), 40ms);
  EXPECT_EQ(limiter.When("a"), 80ms);
  EXPECT_EQ(limiter.When("a"), 80ms);  // capped
  EXPECT_EQ(limiter.When("b"), 10ms);  // per item
  EXPECT_EQ(limiter.NumRequeues("a"), 5);
  limiter.Forget("a");
  EXPECT_EQ(limiter.NumRequeues("a"), 0);
  EXPECT_EQ(limiter.When("a"), 10ms);
}

TEST(WorkQueueTest, OverallTokenBucketLimitsRequeues) {
  ItemRateLimiter limiter({.base = 1ms, .cap = 1ms, .qps = 10, .burst = 2});
  EXPECT_EQ(limiter.When("a"), 1ms);
  EXPECT_EQ(limiter.When("b"), 1ms);
  // Burst spent: the third distinct item waits for the bucket (~100 ms at 10/s).
  const auto third = limiter.When("c");
  EXPECT_GT(third, 80ms);
  EXPECT_LE(third, 110ms);
}

TEST(WorkQueueTest, AddRateLimitedDelaysTheKey) {
  WorkQueue q({.base = 60ms, .cap = 1s, .qps = 1000, .burst = 1000});
  const auto start = std::chrono::steady_clock::now();
  q.AddRateLimited("k");
  EXPECT_EQ(q.Len(), 0u);
  EXPECT_EQ(q.Get(), "k");
  EXPECT_GE(std::chrono::steady_clock::now() - start, 55ms);
  EXPECT_EQ(q.NumRequeues("k"), 1);
  q.Done("k");
  q.Forget("k");
  EXPECT_EQ(q.NumRequeues("k"), 0);
}

TEST(WorkQueueTest, AddAfterKeepsTheEarliestDeadline) {
  WorkQueue q(Fast());
  const auto start = std::chrono::steady_clock::now();
  q.AddAfter("k", 2s);
  q.AddAfter("k", 30ms);  // earlier: replaces
  q.AddAfter("k", 1s);    // later: ignored
  EXPECT_EQ(q.Get(), "k");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 25ms);
  EXPECT_LT(waited, 900ms);
  q.Done("k");
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(q.Len(), 0u);  // no leftover copy of the key
}

// Keys whose delay ran out (a resync of every object, retries) wait in a later lane: a watch
// event's key is taken first, the later lane gets every kLaterShare-th turn while both hold keys,
// and an Add() of a key waiting there moves it ahead without a second copy.
TEST(WorkQueueTest, ChangedKeysGoAheadOfExpiredDelaysWithoutStarvingThem) {
  WorkQueue q(Fast());
  for (const char* key : {"resync/a", "resync/b", "resync/c"}) q.AddAfter(key, 1ms);
  ASSERT_TRUE(Eventually([&] { return q.Len() == 3; }));
  for (const char* key : {"new/1", "new/2", "new/3", "new/4"}) q.Add(key);
  q.Add("resync/c");  // changed meanwhile: ahead now, queued once
  EXPECT_EQ(q.Len(), 7u);

  std::vector<std::string> order;
  while (q.Len() > 0) {
    auto key = q.Get();
    ASSERT_TRUE(key);
    order.push_back(*key);
    q.Done(*key);
  }
  static_assert(WorkQueue::kLaterShare == 4);
  EXPECT_EQ(order, (std::vector<std::string>{"new/1", "new/2", "new/3", "resync/a", "new/4", "resync/c", "resync/b"}))
      << "order taken";
}

TEST(WorkQueueTest, ShutDownDrainsThenReleasesWorkers) {
  WorkQueue q(Fast());
  q.Add("a");
  q.Add("b");
  q.AddAfter("later", 10s);
  q.ShutDown();
  EXPECT_TRUE(q.ShuttingDown());
  q.Add("c");  // ignored after shutdown
  EXPECT_EQ(q.Get(), "a");
  EXPECT_EQ(q.Get(), "b");
  EXPECT_EQ(q.Get(), std::nullopt);

  WorkQueue q2(Fast());
  std::atomic<bool> returned{false};
  std::thread blocked([&] {
    EXPECT_EQ(q2.Get(), std::nullopt);
    returned = true;
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(returned.load());
  q2.ShutDown();
  blocked.join();
  EXPECT_TRUE(returned.load());
}

TEST(WorkerPoolTest, FailedReconcileIsRetriedWithBackoffThenForgotten) {
  WorkQueue q({.base = 5ms, .cap = 100ms, .qps = 1000, .burst = 1000});
  std::atomic<int> calls{0};
  std::atomic<int> requeues_seen_on_success{-1};
  {
    WorkerPool pool(q, 2, [&](const std::string& key) {
      if (++calls < 4) return ReconcileResult{Unavailable("API server busy")};
      requeues_seen_on_success = q.NumRequeues(key);
      return ReconcileResult{};
    });
    q.Add("ml/web");
    ASSERT_TRUE(Eventually([&] { return requeues_seen_on_success.load() >= 0; }));
    ASSERT_TRUE(Eventually([&] { return q.NumRequeues("ml/web") == 0; }));
  }
  EXPECT_EQ(calls.load(), 4);
  EXPECT_EQ(requeues_seen_on_success.load(), 3);
}

TEST(WorkerPoolTest, RequeueAfterOnSuccessAndExceptionsStayInside) {
  WorkQueue q(Fast());
  std::atomic<int> calls{0};
  {
    WorkerPool pool(q, 1, [&](const std::string&) -> ReconcileResult {
      const int n = ++calls;
      if (n == 1) throw std::runtime_error("boom");
      if (n == 2) return {Status::Ok(), 20ms};
      return {};
    });
    q.Add("k");
    ASSERT_TRUE(Eventually([&] { return calls.load() >= 3; }));
  }
  EXPECT_EQ(calls.load(), 3);
}

}  // namespace
}  // namespace mf::k8s
