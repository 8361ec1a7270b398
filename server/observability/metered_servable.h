// MeteredServable: a Servable decorator that records every run of the servable it wraps as one
// model execution answering one request (RecordExecution: modelfleet_compute_latency_seconds,
// TF Serving's runtime_latency, Triton's nv_inference_exec_count and friends). The loader wraps
// versions served without batching in it; BatchingServable records batches itself (it knows
// which rows are padding and how many requests a batch answers) and puts requests that run
// alone through one. Warm-up runs the unwrapped servable, so it is not counted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/observability/run_time_average.h"
#include "server/repository/servable.h"

namespace mf::server {

inline constexpr std::chrono::microseconds kInlineRunBudget{100};

class MeteredServable : public Servable {
 public:
  MeteredServable(std::shared_ptr<const Servable> inner, std::string model_name, int64_t version)
      : inner_(std::move(inner)), model_name_(std::move(model_name)), version_(version) {}

  const runtime::Signature& signature() const override { return inner_->signature(); }
  Status Run(const std::vector<const runtime::Tensor*>& inputs, Outputs* outputs) const override;
  void RunAsync(std::vector<runtime::Tensor> inputs, Done done, StillWanted still_wanted) const override;
  bool async_is_nonblocking() const override { return inner_->async_is_nonblocking(); }
  // A CPU model whose recent runs took under kInlineRunBudget on average: cheaper to run on the
  // io thread than to hand over (a handoff costs tens of µs of CPU: wake-ups, cache misses).
  bool cheap_enough_to_run_inline() const override;
  size_t memory_bytes() const override { return inner_->memory_bytes(); }
  std::string_view device() const override { return inner_->device(); }
  std::optional<Batching> batching() const override { return inner_->batching(); }
  StatusOr<runtime::Tensor> AllocateInput(runtime::DataType dtype, runtime::Shape shape) const override {
    return inner_->AllocateInput(dtype, std::move(shape));
  }

 private:
  std::shared_ptr<const Servable> inner_;
  std::string model_name_;
  int64_t version_;
  // Shared with callbacks that may outlive this decorator.
  std::shared_ptr<RunTimeAverage> recent_runs_ = std::make_shared<RunTimeAverage>();
};

// A request's inferences (Triton's batch size): the dim 0 its inputs share, or 1 when they do
// not have one (scalars, or inputs that disagree on dim 0).
int64_t RequestRows(const std::vector<const runtime::Tensor*>& inputs);
int64_t RequestRows(const std::vector<runtime::Tensor>& inputs);

}  // namespace mf::server
