#include "server/main/thread_priority.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace mf::server {
namespace {

using std::chrono::milliseconds;

int CurrentNice() { return getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))); }

TEST(LoadStarvedTest, LittleCpuWhileWantingOne) {
  const milliseconds window(250);
  EXPECT_TRUE(LoadStarved(milliseconds(10), true, window, 0.25));
  EXPECT_TRUE(LoadStarved(milliseconds(0), true, window, 0.25));
  EXPECT_FALSE(LoadStarved(milliseconds(100), true, window, 0.25));  // 40% of a core
  EXPECT_FALSE(LoadStarved(milliseconds(10), false, window, 0.25));  // waiting on I/O
}

TEST(LoadPriorityTest, RefusesOutOfRangeOptions) {
  EXPECT_EQ(LoadPriority::Create({.nice = 20}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadPriority::Create({.nice = -1}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadPriority::Create({.nice = 10, .min_share = 0}).status().code(), StatusCode::kInvalidArgument);
  auto normal = LoadPriority::Create({.nice = 0});
  ASSERT_TRUE(normal.ok());
  EXPECT_EQ((*normal)->mode(), LoadPriority::Mode::kNormal);
}

// On a thread of its own (priorities are per thread, and a lowered one cannot always be raised).
TEST(LoadPriorityTest, LowersTheLoadThreadAndRaisesItForShutdown) {
  auto created = LoadPriority::Create({.nice = 10});
  ASSERT_TRUE(created.ok());
  LoadPriority& priority = **created;
  std::thread([&] {
    const int nice_before = CurrentNice();
    priority.LowerCurrentThread();
    if (priority.mode() == LoadPriority::Mode::kNice) {
      EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
      EXPECT_EQ(CurrentNice(), std::min(19, nice_before + 10));
      return;
    }
    ASSERT_EQ(priority.mode(), LoadPriority::Mode::kIdleRaised);
    EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
    const int lowered = CurrentNice();
    priority.LoadStarted();
    priority.RaiseNow();
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    EXPECT_EQ(CurrentNice(), nice_before);  // the nice value of the thread that created it
    priority.LoadFinished();
    EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
    EXPECT_EQ(CurrentNice(), lowered);
    priority.LoadStarted();  // after RaiseNow the watchdog raises every load at once
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (sched_getscheduler(0) == SCHED_IDLE && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    EXPECT_EQ(sched_getscheduler(0), SCHED_OTHER);
    priority.LoadFinished();
    EXPECT_EQ(sched_getscheduler(0), SCHED_IDLE);
  }).join();
}

// A SCHED_IDLE load sharing one CPU with a busy normal thread gets (almost) nothing: the
// watchdog must raise it, after which it makes progress. Both threads are pinned to one CPU so
// the result does not depend on how busy the other cores are.
TEST(LoadPriorityTest, RaisesAStarvedLoad) {
  auto created = LoadPriority::Create({.nice = 10, .window = milliseconds(100)});
  ASSERT_TRUE(created.ok());
  LoadPriority& priority = **created;
  if (priority.mode() != LoadPriority::Mode::kIdleRaised) GTEST_SKIP() << "no CAP_SYS_NICE or RLIMIT_NICE";
  cpu_set_t one_cpu;
  CPU_ZERO(&one_cpu);
  ASSERT_EQ(sched_getaffinity(0, sizeof(one_cpu), &one_cpu), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &one_cpu)) ++cpu;
  CPU_ZERO(&one_cpu);
  CPU_SET(cpu, &one_cpu);

  std::atomic<bool> stop{false};
  std::thread hog([&] {
    pthread_setaffinity_np(pthread_self(), sizeof(one_cpu), &one_cpu);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  std::atomic<bool> raised{false};
  std::thread load([&] {
    pthread_setaffinity_np(pthread_self(), sizeof(one_cpu), &one_cpu);
    priority.LowerCurrentThread();
    priority.LoadStarted();
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (sched_getscheduler(0) == SCHED_IDLE && std::chrono::steady_clock::now() < give_up) {
    }
    raised = sched_getscheduler(0) == SCHED_OTHER;
    priority.LoadFinished();
  });
  load.join();
  stop = true;
  hog.join();
  EXPECT_TRUE(raised);
}

}  // namespace
}  // namespace mf::server
