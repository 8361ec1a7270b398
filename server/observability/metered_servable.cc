#include "server/observability/metered_servable.h"

#include <chrono>
#include <utility>

#include "server/observability/request_metrics.h"

namespace mf::server {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

template <typename Deref>
int64_t SharedDim0(size_t count, Deref tensor) {
  int64_t rows = -1;
  for (size_t i = 0; i < count; ++i) {
    const runtime::Tensor& t = tensor(i);
    if (t.rank() < 1 || (rows >= 0 && t.dim(0) != rows)) return 1;
    rows = t.dim(0);
  }
  return rows >= 0 ? rows : 1;
}

}  // namespace

int64_t RequestRows(const std::vector<const runtime::Tensor*>& inputs) {
  return SharedDim0(inputs.size(), [&](size_t i) -> const runtime::Tensor& { return *inputs[i]; });
}

int64_t RequestRows(const std::vector<runtime::Tensor>& inputs) {
  return SharedDim0(inputs.size(), [&](size_t i) -> const runtime::Tensor& { return inputs[i]; });
}

Status MeteredServable::Run(const std::vector<const runtime::Tensor*>& inputs, Outputs* outputs) const {
  const auto started = Clock::now();
  Status status = inner_->Run(inputs, outputs);
  const double seconds = SecondsSince(started);
  recent_runs_->Observe(seconds);
  RecordExecution({model_name_, version_, RequestRows(inputs), 1, status.ok(), seconds});
  return status;
}

bool MeteredServable::cheap_enough_to_run_inline() const {
  if (inner_->device() != "cpu") return false;
  const auto recent = recent_runs_->get();
  return recent && *recent < kInlineRunBudget;
}

void MeteredServable::RunAsync(std::vector<runtime::Tensor> inputs, Done done, StillWanted still_wanted) const {
  const int64_t rows = RequestRows(inputs);
  // A run about to start here (inline, or its turn in the run pool) is asked whether its caller
  // still wants it ending after the model's recent run time. Asked here, not by the inner
  // servable, so a skipped run is neither recorded as an execution nor averaged in as a 0 s run
  // (which would make a slow model look cheap enough for the io threads).
  if (still_wanted && !inner_->async_is_nonblocking()) {
    const auto run_time = recent_runs_->get().value_or(std::chrono::nanoseconds(0));
    if (Status wanted = still_wanted(Clock::now() + run_time); !wanted.ok()) return done(std::move(wanted), {});
    still_wanted = nullptr;
  }
  // Copies, not `this`: an asynchronous inner may answer after this decorator is gone.
  inner_->RunAsync(
      std::move(inputs),
      [model = model_name_, version = version_, rows, started = Clock::now(), average = recent_runs_,
       done = std::move(done)](Status status, Outputs outputs) {
        const double seconds = SecondsSince(started);
        average->Observe(seconds);
        RecordExecution({model, version, rows, 1, status.ok(), seconds});
        done(std::move(status), std::move(outputs));
      },
      std::move(still_wanted));
}

}  // namespace mf::server
