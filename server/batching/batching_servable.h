// BatchingServable: a Servable decorator that sends every request through a BatchScheduler
// queue of its own (one per model version), so concurrent requests run as one batch. Requests
// whose inputs cannot be batched (rank 0, or inputs that disagree on dim 0) run on their own.
//
// Tasks share a batch only when every input has the same dtype and the same dims after dim 0
// (SameBatchShape), so all tasks of a batch are valid or invalid together: a malformed request
// can fail only requests shaped exactly like it, never a well-formed neighbour. With
// pad_variable_length_inputs, tasks of the same dtype and rank share a batch and are padded
// (PadAndConcat), but only requests that match the model's signature in dtype, rank and every
// fixed dim are batched; any other runs alone, so the invariant holds. Outputs are split by rows
// and returned as the model produced them for the padded batch (padded too, as TF Serving does).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "server/batching/batch_scheduler.h"
#include "server/observability/run_time_average.h"
#include "server/repository/servable.h"

namespace mf::server::batching {

class BatchingServable : public Servable {
 public:
  // `model_name` and `version` label the metrics of its executions (request_metrics.h); a
  // version of -1 (a servable outside the model manager, e.g. a benchmark) has no Triton series.
  // `options`: the model's own batching options (its threads stay the scheduler's); none: the
  // scheduler's.
  BatchingServable(std::shared_ptr<const Servable> inner, std::shared_ptr<BatchScheduler> scheduler,
                   std::string model_name, int64_t version = -1, std::optional<BatchingOptions> options = {});

  const runtime::Signature& signature() const override { return inner_->signature(); }
  Status Run(const std::vector<const runtime::Tensor*>& inputs, Outputs* outputs) const override;
  void RunAsync(std::vector<runtime::Tensor> inputs, Done done, StillWanted still_wanted) const override;
  // Oversized or unbatchable requests run inline, but those are rare; the common path queues.
  bool async_is_nonblocking() const override { return true; }
  size_t memory_bytes() const override { return inner_->memory_bytes(); }
  std::string_view device() const override { return inner_->device(); }
  std::optional<Batching> batching() const override {
    return Batching{options_.max_batch_size, options_.batch_timeout, options_.allowed_batch_sizes};
  }

 private:
  // Recent batches' run times, for how long the next batch will take.
  struct RecentRuns {
    RunTimeAverage per_batch;
    RunTimeAverage per_row;  // padded rows
    // The smaller of the two estimates (none before the first batch): each overestimates in
    // one case (per batch: a small batch after big ones; per row: a big batch after small
    // ones, whose fixed cost it spreads over few rows), and an overestimate would skip requests
    // that could have been answered in time.
    std::optional<std::chrono::nanoseconds> Estimate(int64_t rows) const;
  };

  static void ProcessBatch(const Servable& inner, const BatchingOptions& options, const std::string& model_name,
                           int64_t version, RecentRuns& recent, std::vector<BatchTask> tasks);

  std::shared_ptr<const Servable> inner_;
  std::shared_ptr<const Servable> alone_;  // inner_, metered: for requests that run unbatched
  std::shared_ptr<BatchScheduler> scheduler_;
  const BatchingOptions options_;
  std::shared_ptr<BatchScheduler::Queue> queue_;
};

}  // namespace mf::server::batching
