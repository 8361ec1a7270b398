// SessionLoader: the repository's Loader for ONNX model files. It loads a version with the
// inference runtime, runs one warm-up inference (batch of one, zero inputs) so the first real
// request does not pay for lazy initialisation and a model that cannot run is refused before it
// takes traffic, and wraps it for dynamic batching when a scheduler is given, else in a
// MeteredServable, so every execution is recorded once (request_metrics.h). Each version runs
// on the device its LoadRequest names, else on DevicePlacement's --device, by the rules of
// device_placement.h. A version shipping TF Serving's warm-up requests has them replayed too
// (warmup_requests.h).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "runtime/session.h"
#include "server/batching/batch_scheduler.h"
#include "server/repository/loader.h"
#include "server/session/device_placement.h"

namespace mf::server {

class SessionServable : public Servable {
 public:
  explicit SessionServable(std::unique_ptr<runtime::Session> session) : session_(std::move(session)) {}
  std::string_view device() const override { return runtime::BackendName(session_->options().backend); }
  const runtime::Signature& signature() const override { return session_->signature(); }
  // Runs the session; the wrapper Load() returns records the execution (metered_servable.h).
  Status Run(const std::vector<const runtime::Tensor*>& inputs, Outputs* outputs) const override;
  size_t memory_bytes() const override { return session_->memory_bytes(); }
  StatusOr<runtime::Tensor> AllocateInput(runtime::DataType dtype, runtime::Shape shape) const override {
    return session_->AllocateInput(dtype, std::move(shape));
  }

 private:
  std::unique_ptr<runtime::Session> session_;
};

// Runs `servable` once on zero inputs of batch size one (symbolic dims taken as 1).
Status WarmUp(const Servable& servable);

// What a load does besides loading (TF Serving's flags of the same names).
struct LoadSteps {
  bool replay_warmup_requests = true;  // --enable_model_warmup (warmup_requests.h)
  int warmup_iterations = 1;           // --num_request_iterations_for_warmup
  // --enable_per_model_batching_parameters: with batching on, a version directory's
  // batching_params.pbtxt (BatchingParameters text format) replaces --batching_parameters_file
  // for that version, all but the thread count (the batch threads are shared by every model).
  bool per_model_batching_parameters = false;
};

inline constexpr const char* kPerModelBatchingFile = "batching_params.pbtxt";

class SessionLoader : public Loader {
 public:
  // `scheduler` may be null (no batching). options.backend is replaced by each load's device.
  SessionLoader(runtime::SessionOptions options, std::shared_ptr<batching::BatchScheduler> scheduler,
                DevicePlacement placement = {}, LoadSteps steps = {})
      : options_(options), scheduler_(std::move(scheduler)), placement_(placement), steps_(steps) {}

  using Loader::Load;
  // On request.device when the config chose one, else on the placement's --device.
  StatusOr<std::shared_ptr<const Servable>> Load(const LoadRequest& request) override;

 private:
  StatusOr<std::unique_ptr<runtime::Session>> LoadSession(const std::string& model_path, DeviceChoice choice);

  const runtime::SessionOptions options_;
  const std::shared_ptr<batching::BatchScheduler> scheduler_;
  const DevicePlacement placement_;
  const LoadSteps steps_;
  // Set once an auto load's CUDA attempt answered UNAVAILABLE (no GPU, or not built in).
  std::atomic<bool> cuda_unavailable_{false};
};

}  // namespace mf::server
