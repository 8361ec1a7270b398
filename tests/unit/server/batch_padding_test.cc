// pad_variable_length_inputs: PadAndConcat's values and shapes (TF Serving pads each tensor with
// its own first element), the scheduler's grouping with and without the option, the padded-size
// bound, and BatchingServable batching only requests that match the model's fixed dims.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>

#include "run_gate.h"
#include "server/batching/batch_scheduler.h"
#include "server/batching/batching_servable.h"
#include "server/batching/tensor_batch.h"
#include "tensor_values.h"

namespace mf::server::batching {
namespace {

using runtime::DataType;
using runtime::Shape;
using runtime::Tensor;
using testing::FloatValues;

Tensor Iota(Shape shape, float first) {
  auto t = Tensor::Allocate(DataType::kFloat32, std::move(shape));
  EXPECT_TRUE(t.ok());
  for (int64_t i = 0; i < t->num_elements(); ++i) t->data<float>()[i] = first + static_cast<float>(i);
  return std::move(t).value();
}

TEST(PadAndConcatTest, PadsEveryDimAfterTheFirstWithEachTensorsFirstElement) {
  Tensor a = Iota({1, 2, 2}, 1);   // [[1 2] [3 4]]
  Tensor b = Iota({2, 1, 3}, 10);  // [[10 11 12]] [[13 14 15]]
  Tensor c = Iota({1, 3, 1}, 20);  // [[20] [21] [22]]
  auto batch = PadAndConcat({&a, &b, &c}, 0);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->shape(), (Shape{4, 3, 3}));
  EXPECT_EQ(FloatValues(*batch), (std::vector<float>{
                                     1,  2,  1,  3,  4,  1,  1,  1,  1,   // a, padded with 1
                                     10, 11, 12, 10, 10, 10, 10, 10, 10,  // b row 0, padded with 10
                                     13, 14, 15, 10, 10, 10, 10, 10, 10,  // b row 1
                                     20, 20, 20, 21, 20, 20, 22, 20, 20,  // c, padded with 20
                                 }));
}

TEST(PadAndConcatTest, TfServingExampleShapesAndAllowedSizeRows) {
  // batching_session.h's example: [1, 500, 101], [2, 300, 101], [1, 400, 101].
  Tensor a = Iota({1, 500, 101}, 0);
  Tensor b = Iota({2, 300, 101}, 7);
  Tensor c = Iota({1, 400, 101}, 3);
  auto batch = PadAndConcat({&a, &b, &c}, 2);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  ASSERT_EQ(batch->shape(), (Shape{6, 500, 101}));
  const float* v = batch->data<float>();
  const int64_t row = 500 * 101;
  EXPECT_EQ(v[row - 1], static_cast<float>(row - 1)) << "a needs no padding";
  EXPECT_EQ(v[row + 299 * 101 + 100], 7.0f + 299 * 101 + 100) << "b's last real element";
  EXPECT_EQ(v[row + 300 * 101], 7.0f) << "b's padding is its first element";
  EXPECT_EQ(v[2 * row], 7.0f + 300 * 101) << "b's second row starts with its own values";
  EXPECT_EQ(v[2 * row + 300 * 101], 7.0f) << "and is padded with b's first element";
  EXPECT_EQ(v[3 * row + 400 * 101], 3.0f) << "c's padding is its first element";
  for (int64_t p = 4; p < 6; ++p) {
    EXPECT_TRUE(std::equal(v, v + row, v + p * row)) << "allowed-size row " << p << " copies the first row";
  }
}

TEST(PadAndConcatTest, EqualShapesAreAPlainConcat) {
  Tensor a = Iota({1, 3}, 0);
  Tensor b = Iota({2, 3}, 10);
  auto padded = PadAndConcat({&a, &b}, 1);
  auto plain = ConcatAndPad({&a, &b}, 1);
  ASSERT_TRUE(padded.ok() && plain.ok());
  EXPECT_EQ(FloatValues(*padded), FloatValues(*plain));
  EXPECT_EQ(FloatValues(*padded), (std::vector<float>{0, 1, 2, 10, 11, 12, 13, 14, 15, 0, 1, 2}));
}

TEST(PadAndConcatTest, StringsPadWithTheirFirstString) {
  auto a = Tensor::Allocate(DataType::kString, {1, 1});
  auto b = Tensor::Allocate(DataType::kString, {1, 3});
  a->strings() = {"x"};
  b->strings() = {"p", "q", "r"};
  auto batch = PadAndConcat({&*a, &*b}, 1);
  ASSERT_TRUE(batch.ok()) << batch.status().ToString();
  EXPECT_EQ(batch->shape(), (Shape{3, 3}));
  EXPECT_EQ(batch->strings(), (std::vector<std::string>{"x", "x", "x", "p", "q", "r", "x", "x", "x"}));
}

TEST(PadAndConcatTest, RefusesOtherRanksTypesAndNothingToPadWith) {
  Tensor a = Iota({1, 2}, 0);
  Tensor rank3 = Iota({1, 2, 1}, 0);
  auto ints = Tensor::Allocate(DataType::kInt32, {1, 2});
  EXPECT_FALSE(SamePaddableShape(a, rank3));
  EXPECT_FALSE(SamePaddableShape(a, *ints));
  EXPECT_TRUE(SamePaddableShape(a, Iota({3, 7}, 0)));
  EXPECT_EQ(PadAndConcat({&a, &rank3}, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PadAndConcat({&a, &*ints}, 0).status().code(), StatusCode::kInvalidArgument);
  Tensor empty_row = Iota({1, 0}, 0);
  auto refused = PadAndConcat({&a, &empty_row}, 0);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("no element to pad with"), std::string::npos);
  EXPECT_EQ(ConcatAndPad({&a, &rank3}, 0).status().code(), StatusCode::kInvalidArgument)
      << "without the option, shapes must be equal";
}

// A scheduler with one batch thread that a first batch (on a queue of its own) holds, so every
// task scheduled meanwhile is grouped before anything runs; records the shapes of each batch.
class HeldScheduler {
 public:
  explicit HeldScheduler(BatchingOptions options) {
    options.num_batch_threads = 1;
    options.batch_timeout = std::chrono::microseconds(0);
    scheduler_ = std::make_unique<BatchScheduler>(options);
    blocker_ = scheduler_->AddQueue([this](std::vector<BatchTask> tasks) {
      std::unique_lock lock(mu_);
      held_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return released_; });
      for (BatchTask& t : tasks) t.done(Status::Ok(), {});
    });
    queue_ = scheduler_->AddQueue([this](std::vector<BatchTask> tasks) {
      std::vector<Shape> shapes;
      for (BatchTask& t : tasks) shapes.push_back(t.inputs[0].shape());
      for (BatchTask& t : tasks) t.done(Status::Ok(), {});
      std::lock_guard lock(mu_);
      batches_.push_back(std::move(shapes));
      cv_.notify_all();
    });
    EXPECT_TRUE(scheduler_->Schedule(*blocker_, Task(Iota({options.max_batch_size, 1}, 0))).ok());
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(30), [this] { return held_; }));
  }

  ~HeldScheduler() {
    std::lock_guard lock(mu_);
    released_ = true;  // a failed test must not leave the batch thread held at join
    cv_.notify_all();
  }

  Status Schedule(Tensor input) { return scheduler_->Schedule(*queue_, Task(std::move(input))); }

  // Lets the held batch finish, waits for `tasks` tasks to run, returns each batch's shapes.
  std::vector<std::vector<Shape>> Release(size_t tasks) {
    std::unique_lock lock(mu_);
    released_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(30), [&] {
      size_t ran = 0;
      for (const auto& b : batches_) ran += b.size();
      return ran >= tasks;
    });
    return batches_;
  }

 private:
  static BatchTask Task(Tensor input) {
    BatchTask task;
    task.rows = input.dim(0);
    task.inputs.push_back(std::move(input));
    task.done = [](Status, std::vector<Tensor>) {};
    return task;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  bool released_ = false;
  std::vector<std::vector<Shape>> batches_;
  std::unique_ptr<BatchScheduler> scheduler_;  // declared after what its threads use
  std::shared_ptr<BatchScheduler::Queue> blocker_, queue_;
};

BatchingOptions Options(bool pad) {
  BatchingOptions options;
  options.max_batch_size = 8;
  options.pad_variable_length_inputs = pad;
  return options;
}

TEST(BatchSchedulerPaddingTest, WithoutTheOptionOtherShapesOpenNewBatches) {
  HeldScheduler held(Options(false));
  ASSERT_TRUE(held.Schedule(Iota({1, 5}, 0)).ok());
  ASSERT_TRUE(held.Schedule(Iota({1, 5}, 0)).ok());
  ASSERT_TRUE(held.Schedule(Iota({2, 3}, 0)).ok());
  ASSERT_TRUE(held.Schedule(Iota({1, 5}, 0)).ok());
  auto batches = held.Release(4);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<Shape>{{1, 5}, {1, 5}}));
  EXPECT_EQ(batches[1], (std::vector<Shape>{{2, 3}}));
  EXPECT_EQ(batches[2], (std::vector<Shape>{{1, 5}}));
}

TEST(BatchSchedulerPaddingTest, WithTheOptionSameDtypeAndRankShareABatch) {
  HeldScheduler held(Options(true));
  ASSERT_TRUE(held.Schedule(Iota({1, 5}, 0)).ok());
  ASSERT_TRUE(held.Schedule(Iota({2, 3}, 0)).ok());
  ASSERT_TRUE(held.Schedule(Iota({1, 9}, 0)).ok());
  ASSERT_TRUE(held.Schedule(Iota({1, 2, 2}, 0)).ok());  // another rank: a batch of its own
  auto ints = Tensor::Allocate(DataType::kInt32, {1, 5});
  ASSERT_TRUE(held.Schedule(std::move(ints).value()).ok());  // another dtype: its own too
  auto batches = held.Release(5);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<Shape>{{1, 5}, {2, 3}, {1, 9}}));
  EXPECT_EQ(batches[1], (std::vector<Shape>{{1, 2, 2}}));
  EXPECT_EQ(batches[2], (std::vector<Shape>{{1, 5}}));
}

TEST(BatchSchedulerPaddingTest, ARequestWhosePaddingWouldExceedTheTensorLimitOpensANewBatch) {
  HeldScheduler held(Options(true));
  // Each is 128 KiB; padded together they would be [2, 32768, 32768] floats = 8 GiB.
  ASSERT_TRUE(held.Schedule(Iota({1, 32768, 1}, 0)).ok());
  ASSERT_TRUE(held.Schedule(Iota({1, 1, 32768}, 0)).ok());
  ASSERT_TRUE(held.Schedule(Iota({1, 2, 32768}, 0)).ok());  // joins the second: [2, 2, 32768]
  auto batches = held.Release(3);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0], (std::vector<Shape>{{1, 32768, 1}}));
  EXPECT_EQ(batches[1], (std::vector<Shape>{{1, 1, 32768}, {1, 2, 32768}}));
}

TEST(BatchSchedulerPaddingTest, LongStringsCountAtTheirLengthInThePaddingBound) {
  HeldScheduler held(Options(true));
  // Padding the first with copies of its 1 MiB string up to 8192 columns would take 16 GiB.
  auto big = Tensor::Allocate(DataType::kString, {1, 1});
  big->strings()[0] = std::string(1 << 20, 'x');
  auto wide = Tensor::Allocate(DataType::kString, {1, 8192});
  auto narrow = Tensor::Allocate(DataType::kString, {1, 2});
  ASSERT_TRUE(held.Schedule(std::move(big).value()).ok());
  ASSERT_TRUE(held.Schedule(std::move(wide).value()).ok());
  ASSERT_TRUE(held.Schedule(std::move(narrow).value()).ok());  // short strings: joins the wide one
  auto batches = held.Release(3);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0], (std::vector<Shape>{{1, 1}}));
  EXPECT_EQ(batches[1], (std::vector<Shape>{{1, 8192}, {1, 2}}));
}

// Echoes its input (so padding is visible) and records the shapes it ran; held at a gate.
class EchoServable : public Servable {
 public:
  explicit EchoServable(Shape declared) { signature_.inputs.push_back({"x", DataType::kFloat32, std::move(declared)}); }
  const runtime::Signature& signature() const override { return signature_; }
  Status Run(const std::vector<const Tensor*>& inputs, Outputs* outputs) const override {
    {
      std::lock_guard lock(mu_);
      ran_.push_back(inputs[0]->shape());
    }
    gate_.Pass();
    outputs->clear();
    outputs->push_back(inputs[0]->Clone());
    return Status::Ok();
  }
  size_t memory_bytes() const override { return 0; }
  void Close() { gate_.Close(); }
  void Open() { gate_.Open(); }
  void WaitRuns(size_t n) { gate_.WaitArrived(static_cast<int>(n)); }
  std::vector<Shape> ran() const {
    std::lock_guard lock(mu_);
    return ran_;
  }

 private:
  runtime::Signature signature_;
  mutable testing::RunGate gate_;
  mutable std::mutex mu_;
  mutable std::vector<Shape> ran_;
};

using Result = std::future<std::pair<Status, std::vector<Tensor>>>;

Result Submit(const Servable& servable, Tensor input) {
  auto promise = std::make_shared<std::promise<std::pair<Status, std::vector<Tensor>>>>();
  Result result = promise->get_future();
  std::vector<Tensor> inputs;
  inputs.push_back(std::move(input));
  servable.RunAsync(std::move(inputs),
                    [promise](Status s, std::vector<Tensor> out) {
                      promise->set_value({std::move(s), std::move(out)});
                    },
                    {});
  return result;
}

TEST(BatchingServablePaddingTest, VariableLengthRequestsShareAPaddedBatchAndGetPaddedRows) {
  BatchingOptions options = Options(true);
  options.num_batch_threads = 1;
  options.batch_timeout = std::chrono::microseconds(0);
  auto inner = std::make_shared<EchoServable>(Shape{-1, -1, 2});
  BatchingServable servable(inner, std::make_shared<BatchScheduler>(options), "m", 1);
  inner->Close();
  Result first = Submit(servable, Iota({1, 1, 2}, 0));
  inner->WaitRuns(1);  // the batch thread is held: the next three are grouped
  Result a = Submit(servable, Iota({1, 2, 2}, 10));
  Result b = Submit(servable, Iota({2, 1, 2}, 20));
  // The model fixes dim 2 at 2, so this one runs alone (inline, on its caller's thread).
  auto odd = std::async(std::launch::async, [&] { return Submit(servable, Iota({1, 2, 3}, 30)).get(); });
  inner->WaitRuns(2);
  inner->Open();
  auto [sa, oa] = a.get();
  auto [sb, ob] = b.get();
  ASSERT_TRUE(sa.ok() && sb.ok()) << sa.ToString() << sb.ToString();
  EXPECT_TRUE(first.get().first.ok());
  EXPECT_TRUE(odd.get().first.ok());
  EXPECT_EQ(oa[0].shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(FloatValues(oa[0]), (std::vector<float>{10, 11, 12, 13}));
  EXPECT_EQ(ob[0].shape(), (Shape{2, 2, 2})) << "the model's output for the padded batch, split by rows";
  EXPECT_EQ(FloatValues(ob[0]), (std::vector<float>{20, 21, 20, 20, 22, 23, 20, 20}));
  EXPECT_EQ(inner->ran(), (std::vector<Shape>{{1, 1, 2}, {1, 2, 3}, {3, 2, 2}}));
}

}  // namespace
}  // namespace mf::server::batching
