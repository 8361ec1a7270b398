// The model manager returns freed memory (memory_released: malloc_trim in the server) on a
// housekeeping thread that keeps the priority of the thread that called Start(), not on the
// loop thread that loads at SCHED_IDLE: malloc_trim takes every malloc arena's lock, and a
// SCHED_IDLE thread preempted while holding one stalls the requests allocating from it.
// loads_quiet (the server gives back the weight mappings kept for the next load) follows once no
// load or unload has finished for quiet_after, never while versions keep arriving.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "server/repository/model_manager.h"
#include "tests/unit/server/fake_loader.h"
#include "tests/unit/server/temp_repository.h"

namespace mf::server {
namespace {

using testing::FakeLoader;
using testing::TempRepository;

struct ReleaseCall {
  std::thread::id thread;
  int policy;
};

class MemoryReleaseTest : public ::testing::Test {
 protected:
  ManagerOptions Options() {
    ManagerOptions options;
    options.poll_interval = std::chrono::milliseconds(10);
    options.recheck_interval = std::chrono::milliseconds(10);
    options.on_loop_thread_start = [this] {
      loop_thread_ = std::this_thread::get_id();
      sched_param param{};
      idle_ok_ = pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) == 0;
    };
    options.memory_released = [this] {
      std::lock_guard lock(mu_);
      calls_.push_back({std::this_thread::get_id(), sched_getscheduler(0)});
    };
    return options;
  }
  size_t Calls() {
    std::lock_guard lock(mu_);
    return calls_.size();
  }
  bool WaitFor(const std::function<bool()>& done) {
    for (int i = 0; i < 1000 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return done();
  }

  TempRepository repo_;
  std::shared_ptr<FakeLoader> loader_ = std::make_shared<FakeLoader>();
  std::mutex mu_;
  std::vector<ReleaseCall> calls_;
  std::atomic<std::thread::id> loop_thread_{};
  std::atomic<bool> idle_ok_{false};
};

TEST_F(MemoryReleaseTest, RunsOffTheLowPriorityLoopThreadOnceStarted) {
  ModelManager manager(loader_, Options());
  ASSERT_TRUE(manager.SetModels({{"m", repo_.base(), VersionPolicy::Latest(1), {}}}).ok());
  repo_.WriteVersion(1, "ok");
  manager.Start();
  ASSERT_TRUE(WaitFor([&] { return manager.AllModelsAvailable() && Calls() >= 1; }));
  repo_.WriteVersion(2, "ok");
  // Releases after loading 1, loading 2 and unloading 1; calls requested while one runs may
  // be coalesced, so at least two.
  ASSERT_TRUE(WaitFor([&] {
    auto h = manager.GetServable("m", VersionRequest::Latest());
    return h.ok() && h->version == 2 && manager.GetModelStatus("m", 1).status().code() == StatusCode::kNotFound &&
           Calls() >= 2;
  })) << Calls()
      << " release calls";
  manager.Stop();

  std::lock_guard lock(mu_);
  for (const ReleaseCall& call : calls_) {
    EXPECT_NE(call.thread, loop_thread_.load()) << "memory released on the loop thread";
    if (idle_ok_) {
      EXPECT_NE(call.policy, SCHED_IDLE) << "memory released at SCHED_IDLE";
    }
  }
}

TEST_F(MemoryReleaseTest, RunsInlineWhenPolledWithoutStart) {
  ModelManager manager(loader_, Options());
  ASSERT_TRUE(manager.SetModels({{"m", repo_.base(), VersionPolicy::Latest(1), {}}}).ok());
  repo_.WriteVersion(1, "ok");
  manager.PollOnce();
  manager.PollOnce();
  std::lock_guard lock(mu_);
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(calls_[0].thread, std::this_thread::get_id());
}

TEST_F(MemoryReleaseTest, LoadsQuietFollowsOnceNoLoadFinishedForQuietAfter) {
  ManagerOptions options = Options();
  // Far above the ~110 ms between the versions below (a 100 ms pause, 10 ms polls): on a busy
  // machine one gap took 520 ms, longer than the 300 ms this was, and the quiet call came between
  // two versions.
  options.quiet_after = std::chrono::milliseconds(2000);
  std::atomic<int> quiet_calls{0};
  std::atomic<size_t> releases_at_quiet{0};
  options.loads_quiet = [&] {
    releases_at_quiet = Calls();
    ++quiet_calls;
  };
  ModelManager manager(loader_, options);
  ASSERT_TRUE(manager.SetModels({{"m", repo_.base(), VersionPolicy::Latest(1), {}}}).ok());
  repo_.WriteVersion(1, "ok");
  manager.Start();
  ASSERT_TRUE(WaitFor([&] { return manager.AllModelsAvailable() && Calls() >= 1; }));
  // Versions keep arriving faster than quiet_after: the kept memory stays kept.
  for (int v = 2; v <= 6; ++v) {
    repo_.WriteVersion(v, "ok");
    ASSERT_TRUE(WaitFor([&] {
      auto h = manager.GetServable("m", VersionRequest::Latest());
      return h.ok() && h->version == v;
    }));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(quiet_calls.load(), 0) << "released while versions kept arriving";
  // Then nothing happens: one call, after the last release.
  ASSERT_TRUE(WaitFor([&] { return quiet_calls.load() == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(quiet_calls.load(), 1);
  EXPECT_EQ(releases_at_quiet.load(), Calls());
  manager.Stop();
}

TEST_F(MemoryReleaseTest, LoadsQuietRunsInlineWhenPolledWithoutStart) {
  ManagerOptions options = Options();
  int quiet_calls = 0;
  options.loads_quiet = [&] { ++quiet_calls; };
  ModelManager manager(loader_, options);
  ASSERT_TRUE(manager.SetModels({{"m", repo_.base(), VersionPolicy::Latest(1), {}}}).ok());
  repo_.WriteVersion(1, "ok");
  manager.PollOnce();
  manager.PollOnce();  // the first poll sees the new file, the second loads it (complete by then)
  EXPECT_EQ(Calls(), 1u);
  EXPECT_EQ(quiet_calls, 1);
}

}  // namespace
}  // namespace mf::server
