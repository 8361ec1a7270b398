#include "server/session/session_loader.h"

#include <filesystem>

#include "common/logging.h"
#include "server/batching/batching_servable.h"
#include "server/config/batching_parameters.h"
#include "server/observability/metered_servable.h"
#include "server/session/warmup_requests.h"

namespace mf::server {

Status SessionServable::Run(const std::vector<const runtime::Tensor*>& inputs, Outputs* outputs) const {
  return session_->Run(inputs, outputs);
}

Status WarmUp(const Servable& servable) {
  std::vector<runtime::Tensor> inputs;
  for (const runtime::TensorInfo& info : servable.signature().inputs) {
    runtime::Shape shape = info.shape;
    for (int64_t& d : shape) {
      if (d < 0) d = 1;
    }
    MF_ASSIGN_OR_RETURN(runtime::Tensor t, runtime::Tensor::Allocate(info.dtype, shape));
    inputs.push_back(std::move(t));
  }
  std::vector<const runtime::Tensor*> pointers;
  for (const runtime::Tensor& t : inputs) pointers.push_back(&t);
  Servable::Outputs outputs;
  Status status = servable.Run(pointers, &outputs);
  if (!status.ok()) return status.WithContext("warm-up inference failed");
  return Status::Ok();
}

StatusOr<std::unique_ptr<runtime::Session>> SessionLoader::LoadSession(const std::string& model_path,
                                                                       DeviceChoice choice) {
  const std::vector<runtime::Backend> backends = BackendsToTry(choice, cuda_unavailable_.load());
  runtime::SessionOptions options = options_;
  StatusOr<std::unique_ptr<runtime::Session>> session = Unavailable("no backend to load on");
  for (size_t i = 0; i < backends.size(); ++i) {
    options.backend = backends[i];
    session = runtime::Session::Load(model_path, options);
    if (session.ok() || session.status().code() != StatusCode::kUnavailable) return session;
    if (backends[i] == runtime::Backend::kCuda && i + 1 < backends.size() && !cuda_unavailable_.exchange(true)) {
      log::Info("no usable GPU; --device=auto loads models on the CPU (and device: auto in a model config)",
                {{"reason", session.status().ToString()}});
    }
  }
  return session;
}

StatusOr<std::shared_ptr<const Servable>> SessionLoader::Load(const LoadRequest& request) {
  MF_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Session> session,
                      LoadSession(request.model_path, request.device.value_or(placement_.choice)));
  const bool warmed_up = session->warmed_up();
  auto servable = std::make_shared<const SessionServable>(std::move(session));
  // The runtime's own load already ran this very inference (zeros, dynamic dims 1) unless it
  // could not; running it twice would double every load's compute. Unwrapped: the warm-up is
  // no execution in the metrics.
  if (!warmed_up) MF_RETURN_IF_ERROR(WarmUp(*servable));
  if (steps_.replay_warmup_requests) {
    MF_RETURN_IF_ERROR(ReplayWarmupRequests(*servable, request.model_path, steps_.warmup_iterations));
  }
  if (!scheduler_) {
    return std::shared_ptr<const Servable>(
        std::make_shared<MeteredServable>(servable, request.model_name, request.version));
  }
  std::optional<batching::BatchingOptions> own_options;
  const std::filesystem::path own_file =
      std::filesystem::path(request.model_path).parent_path() / kPerModelBatchingFile;
  std::error_code error;
  if (steps_.per_model_batching_parameters && std::filesystem::exists(own_file, error)) {
    auto loaded = LoadBatchingParametersFile(own_file.string());
    if (!loaded.ok()) return loaded.status().WithContext("per-model batching parameters");
    own_options = std::move(loaded).value();
    log::Info("model version batches by its own parameters",
              {{"model", request.model_name},
               {"version", std::to_string(request.version)},
               {"file", own_file.string()},
               {"max_batch_size", std::to_string(own_options->max_batch_size)}});
  }
  return std::shared_ptr<const Servable>(std::make_shared<const batching::BatchingServable>(
      servable, scheduler_, request.model_name, request.version, std::move(own_options)));
}

}  // namespace mf::server
