// BatchScheduler: one pool of batch threads shared by every batched model version (as TF
// Serving's --enable_batching: one scheduler for all models). Each model version has its own
// queue of batches; a request joins the open batch of its queue when its tensors fit (same
// shapes after dim 0, total rows <= max_batch_size), else opens a new one. With
// pad_variable_length_inputs, tensors of the same dtype and rank fit whatever their dims after
// dim 0, as long as every input of the padded batch stays within runtime::kMaxTensorBytes
// (strings counted at the longest string, which the padding may copy): a request that would push
// it over opens a new batch instead, so padding never fails a batch nor grows one without bound.
// A batch is run when it is full or has waited batch_timeout; the thread pool takes the oldest
// ready batch across all queues. A queue may have options of its own (its model's), all but the
// thread count, which is the pool's. A queue holding max_enqueued_batches batches refuses new
// requests at once with UNAVAILABLE (fail fast, no unbounded memory or latency).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "runtime/tensor.h"

namespace mf::server::batching {

// TF Serving's BatchingParameters.
struct BatchingOptions {
  int64_t max_batch_size = 32;
  std::chrono::microseconds batch_timeout{1000};
  int64_t max_enqueued_batches = 100;
  int num_batch_threads = 0;  // 0: one per hardware thread
  // Increasing, the last equal to max_batch_size; batches are padded up to the next one.
  std::vector<int64_t> allowed_batch_sizes;
  // Requests whose inputs differ in dims after dim 0 may share a batch; each input is padded up
  // to the batch's largest dims (tensor_batch.h PadAndConcat).
  bool pad_variable_length_inputs = false;
};

// Refuses options TF Serving refuses, naming the field.
Status ValidateBatchingOptions(const BatchingOptions& options);
// The size a batch of `rows` is padded up to (rows itself without allowed_batch_sizes).
int64_t PaddedBatchSize(const BatchingOptions& options, int64_t rows);

// One request waiting in a queue: its inputs (every one with the same dim 0) and its callback.
struct BatchTask {
  std::vector<runtime::Tensor> inputs;
  int64_t rows = 0;
  std::chrono::steady_clock::time_point enqueued;
  std::function<void(Status, std::vector<runtime::Tensor>)> done;
  // Asked when the batch closes, with the time its run is expected to end: a task no longer
  // wanted is answered with its status and left out of the run (Servable::StillWanted). Empty:
  // always wanted.
  std::function<Status(std::chrono::steady_clock::time_point expected_end)> still_wanted;
};

// Runs one closed batch: called on a batch thread with the tasks in arrival order.
using BatchProcessor = std::function<void(std::vector<BatchTask>)>;

class BatchScheduler {
 public:
  class Queue;

  explicit BatchScheduler(BatchingOptions options);
  ~BatchScheduler();  // runs what is queued, then joins the threads
  BatchScheduler(const BatchScheduler&) = delete;
  BatchScheduler& operator=(const BatchScheduler&) = delete;

  const BatchingOptions& options() const { return options_; }

  // A queue whose batches `processor` runs. The queue stays registered until the returned
  // pointer and all of its pending batches are gone. Batches are formed by the scheduler's
  // options, or by the queue's own (a model's batching_params.pbtxt); either way they run on
  // the scheduler's threads.
  std::shared_ptr<Queue> AddQueue(BatchProcessor processor);
  std::shared_ptr<Queue> AddQueue(BatchProcessor processor, BatchingOptions options);

  // Queues `task`; on error (too many rows, queue full) `task.done` is NOT called and the
  // error is returned, so the caller answers the request itself.
  Status Schedule(Queue& queue, BatchTask&& task);

 private:
  struct Batch;
  void Work();
  // The queue whose front batch is ready and oldest, or null; sets *wake_at otherwise.
  std::shared_ptr<Queue> PickReady(std::chrono::steady_clock::time_point now,
                                   std::chrono::steady_clock::time_point* wake_at);

  const BatchingOptions options_;
  std::mutex mu_;
  std::condition_variable cv_;
  // Strong references: a queue whose owner is gone still runs its pending batches.
  std::vector<std::shared_ptr<Queue>> queues_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace mf::server::batching
