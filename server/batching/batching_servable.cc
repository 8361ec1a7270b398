#include "server/batching/batching_servable.h"

#include <algorithm>
#include <future>
#include <utility>

#include "server/batching/batching_metrics.h"
#include "server/batching/tensor_batch.h"
#include "server/observability/metered_servable.h"
#include "server/observability/request_metrics.h"

namespace mf::server::batching {
namespace {

// The rows of a request when it can join a batch: every input has rank >= 1 and one dim 0.
std::optional<int64_t> BatchRows(const std::vector<runtime::Tensor>& inputs) {
  if (inputs.empty()) return std::nullopt;
  int64_t rows = -1;
  for (const runtime::Tensor& t : inputs) {
    if (t.rank() < 1 || t.dim(0) < 1) return std::nullopt;
    if (rows >= 0 && t.dim(0) != rows) return std::nullopt;
    rows = t.dim(0);
  }
  return rows;
}

// With pad_variable_length_inputs, whether `inputs` may be padded together with other requests:
// each matches its signature input in dtype, rank and every dim the model fixes, and has an
// element to pad with. Padding then only grows the dims the model declares variable, so a
// request the model would refuse runs (and fails) alone instead of failing a whole batch.
bool PaddableForSignature(const std::vector<runtime::Tensor>& inputs, const runtime::Signature& signature) {
  if (inputs.size() != signature.inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const runtime::TensorInfo& info = signature.inputs[i];
    const runtime::Tensor& input = inputs[i];
    if (input.dtype() != info.dtype || input.shape().size() != info.shape.size() || input.num_elements() == 0) {
      return false;
    }
    for (size_t d = 1; d < info.shape.size(); ++d) {
      if (info.shape[d] >= 0 && info.shape[d] != input.shape()[d]) return false;
    }
  }
  return true;
}

int64_t TotalRows(const std::vector<BatchTask>& tasks) {
  int64_t rows = 0;
  for (const BatchTask& task : tasks) rows += task.rows;
  return rows;
}

// Answers and removes the tasks that no longer want a run ending at `expected_end`.
void LeaveOutUnwanted(std::vector<BatchTask>& tasks, std::chrono::steady_clock::time_point expected_end,
                      const std::string& model_name) {
  size_t kept = 0;
  for (BatchTask& task : tasks) {
    if (task.still_wanted) {
      if (Status wanted = task.still_wanted(expected_end); !wanted.ok()) {
        CountSkippedRequest(model_name, std::string(StatusCodeName(wanted.code())));
        task.done(std::move(wanted), {});
        continue;
      }
    }
    if (&tasks[kept] != &task) tasks[kept] = std::move(task);
    ++kept;
  }
  tasks.erase(tasks.begin() + static_cast<std::ptrdiff_t>(kept), tasks.end());
}

void FailAll(std::vector<BatchTask>& tasks, const Status& status) {
  for (BatchTask& task : tasks) task.done(status, {});
}

}  // namespace

BatchingServable::BatchingServable(std::shared_ptr<const Servable> inner, std::shared_ptr<BatchScheduler> scheduler,
                                   std::string model_name, int64_t version, std::optional<BatchingOptions> options)
    : inner_(std::move(inner)),
      alone_(std::make_shared<MeteredServable>(inner_, model_name, version)),
      scheduler_(std::move(scheduler)),
      options_(options ? std::move(*options) : scheduler_->options()) {
  // The processor owns what a pending batch needs, so batches still queued when this servable
  // is unloaded run to completion.
  queue_ = scheduler_->AddQueue(
      [inner = inner_, options = options_, name = std::move(model_name), version,
       recent = std::make_shared<RecentRuns>()](std::vector<BatchTask> tasks) {
        ProcessBatch(*inner, options, name, version, *recent, std::move(tasks));
      },
      options_);
}

Status BatchingServable::Run(const std::vector<const runtime::Tensor*>& inputs, Outputs* outputs) const {
  std::vector<runtime::Tensor> owned;
  owned.reserve(inputs.size());
  for (const runtime::Tensor* t : inputs) owned.push_back(t->Clone());
  std::promise<std::pair<Status, Outputs>> promise;
  auto future = promise.get_future();
  RunAsync(std::move(owned),
           [&promise](Status status, Outputs result) {
             promise.set_value({std::move(status), std::move(result)});
           },
           {});
  auto [status, result] = future.get();
  *outputs = std::move(result);
  return status;
}

void BatchingServable::RunAsync(std::vector<runtime::Tensor> inputs, Done done, StillWanted still_wanted) const {
  std::optional<int64_t> rows = BatchRows(inputs);
  if (!rows || *rows > options_.max_batch_size ||
      (options_.pad_variable_length_inputs && !PaddableForSignature(inputs, inner_->signature()))) {
    // Not batchable, or larger than any batch: run it alone rather than refuse it.
    alone_->RunAsync(std::move(inputs), std::move(done), std::move(still_wanted));
    return;
  }
  BatchTask task{std::move(inputs), *rows, {}, std::move(done), std::move(still_wanted)};
  // Schedule() leaves `task` intact on failure, so the request is answered here.
  Status scheduled = scheduler_->Schedule(*queue_, std::move(task));
  if (!scheduled.ok()) task.done(scheduled, {});
}

std::optional<std::chrono::nanoseconds> BatchingServable::RecentRuns::Estimate(int64_t rows) const {
  const auto batch = per_batch.get();
  const auto row = per_row.get();
  if (!batch || !row) return std::nullopt;
  return std::min(*batch, *row * rows);
}

void BatchingServable::ProcessBatch(const Servable& inner, const BatchingOptions& options,
                                    const std::string& model_name, int64_t version, RecentRuns& recent,
                                    std::vector<BatchTask> tasks) {
  const auto started = std::chrono::steady_clock::now();
  for (const BatchTask& task : tasks) {
    RecordQueueWait(model_name, version, std::chrono::duration<double>(started - task.enqueued).count());
  }
  // Requests whose callers gave up while queued (deadline passed, call cancelled) are answered
  // now and left out; then those whose deadline falls before the rest of the batch would end.
  // Under overload, running them would only delay the requests still wanted, and in a queue
  // longer than the deadlines allow, the oldest requests are exactly those.
  LeaveOutUnwanted(tasks, started, model_name);
  if (tasks.empty()) return;
  if (const auto run_time = recent.Estimate(PaddedBatchSize(options, TotalRows(tasks)))) {
    LeaveOutUnwanted(tasks, started + *run_time, model_name);
    if (tasks.empty()) return;
  }
  const int64_t rows = TotalRows(tasks);
  const int64_t padded = PaddedBatchSize(options, rows);
  ObserveBatch(model_name, rows, padded - rows);

  const size_t num_inputs = tasks.front().inputs.size();
  // Assembled where the model reads fastest (page-locked for a GPU session: one DMA to the device).
  const BatchAllocator allocate = [&inner](runtime::DataType dtype, runtime::Shape shape) {
    return inner.AllocateInput(dtype, std::move(shape));
  };
  std::vector<runtime::Tensor> batched;
  batched.reserve(num_inputs);
  for (size_t i = 0; i < num_inputs; ++i) {
    std::vector<const runtime::Tensor*> parts;
    parts.reserve(tasks.size());
    for (const BatchTask& task : tasks) parts.push_back(&task.inputs[i]);
    auto merged = options.pad_variable_length_inputs ? PadAndConcat(parts, padded - rows, allocate)
                                                     : ConcatAndPad(parts, padded - rows, allocate);
    if (!merged.ok()) return FailAll(tasks, merged.status());
    batched.push_back(std::move(merged).value());
  }
  std::vector<const runtime::Tensor*> pointers;
  for (const runtime::Tensor& t : batched) pointers.push_back(&t);
  Outputs outputs;
  const auto run_started = std::chrono::steady_clock::now();
  Status run = inner.Run(pointers, &outputs);
  const double run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_started).count();
  recent.per_batch.Observe(run_seconds);
  recent.per_row.Observe(run_seconds / static_cast<double>(padded));
  RecordExecution({model_name, version, rows, static_cast<int64_t>(tasks.size()), run.ok(), run_seconds});
  if (!run.ok()) return FailAll(tasks, run);
  for (const runtime::Tensor& out : outputs) {
    if (out.rank() < 1 || out.dim(0) != padded) {
      return FailAll(tasks, FailedPrecondition("model output of shape " + runtime::ShapeToString(out.shape()) +
                                               " has no batch dimension of size " + std::to_string(padded) +
                                               "; disable batching for this model"));
    }
  }
  int64_t begin = 0;
  for (BatchTask& task : tasks) {
    Outputs mine;
    mine.reserve(outputs.size());
    Status sliced;
    for (const runtime::Tensor& out : outputs) {
      auto slice = SliceRows(out, begin, task.rows);
      if (!slice.ok()) {
        sliced = slice.status();
        break;
      }
      mine.push_back(std::move(slice).value());
    }
    begin += task.rows;
    if (sliced.ok()) {
      task.done(Status::Ok(), std::move(mine));
    } else {
      task.done(sliced, {});
    }
  }
}

}  // namespace mf::server::batching
