#include "server/repository/deadline_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
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
  uint64_t id = timer.Schedule(Clock::now() + milliseconds(30), [&] { ++ran; });
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
  uint64_t id = timer.Schedule(Clock::now(), [&] { fired.set_value(); });
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

}  // namespace
}  // namespace mf::server
