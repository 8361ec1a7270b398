#include "server/grpc/grpc_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <thread>
#include <type_traits>

#include "common/logging.h"
#include "server/grpc/async_unary_call.h"
#include "server/grpc/grpc_services.h"

namespace mf::server {
namespace {

namespace tfs = tensorflow::serving;
using HealthService = grpc::health::v1::Health::WithAsyncMethod_Check<
    grpc::health::v1::Health::WithGenericMethod_Watch<grpc::health::v1::Health::Service>>;

// Any method no service implements (and Health/Watch, which streams and is not served) reaches
// the generic service; an async-only server would otherwise leave such calls hanging until their
// deadline. They get UNIMPLEMENTED, as grpc++'s sync server answers.
class UnimplementedCall final : public CompletionTag {
 public:
  static void Arm(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* queue) {
    auto* call = new UnimplementedCall(service, queue);
    service->RequestCall(&call->context_, &call->stream_, queue, queue, call);
  }

  void OnEvent(bool ok) override {
    if (!ok || answered_) {
      delete this;
      return;
    }
    answered_ = true;
    Arm(service_, queue_);
    stream_.Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "method " + context_.method() + " is not served"),
                   this);
  }

 private:
  UnimplementedCall(grpc::AsyncGenericService* service, grpc::ServerCompletionQueue* queue)
      : service_(service), queue_(queue), stream_(&context_) {}

  grpc::AsyncGenericService* service_;
  grpc::ServerCompletionQueue* queue_;
  grpc::GenericServerContext context_;
  grpc::GenericServerAsyncReaderWriter stream_;
  bool answered_ = false;
};

// Adapts a handler that answers on the calling thread to the UnaryHandler form.
template <class Impl, class Request, class Response>
UnaryHandler<Request, Response> Inline(Impl* impl,
                                       grpc::Status (Impl::*method)(grpc::ServerContext*, const Request*, Response*)) {
  return [impl, method](grpc::ServerContext* context, const Request* request, Response* response,
                        std::function<void(const grpc::Status&)> finish) {
    finish((impl->*method)(context, request, response));
  };
}

template <class Impl, class Request, class Response>
UnaryHandler<Request, Response> Deferred(Impl* impl, void (Impl::*method)(grpc::ServerContext*, const Request*,
                                                                          Response*, GrpcFinish)) {
  return [impl, method](grpc::ServerContext* context, const Request* request, Response* response,
                        std::function<void(const grpc::Status&)> finish) {
    (impl->*method)(context, request, response, std::move(finish));
  };
}

}  // namespace

struct GrpcServer::Methods {
  Methods(const std::shared_ptr<ModelManager>& manager, const std::shared_ptr<std::atomic<bool>>& shutting_down)
      : prediction_impl(manager),
        model_impl(manager),
        inference_impl(manager, shutting_down),
        health_impl(manager, shutting_down) {}

  // One method table per RPC and queue, and a closure that arms one call of it.
  // Service is the generated WithAsyncMethod_X base that declares RequestX.
  template <class Service, class Request, class Response>
  void Add(std::type_identity_t<Service>* service,
           void (Service::*request)(grpc::ServerContext*, Request*, grpc::ServerAsyncResponseWriter<Response>*,
                                    grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*),
           std::type_identity_t<UnaryHandler<Request, Response>> handler) {
    using Call = UnaryCall<Service, Request, Response>;
    for (auto& queue : *queues) {
      auto method = std::make_shared<typename Call::Method>(
          typename Call::Method{service, request, handler, queue.get(), in_flight});
      arm.push_back([raw = method.get()] { Call::Arm(raw); });
      tables.push_back(std::move(method));
    }
  }

  void AddAll() {
    using P = PredictionServiceImpl;
    using I = InferenceServiceImpl;
    Add(&prediction, &tfs::PredictionService::AsyncService::RequestPredict, Deferred(&prediction_impl, &P::Predict));
    Add(&prediction, &tfs::PredictionService::AsyncService::RequestGetModelMetadata,
        Inline(&prediction_impl, &P::GetModelMetadata));
    Add(&prediction, &tfs::PredictionService::AsyncService::RequestClassify, Inline(&prediction_impl, &P::Classify));
    Add(&prediction, &tfs::PredictionService::AsyncService::RequestRegress, Inline(&prediction_impl, &P::Regress));
    Add(&prediction, &tfs::PredictionService::AsyncService::RequestMultiInference,
        Inline(&prediction_impl, &P::MultiInference));
    Add(&model, &tfs::ModelService::AsyncService::RequestGetModelStatus,
        Inline(&model_impl, &ModelServiceImpl::GetModelStatus));
    Add(&model, &tfs::ModelService::AsyncService::RequestHandleReloadConfigRequest,
        Inline(&model_impl, &ModelServiceImpl::HandleReloadConfigRequest));
    using V2 = inference::GRPCInferenceService::AsyncService;
    Add(&inference, &V2::RequestServerLive, Inline(&inference_impl, &I::ServerLive));
    Add(&inference, &V2::RequestServerReady, Inline(&inference_impl, &I::ServerReady));
    Add(&inference, &V2::RequestModelReady, Inline(&inference_impl, &I::ModelReady));
    Add(&inference, &V2::RequestServerMetadata, Inline(&inference_impl, &I::ServerMetadata));
    Add(&inference, &V2::RequestModelMetadata, Inline(&inference_impl, &I::ModelMetadata));
    Add(&inference, &V2::RequestModelInfer, Deferred(&inference_impl, &I::ModelInfer));
    Add(&health, &HealthService::RequestCheck, Inline(&health_impl, &HealthServiceImpl::Check));
    for (auto& queue : *queues) {
      arm.push_back([this, raw = queue.get()] { UnimplementedCall::Arm(&generic, raw); });
    }
  }

  PredictionServiceImpl prediction_impl;
  ModelServiceImpl model_impl;
  InferenceServiceImpl inference_impl;
  HealthServiceImpl health_impl;
  tfs::PredictionService::AsyncService prediction;
  tfs::ModelService::AsyncService model;
  inference::GRPCInferenceService::AsyncService inference;
  HealthService health;
  grpc::AsyncGenericService generic;

  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>>* queues = nullptr;
  InFlightCalls* in_flight = nullptr;
  std::vector<std::shared_ptr<void>> tables;
  std::vector<std::function<void()>> arm;
};

GrpcServer::GrpcServer(std::shared_ptr<ModelManager> manager)
    : manager_(std::move(manager)), in_flight_(std::make_unique<InFlightCalls>()) {}

GrpcServer::~GrpcServer() { Shutdown(std::chrono::milliseconds(0)); }

Status GrpcServer::Start(const GrpcServerOptions& options) {
  if (server_) return FailedPrecondition("the gRPC server is already started");
  if (options.threads < 0) return InvalidArgument("gRPC threads must be >= 0, got " + std::to_string(options.threads));
  const int threads =
      options.threads > 0 ? options.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  methods_ = std::make_unique<Methods>(manager_, shutting_down_);
  grpc::ServerBuilder builder;
  const std::string endpoint = options.address + ":" + std::to_string(options.port);
  builder.AddListeningPort(endpoint, grpc::InsecureServerCredentials(), &port_);
  // TF Serving accepts messages up to INT32_MAX bytes; large tensors are normal here.
  builder.SetMaxReceiveMessageSize(INT_MAX);
  builder.SetMaxSendMessageSize(INT_MAX);
  // gRPC sets SO_REUSEPORT by default, so a second server on a taken port would start and
  // silently share its connections; a taken port must be a start-up error, as it is for REST.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterService(&methods_->prediction);
  builder.RegisterService(&methods_->model);
  builder.RegisterService(&methods_->inference);
  builder.RegisterService(&methods_->health);
  builder.RegisterAsyncGenericService(&methods_->generic);
  for (int i = 0; i < threads; ++i) queues_.push_back(builder.AddCompletionQueue());
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    server_.reset();
    for (auto& queue : queues_) {
      queue->Shutdown();
      void* tag = nullptr;
      bool ok = false;
      while (queue->Next(&tag, &ok)) {
      }
    }
    queues_.clear();
    return Unavailable("cannot listen on " + endpoint + " (address in use or invalid)");
  }
  methods_->queues = &queues_;
  methods_->in_flight = in_flight_.get();
  methods_->AddAll();
  ArmAll();
  for (auto& queue : queues_) {
    threads_.emplace_back([raw = queue.get()] {
      void* tag = nullptr;
      bool ok = false;
      while (raw->Next(&tag, &ok)) static_cast<CompletionTag*>(tag)->OnEvent(ok);
    });
  }
  return Status::Ok();
}

void GrpcServer::ArmAll() {
  for (auto& arm : methods_->arm) arm();
}

void GrpcServer::Shutdown(std::chrono::milliseconds deadline) {
  if (!server_) return;
  SetShuttingDown();
  // The queue threads keep running meanwhile: they deliver the answers being drained.
  server_->Shutdown(std::chrono::system_clock::now() + deadline);
  // A batched call may still be answered from a batching thread after the server shut down;
  // its Finish must reach a queue that is not shut down yet. Batches always complete.
  for (int waited_ms = 0; !in_flight_->Idle(); ++waited_ms) {
    if (waited_ms % 5000 == 4999) log::Warning("gRPC shutdown waits for model runs still in flight");
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto& queue : queues_) queue->Shutdown();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
  server_.reset();
  queues_.clear();
}

}  // namespace mf::server
