#include "server/rest/deadline_timer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <vector>

namespace mf::server::rest {
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

}  // namespace
}  // namespace mf::server::rest
