#include "server/batching/batching_servable.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "run_gate.h"

namespace mf::server::batching {
namespace {

using runtime::DataType;
using runtime::Tensor;

// output = 2 * input + 1, row by row; records the batch sizes it ran; can be held at a gate.
class AffineServable : public Servable {
 public:
  const runtime::Signature& signature() const override { return signature_; }
  Status Run(const std::vector<const Tensor*>& inputs, Outputs* outputs) const override {
    gate_.Pass();
    {
      std::lock_guard lock(mu_);
      batch_sizes_.push_back(inputs[0]->dim(0));
    }
    auto out = Tensor::Allocate(DataType::kFloat32, inputs[0]->shape());
    if (!out.ok()) return out.status();
    for (int64_t i = 0; i < out->num_elements(); ++i) {
      out->data<float>()[i] = 2 * inputs[0]->data<float>()[i] + 1;
    }
    outputs->clear();
    outputs->push_back(std::move(out).value());
    return Status::Ok();
  }
  size_t memory_bytes() const override { return 0; }

  void Close() { gate_.Close(); }
  void Open() { gate_.Open(); }
  void WaitEntered(int n) { gate_.WaitArrived(n); }
  std::vector<int64_t> batch_sizes() const {
    std::lock_guard lock(mu_);
    return batch_sizes_;
  }

 private:
  runtime::Signature signature_;
  mutable testing::RunGate gate_;
  mutable std::mutex mu_;
  mutable std::vector<int64_t> batch_sizes_;
};

Tensor Rows(int64_t rows, float first, int64_t width = 2) {
  auto t = Tensor::Allocate(DataType::kFloat32, {rows, width});
  for (int64_t i = 0; i < t->num_elements(); ++i) t->data<float>()[i] = first + static_cast<float>(i);
  return std::move(t).value();
}

std::pair<Status, std::vector<Tensor>> RunOne(const Servable& s, Tensor input) {
  std::vector<Tensor> inputs;
  inputs.push_back(std::move(input));
  std::promise<std::pair<Status, std::vector<Tensor>>> p;
  auto f = p.get_future();
  s.RunAsync(std::move(inputs),
             [&](Status st, std::vector<Tensor> out) {
               p.set_value({std::move(st), std::move(out)});
             },
             {});
  return f.get();
}

// A batching servable with one batch thread, held busy by a first request (at the inner gate),
// so the requests that follow wait in the queue until Release().
struct HeldBatchThread {
  explicit HeldBatchThread(BatchingOptions options) {
    options.num_batch_threads = 1;
    servable = std::make_unique<BatchingServable>(inner, std::make_shared<BatchScheduler>(options), "m", 1);
    inner->Close();
    first = std::async(std::launch::async, [this] { return RunOne(*servable, Rows(1, 0)); });
    inner->WaitEntered(1);
  }
  // Opens the gate; the first request's status.
  Status Release() {
    inner->Open();
    return first.get().first;
  }

  std::shared_ptr<AffineServable> inner = std::make_shared<AffineServable>();
  std::unique_ptr<BatchingServable> servable;
  std::future<std::pair<Status, std::vector<Tensor>>> first;
};

TEST(BatchingOptionsTest, Validation) {
  BatchingOptions ok;
  ok.max_batch_size = 8;
  ok.allowed_batch_sizes = {2, 4, 8};
  EXPECT_TRUE(ValidateBatchingOptions(ok).ok());
  EXPECT_EQ(PaddedBatchSize(ok, 3), 4);
  EXPECT_EQ(PaddedBatchSize(ok, 8), 8);
  BatchingOptions bad = ok;
  bad.allowed_batch_sizes = {2, 4};
  EXPECT_NE(ValidateBatchingOptions(bad).message().find("must equal max_batch_size"), std::string::npos);
  bad.allowed_batch_sizes = {4, 2, 8};
  EXPECT_FALSE(ValidateBatchingOptions(bad).ok());
  bad = ok;
  bad.max_batch_size = 0;
  EXPECT_FALSE(ValidateBatchingOptions(bad).ok());
  bad = ok;
  bad.max_enqueued_batches = 0;
  EXPECT_FALSE(ValidateBatchingOptions(bad).ok());
}

TEST(BatchingServableTest, ConcurrentRequestsShareBatchesAndGetTheirOwnRows) {
  BatchingOptions options;
  options.max_batch_size = 16;
  options.batch_timeout = std::chrono::milliseconds(50);
  options.num_batch_threads = 2;
  auto inner = std::make_shared<AffineServable>();
  auto scheduler = std::make_shared<BatchScheduler>(options);
  BatchingServable servable(inner, scheduler, "m", 1);

  constexpr int kClients = 12;
  std::vector<std::thread> clients;
  std::atomic<int> correct{0};
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      auto [status, out] = RunOne(servable, Rows(1, static_cast<float>(10 * c)));
      if (status.ok() && out.size() == 1 && out[0].dim(0) == 1 && out[0].data<float>()[0] == 2 * (10.0f * c) + 1 &&
          out[0].data<float>()[1] == 2 * (10.0f * c + 1) + 1) {
        ++correct;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(correct.load(), kClients);
  auto sizes = inner->batch_sizes();
  int64_t total = 0, largest = 0;
  for (int64_t s : sizes) {
    total += s;
    largest = std::max(largest, s);
  }
  EXPECT_EQ(total, kClients);
  EXPECT_GT(largest, 1) << "a 50 ms window must catch more than one of 12 concurrent requests";
}

TEST(BatchingServableTest, PadsToAllowedBatchSize) {
  BatchingOptions options;
  options.max_batch_size = 8;
  options.allowed_batch_sizes = {4, 8};
  options.batch_timeout = std::chrono::microseconds(0);
  options.num_batch_threads = 1;
  auto inner = std::make_shared<AffineServable>();
  BatchingServable servable(inner, std::make_shared<BatchScheduler>(options), "m", 1);
  auto [status, out] = RunOne(servable, Rows(3, 0));
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(out[0].dim(0), 3) << "padding rows are not returned";
  EXPECT_EQ(inner->batch_sizes(), (std::vector<int64_t>{4}));
}

TEST(BatchingServableTest, FullQueueFailsFastWithUnavailable) {
  BatchingOptions options;
  options.max_batch_size = 1;
  options.max_enqueued_batches = 1;
  options.batch_timeout = std::chrono::microseconds(0);
  HeldBatchThread held(options);  // the only batch thread is now busy with the first request
  BatchingServable& servable = *held.servable;
  // RunAsync returns at once either way: a queued request is answered later, a refused one
  // inline.
  std::promise<Status> second, third;
  std::vector<Tensor> in2, in3;
  in2.push_back(Rows(1, 1));
  in3.push_back(Rows(1, 2));
  servable.RunAsync(std::move(in2), [&](Status s, std::vector<Tensor>) { second.set_value(s); }, {});
  servable.RunAsync(std::move(in3), [&](Status s, std::vector<Tensor>) { third.set_value(s); }, {});
  auto third_status = third.get_future();
  ASSERT_EQ(third_status.wait_for(std::chrono::seconds(0)), std::future_status::ready)
      << "a full queue answers at once";
  Status refused = third_status.get();
  EXPECT_EQ(refused.code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.message().find("queue"), std::string::npos);
  EXPECT_TRUE(held.Release().ok());
  EXPECT_TRUE(second.get_future().get().ok());
}

// A queued request whose caller gave up (its deadline passed while it waited) is answered with
// that status when its batch closes and is not run; the rest of the batch runs without it.
TEST(BatchingServableTest, RequestsNoLongerWantedAreAnsweredWithoutBeingRun) {
  BatchingOptions options;
  options.max_batch_size = 4;
  HeldBatchThread held(options);  // the only batch thread is busy: the next three wait in one batch
  std::atomic<bool> expired{false};
  std::promise<std::pair<Status, std::vector<Tensor>>> answers[3];
  for (int i = 0; i < 3; ++i) {
    std::vector<Tensor> inputs;
    inputs.push_back(Rows(1, static_cast<float>(10 * (i + 1))));
    Servable::StillWanted still_wanted;
    if (i == 1) {
      still_wanted = [&expired](auto /*expected_end*/) {
        return expired ? DeadlineExceeded("too late") : Status::Ok();
      };
    }
    held.servable->RunAsync(
        std::move(inputs),
        [&answers, i](Status st, std::vector<Tensor> out) {
          answers[i].set_value({std::move(st), std::move(out)});
        },
        std::move(still_wanted));
  }
  expired = true;
  EXPECT_TRUE(held.Release().ok());
  auto kept0 = answers[0].get_future().get();
  auto skipped = answers[1].get_future().get();
  auto kept2 = answers[2].get_future().get();
  EXPECT_EQ(skipped.first.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(skipped.second.empty());
  ASSERT_TRUE(kept0.first.ok()) << kept0.first.ToString();
  ASSERT_TRUE(kept2.first.ok()) << kept2.first.ToString();
  EXPECT_FLOAT_EQ(kept0.second[0].data<float>()[0], 21.f);  // 2 * 10 + 1: its own row, not B's
  EXPECT_FLOAT_EQ(kept2.second[0].data<float>()[0], 61.f);  // 2 * 30 + 1
  EXPECT_EQ(held.inner->batch_sizes(), (std::vector<int64_t>{1, 2})) << "the skipped request was run";
}

// A queued request is asked whether it still wants a run ending when recent batches' run time
// per row says it will (first whether it still wants one at all), so one whose deadline falls
// before that is skipped rather than answered late.
TEST(BatchingServableTest, QueuedRequestsAreAskedWithTheBatchsExpectedEnd) {
  BatchingOptions options;
  options.max_batch_size = 4;
  HeldBatchThread held(options);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  EXPECT_TRUE(held.Release().ok());                            // recent batches: one row in >= 40 ms
  std::vector<std::chrono::steady_clock::duration> asked_for;  // only the batch thread writes
  std::promise<Status> answered;
  std::vector<Tensor> inputs;
  inputs.push_back(Rows(1, 1));
  held.servable->RunAsync(
      std::move(inputs), [&](Status st, std::vector<Tensor>) { answered.set_value(st); },
      [&](std::chrono::steady_clock::time_point expected_end) {
        const auto ahead = expected_end - std::chrono::steady_clock::now();
        asked_for.push_back(ahead);
        // A deadline 10 ms away: a run ending later is not wanted.
        return ahead > std::chrono::milliseconds(10) ? DeadlineExceeded("would end too late") : Status::Ok();
      });
  EXPECT_EQ(answered.get_future().get().code(), StatusCode::kDeadlineExceeded);
  ASSERT_EQ(asked_for.size(), 2u);
  EXPECT_LT(asked_for[0], std::chrono::milliseconds(10));  // still wanted at all?
  EXPECT_GE(asked_for[1], std::chrono::milliseconds(30));  // and when the run would end?
  EXPECT_EQ(held.inner->batch_sizes(), (std::vector<int64_t>{1}));
}

TEST(BatchingServableTest, ABatchOfOnlyUnwantedRequestsDoesNotRun) {
  BatchingOptions options;
  options.max_batch_size = 4;
  HeldBatchThread held(options);
  std::promise<Status> cancelled;
  std::vector<Tensor> inputs;
  inputs.push_back(Rows(1, 1));
  held.servable->RunAsync(
      std::move(inputs), [&](Status st, std::vector<Tensor>) { cancelled.set_value(st); },
      [](auto /*expected_end*/) { return Cancelled("the client cancelled the call"); });
  EXPECT_TRUE(held.Release().ok());
  EXPECT_EQ(cancelled.get_future().get().code(), StatusCode::kCancelled);
  EXPECT_EQ(held.inner->batch_sizes(), (std::vector<int64_t>{1}));
}

TEST(BatchingServableTest, OversizedAndUnbatchableRequestsRunAlone) {
  BatchingOptions options;
  options.max_batch_size = 2;
  options.num_batch_threads = 1;
  auto inner = std::make_shared<AffineServable>();
  BatchingServable servable(inner, std::make_shared<BatchScheduler>(options), "m", 1);
  auto [status, out] = RunOne(servable, Rows(5, 0));
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(out[0].dim(0), 5);
  EXPECT_EQ(inner->batch_sizes(), (std::vector<int64_t>{5}));
}

// A model's own options (--enable_per_model_batching_parameters) shape its batches on the
// shared scheduler, while another model on the same threads keeps the scheduler's.
TEST(BatchingServableTest, OwnOptionsShapeOnlyThatModelsBatches) {
  BatchingOptions shared;
  shared.max_batch_size = 16;
  shared.batch_timeout = std::chrono::milliseconds(50);
  shared.num_batch_threads = 2;
  auto scheduler = std::make_shared<BatchScheduler>(shared);
  BatchingOptions own = shared;
  own.max_batch_size = 2;
  own.allowed_batch_sizes = {2};
  auto narrow_inner = std::make_shared<AffineServable>();
  auto wide_inner = std::make_shared<AffineServable>();
  BatchingServable narrow(narrow_inner, scheduler, "narrow", 1, own);
  BatchingServable wide(wide_inner, scheduler, "wide", 1);

  constexpr int kClients = 8;
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int c = 0; c < 2 * kClients; ++c) {
    clients.emplace_back([&, c] {
      const BatchingServable& target = c % 2 == 0 ? narrow : wide;
      if (RunOne(target, Rows(1, static_cast<float>(c))).first.ok()) ++ok;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 2 * kClients);
  for (int64_t size : narrow_inner->batch_sizes()) EXPECT_EQ(size, 2) << "padded to its own allowed size";
  const auto wide_sizes = wide_inner->batch_sizes();
  EXPECT_GT(*std::max_element(wide_sizes.begin(), wide_sizes.end()), 2) << "the scheduler's 16 still applies";
  // A request larger than the model's own maximum runs alone rather than being refused.
  EXPECT_TRUE(RunOne(narrow, Rows(3, 0)).first.ok());
}

TEST(BatchingServableTest, DifferentInnerShapesNeverShareABatch) {
  BatchingOptions options;
  options.max_batch_size = 8;
  options.batch_timeout = std::chrono::milliseconds(100);
  options.num_batch_threads = 1;
  auto inner = std::make_shared<AffineServable>();
  BatchingServable servable(inner, std::make_shared<BatchScheduler>(options), "m", 1);
  auto a = std::async(std::launch::async, [&] { return RunOne(servable, Rows(1, 0, 2)); });
  auto b = std::async(std::launch::async, [&] { return RunOne(servable, Rows(1, 0, 3)); });
  auto ra = a.get();
  auto rb = b.get();
  ASSERT_TRUE(ra.first.ok());
  ASSERT_TRUE(rb.first.ok());
  EXPECT_EQ(ra.second[0].dim(1), 2);
  EXPECT_EQ(rb.second[0].dim(1), 3);
  EXPECT_EQ(inner->batch_sizes().size(), 2u);
}

TEST(BatchingServableTest, PendingBatchesRunAfterTheServableIsUnloaded) {
  BatchingOptions options;
  options.max_batch_size = 8;
  options.batch_timeout = std::chrono::milliseconds(50);
  options.num_batch_threads = 1;
  auto inner = std::make_shared<AffineServable>();
  auto scheduler = std::make_shared<BatchScheduler>(options);
  std::promise<Status> done;
  {
    BatchingServable servable(inner, scheduler, "m", 1);
    std::vector<Tensor> inputs;
    inputs.push_back(Rows(1, 0));
    servable.RunAsync(std::move(inputs), [&](Status s, std::vector<Tensor>) { done.set_value(s); }, {});
  }
  auto f = done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(f.get().ok());
}

}  // namespace
}  // namespace mf::server::batching
