#include "server/repository/deadline_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

namespace mf::server {
namespace {

using Clock = DeadlineTimer::Clock;
using std::chrono::milliseconds;

TEST(DeadlineTimerTest, RunsInDeadlineOrder) {
  DeadlineTimer timer;
  std::mutex mu;
  std::vector<int> order;
  std::promise<void> done;
  auto now = Clock::now();
  timer.Schedule(now + milliseconds(60), [&] {
    std::lock_guard lock(mu);
    order.push_back(2);
    done.set_value();
  });
  timer.Schedule(now + milliseconds(20), [&] {
    std::lock_guard lock(mu);
    order.push_back(1);
  });
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  std::lock_guard lock(mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(DeadlineTimerTest, CancelledCallbacksNeverRun) {
  DeadlineTimer timer;
  std::atomic<int> ran{0};
  DeadlineTimer::Ticket id = timer.Schedule(Clock::now() + milliseconds(30), [&] { ++ran; });
  EXPECT_TRUE(timer.Cancel(id));
  EXPECT_FALSE(timer.Cancel(id));
  std::promise<void> later;
  timer.Schedule(Clock::now() + milliseconds(60), [&] { later.set_value(); });
  ASSERT_EQ(later.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(ran.load(), 0);
}

TEST(DeadlineTimerTest, CancelAfterFiringReportsFalse) {
  DeadlineTimer timer;
  std::promise<void> fired;
  DeadlineTimer::Ticket id = timer.Schedule(Clock::now(), [&] { fired.set_value(); });
  ASSERT_EQ(fired.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_FALSE(timer.Cancel(id));
}

// The loop is only woken for a deadline sooner than its planned wake-up: one scheduled before a
// cancelled, later one must still wake it, and one after a cancelled, sooner one must still run.
TEST(DeadlineTimerTest, FiresOnTimeAroundCancelledDeadlines) {
  DeadlineTimer timer;
  auto now = Clock::now();
  EXPECT_TRUE(timer.Cancel(timer.Schedule(now + std::chrono::seconds(3600), [] {})));
  std::promise<Clock::time_point> sooner;
  timer.Schedule(now + milliseconds(20), [&] { sooner.set_value(Clock::now()); });
  auto sooner_future = sooner.get_future();
  ASSERT_EQ(sooner_future.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_LT(sooner_future.get() - now, std::chrono::seconds(5));

  now = Clock::now();
  EXPECT_TRUE(timer.Cancel(timer.Schedule(now + milliseconds(10), [] {})));
  std::promise<void> after;
  timer.Schedule(now + milliseconds(40), [&] { after.set_value(); });
  ASSERT_EQ(after.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

// Deadlines are scheduled on the caller's CPU's shard and may be cancelled from any thread (a
// batch thread answering a request an io thread scheduled): each ticket finds its own shard.
TEST(DeadlineTimerTest, TicketsFromManyThreadsCancelAndFireAcrossShards) {
  DeadlineTimer timer(4);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 200;
  std::vector<std::vector<DeadlineTimer::Ticket>> tickets(kThreads);
  std::atomic<int> fired{0};
  std::vector<std::thread> schedulers;
  for (int t = 0; t < kThreads; ++t) {
    schedulers.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Even ones far away (to be cancelled), odd ones soon (to fire).
        auto when = Clock::now() + (i % 2 == 0 ? std::chrono::seconds(3600) : std::chrono::milliseconds(5));
        tickets[t].push_back(timer.Schedule(when, [&] { ++fired; }));
      }
    });
  }
  for (auto& thread : schedulers) thread.join();
  int cancelled = 0;
  std::thread canceller([&] {
    for (auto& list : tickets) {
      for (size_t i = 0; i < list.size(); i += 2) cancelled += timer.Cancel(list[i]) ? 1 : 0;
    }
  });
  canceller.join();
  EXPECT_EQ(cancelled, kThreads * kPerThread / 2);
  const auto give_up = Clock::now() + std::chrono::seconds(10);
  while (fired.load() < kThreads * kPerThread / 2 && Clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(fired.load(), kThreads * kPerThread / 2);
  for (auto& list : tickets) EXPECT_FALSE(timer.Cancel(list[1]));  // fired already
}

}  // namespace
}  // namespace mf::server
