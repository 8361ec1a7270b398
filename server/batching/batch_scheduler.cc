#include "server/batching/batch_scheduler.h"

#include <algorithm>
#include <string>
#include <utility>

#include "server/batching/tensor_batch.h"

namespace mf::server::batching {

using Clock = std::chrono::steady_clock;

struct BatchScheduler::Batch {
  std::vector<BatchTask> tasks;
  int64_t rows = 0;
  // Per input: the largest size of each dim after dim 0 among the tasks (dim 0 unused), and
  // the most bytes one element of the padded batch can hold (ElementBytesBound).
  std::vector<runtime::Shape> max_shapes;
  std::vector<size_t> element_bytes;
  Clock::time_point opened;
  bool closed = false;
};

class BatchScheduler::Queue {
 public:
  Queue(BatchProcessor processor, BatchingOptions options)
      : processor(std::move(processor)), options(std::move(options)) {}
  BatchProcessor processor;
  const BatchingOptions options;  // everything but num_batch_threads, which is the pool's
  std::deque<Batch> batches;      // guarded by the scheduler's mu_
};

Status ValidateBatchingOptions(const BatchingOptions& options) {
  if (options.max_batch_size < 1) {
    return InvalidArgument("batching parameters: max_batch_size must be positive, got " +
                           std::to_string(options.max_batch_size));
  }
  if (options.batch_timeout.count() < 0) {
    return InvalidArgument("batching parameters: batch_timeout_micros must be >= 0");
  }
  if (options.max_enqueued_batches < 1) {
    return InvalidArgument("batching parameters: max_enqueued_batches must be positive, got " +
                           std::to_string(options.max_enqueued_batches));
  }
  if (options.num_batch_threads < 0) {
    return InvalidArgument("batching parameters: num_batch_threads must be >= 0");
  }
  const auto& allowed = options.allowed_batch_sizes;
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (allowed[i] < 1 || (i > 0 && allowed[i] <= allowed[i - 1])) {
      return InvalidArgument(
          "batching parameters: allowed_batch_sizes must be positive and "
          "strictly increasing");
    }
  }
  if (!allowed.empty() && allowed.back() != options.max_batch_size) {
    return InvalidArgument("batching parameters: the last allowed_batch_sizes entry (" +
                           std::to_string(allowed.back()) + ") must equal max_batch_size (" +
                           std::to_string(options.max_batch_size) + ")");
  }
  return Status::Ok();
}

int64_t PaddedBatchSize(const BatchingOptions& options, int64_t rows) {
  for (int64_t size : options.allowed_batch_sizes) {
    if (size >= rows) return size;
  }
  return rows;
}

namespace {

// Every dim after dim 0 raised to at least the one of `shape` (same rank).
void RaiseDims(runtime::Shape& max_shape, const runtime::Shape& shape) {
  for (size_t d = 1; d < max_shape.size(); ++d) max_shape[d] = std::max(max_shape[d], shape[d]);
}

// The most bytes one element of a padded batch holding `t` can take: every padded element is a
// copy of an element of some task, so for strings (padded with copies of a tensor's first string)
// that is the longest string, not just the std::string itself.
size_t ElementBytesBound(const runtime::Tensor& t) {
  if (t.dtype() != runtime::DataType::kString) return runtime::ElementSize(t.dtype());
  size_t longest = 0;
  for (const std::string& s : t.strings()) longest = std::max(longest, s.size());
  return sizeof(std::string) + longest;
}

// Whether a batch of `rows` rows (before allowed-size padding) whose rows have the dims of
// `max_shape` after dim 0 stays within runtime::kMaxTensorBytes once padded.
bool PaddedInputFits(const BatchingOptions& options, int64_t rows, const runtime::Shape& max_shape,
                     size_t element_bytes) {
  runtime::Shape padded = max_shape;
  padded[0] = PaddedBatchSize(options, rows);
  const int64_t elements = runtime::NumElements(padded);
  return elements >= 0 && static_cast<uint64_t>(elements) <= runtime::kMaxTensorBytes / element_bytes;
}

}  // namespace

BatchScheduler::BatchScheduler(BatchingOptions options) : options_(std::move(options)) {
  int threads = options_.num_batch_threads > 0 ? options_.num_batch_threads
                                               : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

BatchScheduler::~BatchScheduler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

std::shared_ptr<BatchScheduler::Queue> BatchScheduler::AddQueue(BatchProcessor processor) {
  return AddQueue(std::move(processor), options_);
}

std::shared_ptr<BatchScheduler::Queue> BatchScheduler::AddQueue(BatchProcessor processor, BatchingOptions options) {
  auto queue = std::make_shared<Queue>(std::move(processor), std::move(options));
  std::lock_guard lock(mu_);
  queues_.push_back(queue);
  return queue;
}

Status BatchScheduler::Schedule(Queue& queue, BatchTask&& task) {
  const BatchingOptions& options = queue.options;
  if (task.rows < 1 || task.inputs.empty()) {
    return InvalidArgument("a batched request needs at least one input with at least one row");
  }
  if (task.rows > options.max_batch_size) {
    return InvalidArgument("Task size " + std::to_string(task.rows) + " is larger than maximum batch size " +
                           std::to_string(options.max_batch_size));
  }
  std::vector<size_t> element_bytes;  // per input, when padding (scanned outside the lock)
  if (options.pad_variable_length_inputs) {
    for (const runtime::Tensor& input : task.inputs) element_bytes.push_back(ElementBytesBound(input));
  }
  task.enqueued = Clock::now();
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Unavailable("the server is shutting down");
    auto fits = [&](const Batch& batch) {
      if (batch.closed || batch.rows + task.rows > options.max_batch_size) return false;
      const auto& first = batch.tasks.front().inputs;
      if (first.size() != task.inputs.size()) return false;
      for (size_t i = 0; i < first.size(); ++i) {
        if (!options.pad_variable_length_inputs) {
          if (!SameBatchShape(first[i], task.inputs[i])) return false;
          continue;
        }
        if (!SamePaddableShape(first[i], task.inputs[i])) return false;
        runtime::Shape grown = batch.max_shapes[i];
        RaiseDims(grown, task.inputs[i].shape());
        if (!PaddedInputFits(options, batch.rows + task.rows, grown,
                             std::max(batch.element_bytes[i], element_bytes[i]))) {
          return false;
        }
      }
      return true;
    };
    if (queue.batches.empty() || !fits(queue.batches.back())) {
      if (!queue.batches.empty()) queue.batches.back().closed = true;
      if (static_cast<int64_t>(queue.batches.size()) >= options.max_enqueued_batches) {
        return Unavailable("The batch scheduling queue to which this task was submitted is full");
      }
      queue.batches.emplace_back();
      queue.batches.back().opened = task.enqueued;
    }
    Batch& batch = queue.batches.back();
    if (batch.tasks.empty()) {
      for (const runtime::Tensor& input : task.inputs) batch.max_shapes.push_back(input.shape());
      batch.element_bytes = std::move(element_bytes);
    } else {
      for (size_t i = 0; i < task.inputs.size(); ++i) {
        RaiseDims(batch.max_shapes[i], task.inputs[i].shape());
        if (!element_bytes.empty()) batch.element_bytes[i] = std::max(batch.element_bytes[i], element_bytes[i]);
      }
    }
    batch.rows += task.rows;
    batch.tasks.push_back(std::move(task));
    if (batch.rows == options.max_batch_size) batch.closed = true;
  }
  cv_.notify_one();
  return Status::Ok();
}

std::shared_ptr<BatchScheduler::Queue> BatchScheduler::PickReady(Clock::time_point now, Clock::time_point* wake_at) {
  std::shared_ptr<Queue> best;
  Clock::time_point best_opened = Clock::time_point::max();
  *wake_at = Clock::time_point::max();
  for (auto it = queues_.begin(); it != queues_.end();) {
    std::shared_ptr<Queue> queue = *it;
    // Only the scheduler holds it and nothing is pending: its model version is gone.
    if (queue.use_count() == 2 && queue->batches.empty()) {
      it = queues_.erase(it);
      continue;
    }
    ++it;
    if (queue->batches.empty()) continue;
    const Batch& front = queue->batches.front();
    Clock::time_point due = front.opened + queue->options.batch_timeout;
    bool ready = front.closed || stopping_ || now >= due;
    if (!ready) {
      *wake_at = std::min(*wake_at, due);
    } else if (front.opened < best_opened) {
      best_opened = front.opened;
      best = queue;
    }
  }
  return best;
}

void BatchScheduler::Work() {
  std::unique_lock lock(mu_);
  while (true) {
    Clock::time_point wake_at;
    std::shared_ptr<Queue> queue = PickReady(Clock::now(), &wake_at);
    if (queue) {
      std::vector<BatchTask> tasks = std::move(queue->batches.front().tasks);
      queue->batches.pop_front();
      lock.unlock();
      queue->processor(std::move(tasks));
      queue.reset();
      lock.lock();
      continue;
    }
    if (stopping_) return;  // nothing ready while stopping means nothing is queued
    if (wake_at == Clock::time_point::max()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, wake_at);
    }
  }
}

}  // namespace mf::server::batching
