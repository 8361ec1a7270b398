// DispatchRun: which runs an io thread may do itself (batching enqueues, cheap CPU models) and
// which go to the run pool (slow models, GPU models, models not measured yet).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string_view>
#include <thread>

#include "server/observability/metered_servable.h"
#include "server/repository/run_pool.h"

namespace mf::server {
namespace {

// A servable whose runs take `run_time` on `device`.
class TimedServable : public Servable {
 public:
  TimedServable(std::chrono::microseconds run_time, std::string_view device) : run_time_(run_time), device_(device) {}
  const runtime::Signature& signature() const override { return signature_; }
  Status Run(const std::vector<const runtime::Tensor*>&, Outputs* outputs) const override {
    ++runs_;
    std::this_thread::sleep_for(run_time_);
    outputs->clear();
    return Status::Ok();
  }
  size_t memory_bytes() const override { return 0; }
  std::string_view device() const override { return device_; }
  int runs() const { return runs_.load(); }

 private:
  std::chrono::microseconds run_time_;
  std::string_view device_;
  runtime::Signature signature_;
  mutable std::atomic<int> runs_{0};
};

// The thread `done` ran on, for one dispatched run.
std::thread::id DispatchAndWait(RunPool& pool, const std::shared_ptr<const Servable>& servable) {
  std::promise<std::thread::id> ran_on;
  DispatchRun(pool, servable, {},
              [&](Status status, Servable::Outputs) {
                EXPECT_TRUE(status.ok()) << status.ToString();
                ran_on.set_value(std::this_thread::get_id());
              },
              {});
  return ran_on.get_future().get();
}

TEST(RunDispatch, CheapCpuModelsRunInlineOnceMeasured) {
  RunPool pool(1);
  auto cheap =
      std::make_shared<MeteredServable>(std::make_shared<TimedServable>(std::chrono::microseconds(0), "cpu"), "m", 1);
  EXPECT_FALSE(cheap->cheap_enough_to_run_inline());  // nothing measured yet
  EXPECT_NE(DispatchAndWait(pool, cheap), std::this_thread::get_id());
  // Runs measured slow only because this machine was busy (a preempted sleep) move the average
  // back under the budget within a few dozen cheap runs; until then they stay in the pool.
  for (int run = 0; run < 64 && !cheap->cheap_enough_to_run_inline(); ++run) {
    EXPECT_NE(DispatchAndWait(pool, cheap), std::this_thread::get_id());
  }
  ASSERT_TRUE(cheap->cheap_enough_to_run_inline());
  EXPECT_EQ(DispatchAndWait(pool, cheap), std::this_thread::get_id());
}

TEST(RunDispatch, SlowOrGpuModelsGoToThePool) {
  RunPool pool(1);
  auto slow = std::make_shared<MeteredServable>(std::make_shared<TimedServable>(std::chrono::microseconds(2000), "cpu"),
                                                "m", 1);
  for (int i = 0; i < 3; ++i) EXPECT_NE(DispatchAndWait(pool, slow), std::this_thread::get_id());
  EXPECT_FALSE(slow->cheap_enough_to_run_inline());
  auto gpu =
      std::make_shared<MeteredServable>(std::make_shared<TimedServable>(std::chrono::microseconds(0), "cuda"), "m", 1);
  for (int i = 0; i < 3; ++i) EXPECT_NE(DispatchAndWait(pool, gpu), std::this_thread::get_id());
  EXPECT_FALSE(gpu->cheap_enough_to_run_inline());
}

// A run that waited in the pool past its caller's deadline is answered with that and not run.
TEST(RunDispatch, QueuedRunsNoLongerWantedAreSkipped) {
  RunPool pool(1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  pool.Post([released] { released.wait_for(std::chrono::seconds(10)); });  // the only thread is busy
  auto model = std::make_shared<TimedServable>(std::chrono::microseconds(0), "cpu");
  std::atomic<bool> expired{false};
  std::promise<Status> answered;
  DispatchRun(
      pool, model, {}, [&](Status status, Servable::Outputs) { answered.set_value(status); },
      [&expired](auto /*expected_end*/) { return expired ? DeadlineExceeded("too late") : Status::Ok(); });
  expired = true;
  release.set_value();
  EXPECT_EQ(answered.get_future().get().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(model->runs(), 0);
}

// A measured slow model's run that waited in the pool is skipped when it would end after its
// caller's deadline.
TEST(RunDispatch, QueuedRunsThatWouldEndTooLateAreSkipped) {
  RunPool pool(1);
  auto inner = std::make_shared<TimedServable>(std::chrono::microseconds(20000), "cpu");
  auto slow = std::make_shared<MeteredServable>(inner, "m", 1);
  DispatchAndWait(pool, slow);  // measured: ~20 ms per run
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  pool.Post([released] { released.wait_for(std::chrono::seconds(10)); });
  std::promise<Status> answered;
  DispatchRun(
      pool, slow, {}, [&](Status status, Servable::Outputs) { answered.set_value(status); },
      [](std::chrono::steady_clock::time_point expected_end) {
        // A deadline 5 ms after the run would start.
        return expected_end > std::chrono::steady_clock::now() + std::chrono::milliseconds(5)
                   ? DeadlineExceeded("would end too late")
                   : Status::Ok();
      });
  release.set_value();
  EXPECT_EQ(answered.get_future().get().code(), StatusCode::kDeadlineExceeded);
  // Skipped runs are not averaged in as 0 s runs: the slow model stays off the io threads.
  for (int i = 0; i < 60; ++i) {
    std::promise<void> skipped;
    DispatchRun(
        pool, slow, {}, [&](Status, Servable::Outputs) { skipped.set_value(); },
        [](std::chrono::steady_clock::time_point) { return Cancelled("gone"); });
    skipped.get_future().get();
  }
  EXPECT_FALSE(slow->cheap_enough_to_run_inline());
  EXPECT_EQ(inner->runs(), 1);
}

}  // namespace
}  // namespace mf::server
