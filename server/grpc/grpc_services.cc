#include "server/grpc/grpc_services.h"

#include <algorithm>
#include <chrono>
#include <span>

#include "common/flags.h"
#include "modelfleet_version.h"
#include "server/codec/kserve_proto.h"
#include "server/codec/model_info.h"
#include "server/codec/named_tensor.h"
#include "server/codec/tensor_proto.h"
#include "server/codec/tf_serving_proto.h"
#include "server/config/model_server_config.h"
#include "server/config/triton_model_config.h"
#include "server/observability/request_metrics.h"
#include "tensorflow_serving/apis/get_model_metadata.pb.h"

namespace mf::server {
namespace {

using Clock = std::chrono::steady_clock;
namespace tfs = tensorflow::serving;

// Records the call: every RPC that names a model ends through here.
Status Finish(const Status& status, std::string_view model, int64_t version, std::string_view api,
              Clock::time_point start) {
  RecordRequest({model, version, api, Entrypoint::kGrpc, status.code(),
                 std::chrono::duration<double>(Clock::now() - start).count()});
  return status;
}

// A run that ended after the call's deadline answered nothing in time: the client has been told
// DEADLINE_EXCEEDED (by the deadline timer, or by the call itself), so that is what is counted.
Status InTime(Status status, Clock::time_point deadline) {
  if (status.ok() && Clock::now() > deadline) return DeadlineExceeded("Deadline Exceeded");
  return status;
}

VersionRequest FromModelSpec(const tfs::ModelSpec& spec) {
  switch (spec.version_choice_case()) {
    case tfs::ModelSpec::kVersion:
      return VersionRequest::Number(spec.version().value());
    case tfs::ModelSpec::kVersionLabel:
      return VersionRequest::Label(spec.version_label());
    default:
      return VersionRequest::Latest();
  }
}

// gRPC Predict's answer for a signature the model lacks, as TF Serving's predict_util gives it
// (REST answers INVALID_ARGUMENT "Serving signature name: ..." from its JSON path instead).
Status CheckSignatureName(const std::string& name) {
  if (name.empty() || name == codec::kDefaultSignatureName) return Status::Ok();
  return FailedPrecondition("Serving signature key \"" + name + "\" not found.");
}

void FillModelSpec(const ServableHandle& handle, tfs::ModelSpec* spec) {
  spec->set_name(handle.model);
  spec->mutable_version()->set_value(handle.version);
  spec->set_signature_name(std::string(codec::kDefaultSignatureName));
}

// The call's deadline is the run's deadline: a call that expired (or was cancelled) while its
// request was decoded does not start a model run nobody will read; nor does a queued call whose
// run would end after it (`expected_end`, from the batch's recent run times).
Status CheckStillWanted(const CallContext& context,
                        std::chrono::steady_clock::time_point expected_end = std::chrono::steady_clock::now()) {
  MF_RETURN_IF_ERROR(Servable::MeetsDeadline(context.deadline(), expected_end));
  if (context.cancelled()) {
    return Cancelled("the client cancelled the call");
  }
  return Status::Ok();
}

// CheckStillWanted for a run that waits: `context` lives as long as the call's `finish`, which
// the run's `done` holds, and Servable::StillWanted is only asked while `done` is alive.
Servable::StillWanted StillWantedBy(const CallContext& context) {
  return [&context](std::chrono::steady_clock::time_point expected_end) {
    return CheckStillWanted(context, expected_end);
  };
}

StatusOr<ServableHandle> ResolveV2(const ModelManager& manager, const std::string& name, const std::string& version) {
  if (version.empty()) return manager.GetServable(name, VersionRequest::Latest());
  int64_t number = 0;
  if (!ParseInt64(version, &number) || number < 0) {
    return InvalidArgument("model version '" + version + "' is not a non-negative integer");
  }
  return manager.GetServable(name, VersionRequest::Number(number));
}

}  // namespace

// TF Serving's answer to a request without a model name (INVALID_ARGUMENT, not NOT_FOUND).
constexpr const char* kNoModelName = "ModelSpec has no name specified.";

void PredictionServiceImpl::Predict(const CallContext& context, const tfs::PredictRequest* request,
                                    tfs::PredictResponse* response, RpcFinish finish) {
  const auto start = Clock::now();
  const std::string& model = request->model_spec().name();
  if (model.empty()) return finish(Finish(InvalidArgument(kNoModelName), model, -1, "Predict", start));
  auto handle = manager_->GetServable(model, FromModelSpec(request->model_spec()));
  if (!handle.ok()) return finish(Finish(handle.status(), model, -1, "Predict", start));
  std::vector<size_t> selected;
  auto prepare = [&]() -> StatusOr<std::vector<runtime::Tensor>> {
    MF_RETURN_IF_ERROR(CheckSignatureName(request->model_spec().signature_name()));
    const runtime::Signature& signature = handle->servable->signature();
    MF_ASSIGN_OR_RETURN(std::vector<runtime::Tensor> inputs,
                        codec::InputsFromPredictRequest(*request, signature.inputs));
    MF_ASSIGN_OR_RETURN(selected, codec::SelectOutputs(signature.outputs, request->output_filter()));
    MF_RETURN_IF_ERROR(CheckStillWanted(context));
    return inputs;
  };
  auto inputs = prepare();
  if (!inputs.ok()) return finish(Finish(inputs.status(), model, handle->version, "Predict", start));
  // The handle rides along: it keeps the version loaded until the answer is written.
  std::shared_ptr<const Servable> servable = handle->servable;
  DispatchRun(
      *runs_, servable, std::move(inputs).value(),
      [handle = std::move(handle).value(), selected = std::move(selected), response, encoding = outputs_,
       finish = std::move(finish), start, deadline = context.deadline()](Status status, Servable::Outputs outputs) {
        if (status.ok()) {
          const runtime::Signature& signature = handle.servable->signature();
          std::vector<codec::NamedTensorView> views;
          for (size_t index : selected) {
            if (index >= outputs.size()) {
              status = Internal("the model returned fewer outputs than its signature declares");
              break;
            }
            views.push_back({signature.outputs[index].name, &outputs[index]});
          }
          if (status.ok()) {
            codec::AddOutputsToPredictResponse(views, encoding, response);
            FillModelSpec(handle, response->mutable_model_spec());
          }
        }
        finish(Finish(InTime(status, deadline), handle.model, handle.version, "Predict", start));
      },
      StillWantedBy(context));
}

Status PredictionServiceImpl::GetModelMetadata(const CallContext&, const tfs::GetModelMetadataRequest* request,
                                               tfs::GetModelMetadataResponse* response) {
  const auto start = Clock::now();
  const std::string& model = request->model_spec().name();
  if (model.empty()) return Finish(InvalidArgument(kNoModelName), model, -1, "GetModelMetadata", start);
  if (Status fields = codec::CheckMetadataFields(request->metadata_field()); !fields.ok()) {
    return Finish(fields, model, -1, "GetModelMetadata", start);
  }
  auto handle = manager_->GetServable(model, FromModelSpec(request->model_spec()));
  if (!handle.ok()) return Finish(handle.status(), model, -1, "GetModelMetadata", start);
  const codec::ModelSignature signature = codec::ModelSignature::FromRuntime(handle->servable->signature());
  codec::FillModelMetadataResponse(handle->model, handle->version, std::span(&signature, 1), response);
  return Finish(Status::Ok(), model, handle->version, "GetModelMetadata", start);
}

Status PredictionServiceImpl::Classify(const CallContext&, const tfs::ClassificationRequest*,
                                       tfs::ClassificationResponse*) {
  return Unimplemented(
      "Classify needs a tensorflow/serving/classify signature; ONNX models "
      "have a predict signature: use Predict");
}

Status PredictionServiceImpl::Regress(const CallContext&, const tfs::RegressionRequest*, tfs::RegressionResponse*) {
  return Unimplemented(
      "Regress needs a tensorflow/serving/regress signature; ONNX models "
      "have a predict signature: use Predict");
}

Status PredictionServiceImpl::MultiInference(const CallContext&, const tfs::MultiInferenceRequest*,
                                             tfs::MultiInferenceResponse*) {
  return Unimplemented(
      "MultiInference runs classify/regress signatures, which ONNX models "
      "do not have: use Predict");
}

Status ModelServiceImpl::GetModelStatus(const CallContext&, const tfs::GetModelStatusRequest* request,
                                        tfs::GetModelStatusResponse* response) {
  const auto start = Clock::now();
  const tfs::ModelSpec& spec = request->model_spec();
  if (spec.name().empty()) {
    return Finish(InvalidArgument("Missing model name in request."), "", -1, "GetModelStatus", start);
  }
  std::optional<int64_t> version;
  if (spec.version_choice_case() == tfs::ModelSpec::kVersion) version = spec.version().value();
  if (spec.version_choice_case() == tfs::ModelSpec::kVersionLabel) {
    auto labelled = manager_->ResolveLabel(spec.name(), spec.version_label());
    if (!labelled.ok()) return Finish(labelled.status(), spec.name(), -1, "GetModelStatus", start);
    version = *labelled;
  }
  auto statuses = manager_->GetModelStatus(spec.name(), version);
  if (!statuses.ok()) return Finish(statuses.status(), spec.name(), -1, "GetModelStatus", start);
  codec::FillModelStatusResponse(*statuses, response);
  return Finish(Status::Ok(), spec.name(), version.value_or(-1), "GetModelStatus", start);
}

ModelServiceImpl::~ModelServiceImpl() {
  stopping_ = true;
  std::lock_guard lock(waits_mu_);
  for (Wait& w : waits_) w.thread.join();
}

void ModelServiceImpl::HandleReloadConfigRequest(const CallContext& context, const tfs::ReloadConfigRequest* request,
                                                 tfs::ReloadConfigResponse* response, RpcFinish finish) {
  auto answer = [response, finish](const Status& status) {
    response->mutable_status()->set_error_code(static_cast<tensorflow::error::Code>(status.code()));
    response->mutable_status()->set_error_message(status.message());
    finish(status);
  };
  auto configs = ModelConfigsFromProto(request->config());
  if (!configs.ok()) return answer(configs.status());
  auto generation = manager_->SetModels(*configs);
  if (!generation.ok()) return answer(generation.status());
  std::vector<std::string> models;
  for (const ModelConfig& config : *configs) models.push_back(config.name);
  // Without a deadline from the client, a model that never gets a version stops the wait here.
  constexpr auto kLongestWait = std::chrono::minutes(10);
  const auto deadline = std::min(context.deadline(), std::chrono::steady_clock::now() + kLongestWait);
  std::lock_guard lock(waits_mu_);
  // Finished waits are joined here, so a controller reloading every few seconds for weeks does
  // not pile up ended threads.
  for (auto it = waits_.begin(); it != waits_.end();) {
    if (!it->done->load()) {
      ++it;
      continue;
    }
    it->thread.join();
    it = waits_.erase(it);
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  auto wait = [this, models = std::move(models), answer, deadline, generation = *generation] {
    std::vector<std::string> pending = models;
    while (!stopping_) {
      for (auto it = pending.begin(); it != pending.end();) {
        std::optional<Status> outcome = manager_->ConfigOutcome(*it, generation);
        if (!outcome) {
          ++it;
          continue;
        }
        if (!outcome->ok()) return answer(outcome->WithContext("model '" + *it + "'"));
        it = pending.erase(it);
      }
      if (pending.empty()) return answer(Status::Ok());
      if (std::chrono::steady_clock::now() >= deadline) {
        return answer(DeadlineExceeded("the new config is applied, but model '" + pending.front() +
                                       "' has no available version yet"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    answer(Unavailable("the server is shutting down"));
  };
  waits_.push_back({std::thread([wait = std::move(wait), done] {
                      wait();
                      done->store(true);
                    }),
                    done});
}

Status InferenceServiceImpl::ServerLive(const CallContext&, const inference::ServerLiveRequest*,
                                        inference::ServerLiveResponse* response) {
  response->set_live(true);
  return Status::Ok();
}

Status InferenceServiceImpl::ServerReady(const CallContext&, const inference::ServerReadyRequest*,
                                         inference::ServerReadyResponse* response) {
  response->set_ready(!shutting_down_->load() && manager_->AllModelsAvailable());
  return Status::Ok();
}

Status InferenceServiceImpl::ModelReady(const CallContext&, const inference::ModelReadyRequest* request,
                                        inference::ModelReadyResponse* response) {
  auto handle = ResolveV2(*manager_, request->name(), request->version());
  if (!handle.ok() && handle.status().code() == StatusCode::kInvalidArgument) {
    return (handle.status());
  }
  response->set_ready(handle.ok() && !shutting_down_->load());
  return Status::Ok();
}

Status InferenceServiceImpl::ServerMetadata(const CallContext&, const inference::ServerMetadataRequest*,
                                            inference::ServerMetadataResponse* response) {
  response->set_name("modelfleet");
  response->set_version(MODELFLEET_VERSION);
  return Status::Ok();
}

Status InferenceServiceImpl::ModelMetadata(const CallContext&, const inference::ModelMetadataRequest* request,
                                           inference::ModelMetadataResponse* response) {
  auto handle = ResolveV2(*manager_, request->name(), request->version());
  if (!handle.ok()) return (handle.status());
  codec::SignatureToV2Metadata(codec::ModelSignature::FromRuntime(handle->servable->signature()), response);
  response->set_name(request->name());
  response->set_platform("onnx_onnxv1");
  response->clear_versions();
  for (int64_t v : manager_->AvailableVersions(request->name())) response->add_versions(std::to_string(v));
  return Status::Ok();
}

Status InferenceServiceImpl::ModelConfig(const CallContext&, const inference::ModelConfigRequest* request,
                                         inference::ModelConfigResponse* response) {
  const auto start = Clock::now();
  auto handle = ResolveV2(*manager_, request->name(), request->version());
  if (!handle.ok()) return Finish(handle.status(), request->name(), -1, "ModelConfig", start);
  auto policy = manager_->GetVersionPolicy(request->name());
  if (!policy.ok()) return Finish(policy.status(), request->name(), handle->version, "ModelConfig", start);
  *response->mutable_config() = TritonModelConfig(request->name(), *handle->servable, *policy);
  return Finish(Status::Ok(), request->name(), handle->version, "ModelConfig", start);
}

void InferenceServiceImpl::ModelInfer(const CallContext& context, const inference::ModelInferRequest* request,
                                      inference::ModelInferResponse* response, RpcFinish finish) {
  const auto start = Clock::now();
  const std::string& model = request->model_name();
  auto handle = ResolveV2(*manager_, model, request->model_version());
  if (!handle.ok()) return finish(Finish(handle.status(), model, -1, "ModelInfer", start));
  std::vector<size_t> selected;
  auto prepare = [&]() -> StatusOr<std::vector<runtime::Tensor>> {
    const runtime::Signature& signature = handle->servable->signature();
    if (request->outputs_size() == 0) {
      for (size_t i = 0; i < signature.outputs.size(); ++i) selected.push_back(i);
    }
    for (const auto& requested : request->outputs()) {
      int index = signature.OutputIndex(requested.name());
      if (index < 0) {
        return InvalidArgument("unexpected inference output '" + requested.name() + "' for model '" + model + "'");
      }
      selected.push_back(static_cast<size_t>(index));
    }
    MF_ASSIGN_OR_RETURN(std::vector<codec::NamedTensor> named, codec::InputsFromModelInferRequest(*request));
    MF_ASSIGN_OR_RETURN(std::vector<runtime::Tensor> inputs, codec::BindInputs(signature.inputs, std::move(named)));
    MF_RETURN_IF_ERROR(CheckStillWanted(context));
    return inputs;
  };
  auto inputs = prepare();
  if (!inputs.ok()) return finish(Finish(inputs.status(), model, handle->version, "ModelInfer", start));
  std::shared_ptr<const Servable> servable = handle->servable;
  DispatchRun(
      *runs_, servable, std::move(inputs).value(),
      [handle = std::move(handle).value(), selected = std::move(selected), request, response,
       finish = std::move(finish), start, deadline = context.deadline()](Status status, Servable::Outputs outputs) {
        auto encode = [&]() -> Status {
          MF_RETURN_IF_ERROR(status);
          const runtime::Signature& signature = handle.servable->signature();
          std::vector<codec::NamedTensorView> views;
          for (size_t index : selected) {
            if (index >= outputs.size()) return Internal("the model returned fewer outputs than declared");
            views.push_back({signature.outputs[index].name, &outputs[index]});
          }
          // Answer in the encoding the client used (Triton clients send and expect raw).
          codec::AddOutputsToModelInferResponse(views,
                                                request->raw_input_contents_size() > 0
                                                    ? codec::V2OutputEncoding::kRaw
                                                    : codec::V2OutputEncoding::kContents,
                                                response);
          response->set_model_name(handle.model);
          response->set_model_version(std::to_string(handle.version));
          response->set_id(request->id());
          return Status::Ok();
        };
        finish(Finish(InTime(encode(), deadline), handle.model, handle.version, "ModelInfer", start));
      },
      StillWantedBy(context));
}

Status HealthServiceImpl::Check(const CallContext&, const grpc::health::v1::HealthCheckRequest* request,
                                grpc::health::v1::HealthCheckResponse* response) {
  auto status = Evaluate(request->service());
  if (status == grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN) {
    return NotFound("unknown service " + request->service());
  }
  response->set_status(status);
  return Status::Ok();
}

grpc::health::v1::HealthCheckResponse::ServingStatus HealthServiceImpl::Evaluate(const std::string& service) const {
  using grpc::health::v1::HealthCheckResponse;
  if (!service.empty()) {
    auto names = manager_->ModelNames();
    if (std::find(names.begin(), names.end(), service) == names.end()) return HealthCheckResponse::SERVICE_UNKNOWN;
  }
  if (shutting_down_->load()) return HealthCheckResponse::NOT_SERVING;
  bool serving =
      service.empty() ? manager_->AllModelsAvailable() : manager_->GetServable(service, VersionRequest::Latest()).ok();
  return serving ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

}  // namespace mf::server
