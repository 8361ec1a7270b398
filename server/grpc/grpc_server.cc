#include "server/grpc/grpc_server.h"

#include <google/protobuf/arena.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <utility>

#include "http2/grpc_router.h"
#include "http2/grpc_wire.h"
#include "http2/server.h"
#include "server/grpc/grpc_services.h"
#include "server/grpc/health_watchers.h"
#include "server/repository/deadline_timer.h"

namespace mf::server {
namespace {

namespace tfs = tensorflow::serving;
namespace health = grpc::health::v1;

// Model changes (loads, unloads) reach Health/Watch clients within this.
constexpr std::chrono::milliseconds kHealthPollInterval{1000};

class Http2CallContext final : public CallContext {
 public:
  explicit Http2CallContext(const http2::GrpcCall& call) : call_(call) {}
  std::chrono::steady_clock::time_point deadline() const override { return call_.deadline(); }
  bool cancelled() const override { return call_.cancelled(); }
  const std::string& peer() const override { return call_.peer(); }

 private:
  const http2::GrpcCall& call_;
};

// Room for a small predict call's request and response (a digits row and its answer, about
// 2.5 KB with the arena's own bookkeeping) before the arena asks malloc for more.
constexpr size_t kArenaFirstBlockBytes = 4096;

google::protobuf::ArenaOptions ArenaOptions(char* first_block, size_t bytes) {
  google::protobuf::ArenaOptions options;
  options.initial_block = first_block;
  options.initial_block_size = bytes;
  return options;
}

// Parses the call's request message; INTERNAL when it is not one (as gRPC servers answer).
template <class Request>
Status ParseRequest(const http2::GrpcCall& call, Request* request) {
  std::string_view bytes = call.request_message();
  if (!request->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Internal("the request message is not a valid " + request->GetTypeName());
  }
  return Status::Ok();
}

// Ends the call: the response message and OK, or the error alone.
void Answer(http2::GrpcCall& call, const Status& status, const google::protobuf::MessageLite& response) {
  if (!status.ok()) return call.Finish(status);
  std::string frame = http2::ReserveGrpcFrame();
  if (!response.AppendToString(&frame)) return call.Finish(Internal("the response message does not serialize"));
  if (Status sealed = http2::SealGrpcFrame(&frame); !sealed.ok()) return call.Finish(sealed);
  call.Reply(std::move(frame));
}

// A method answered on the calling (io) thread.
template <class Impl, class Request, class Response>
http2::GrpcHandler Inline(Impl* impl, Status (Impl::*method)(const CallContext&, const Request*, Response*)) {
  return [impl, method](std::shared_ptr<http2::GrpcCall> call) {
    Request request;
    Response response;
    Status status = ParseRequest(*call, &request);
    if (status.ok()) status = (impl->*method)(Http2CallContext(*call), &request, &response);
    Answer(*call, status, response);
  };
}

// A method that answers through `finish`, now or later from another thread (a batch).
// A call with a deadline is answered DEADLINE_EXCEEDED when it passes, even while its request
// still waits in a batch queue or runs; the late answer is then dropped (GrpcCall answers once).
template <class Impl, class Request, class Response>
http2::GrpcHandler Deferred(Impl* impl, void (Impl::*method)(const CallContext&, const Request*, Response*, RpcFinish),
                            std::shared_ptr<DeadlineTimer> timer) {
  // The request and response live on an arena that starts in the state's own block: their maps,
  // strings and tensors cost no malloc each, and all of it goes with the state at once.
  struct State {
    explicit State(std::shared_ptr<http2::GrpcCall> c)
        : call(std::move(c)),
          context(*call),
          arena(ArenaOptions(first_block, sizeof(first_block))),
          request(google::protobuf::Arena::CreateMessage<Request>(&arena)),
          response(google::protobuf::Arena::CreateMessage<Response>(&arena)) {}
    std::shared_ptr<http2::GrpcCall> call;
    Http2CallContext context;
    alignas(std::max_align_t) char first_block[kArenaFirstBlockBytes];
    google::protobuf::Arena arena;
    Request* request;
    Response* response;
  };
  return [impl, method, timer](std::shared_ptr<http2::GrpcCall> call) {
    auto state = std::make_shared<State>(std::move(call));
    if (Status parsed = ParseRequest(*state->call, state->request); !parsed.ok()) {
      return state->call->Finish(parsed);
    }
    std::optional<DeadlineTimer::Ticket> expiry;
    if (state->call->deadline() != http2::GrpcCall::Clock::time_point::max()) {
      expiry = timer->Schedule(state->call->deadline(), [call = std::weak_ptr<http2::GrpcCall>(state->call)] {
        if (auto alive = call.lock()) alive->Finish(DeadlineExceeded("Deadline Exceeded"));
      });
    }
    (impl->*method)(state->context, state->request, state->response, [state, timer, expiry](const Status& status) {
      if (expiry && !timer->Cancel(*expiry)) return;  // already answered DEADLINE_EXCEEDED
      Answer(*state->call, status, *state->response);
    });
  };
}

}  // namespace

struct GrpcServer::Services {
  Services(const std::shared_ptr<ModelManager>& manager, const std::shared_ptr<std::atomic<bool>>& shutting_down,
           const std::shared_ptr<RunPool>& runs, codec::TensorProtoEncoding predict_outputs)
      : prediction(manager, runs, predict_outputs),
        model(manager),
        inference(manager, shutting_down, runs),
        health(manager, shutting_down) {}

  http2::GrpcRouter Routes(size_t max_message_bytes, HealthWatchers* watchers) {
    using P = PredictionServiceImpl;
    using M = ModelServiceImpl;
    using I = InferenceServiceImpl;
    http2::GrpcRouter router(max_message_bytes);
    const std::string tfs_prediction = "/tensorflow.serving.PredictionService/";
    router.Add(tfs_prediction + "Predict", Deferred(&prediction, &P::Predict, timer))
        .Add(tfs_prediction + "GetModelMetadata", Inline(&prediction, &P::GetModelMetadata))
        .Add(tfs_prediction + "Classify", Inline(&prediction, &P::Classify))
        .Add(tfs_prediction + "Regress", Inline(&prediction, &P::Regress))
        .Add(tfs_prediction + "MultiInference", Inline(&prediction, &P::MultiInference));
    const std::string tfs_model = "/tensorflow.serving.ModelService/";
    router.Add(tfs_model + "GetModelStatus", Inline(&model, &M::GetModelStatus))
        .Add(tfs_model + "HandleReloadConfigRequest", Deferred(&model, &M::HandleReloadConfigRequest, timer));
    const std::string v2 = "/inference.GRPCInferenceService/";
    router.Add(v2 + "ServerLive", Inline(&inference, &I::ServerLive))
        .Add(v2 + "ServerReady", Inline(&inference, &I::ServerReady))
        .Add(v2 + "ModelReady", Inline(&inference, &I::ModelReady))
        .Add(v2 + "ServerMetadata", Inline(&inference, &I::ServerMetadata))
        .Add(v2 + "ModelMetadata", Inline(&inference, &I::ModelMetadata))
        .Add(v2 + "ModelConfig", Inline(&inference, &I::ModelConfig))
        .Add(v2 + "ModelInfer", Deferred(&inference, &I::ModelInfer, timer));
    const std::string health_service = "/grpc.health.v1.Health/";
    router.Add(health_service + "Check", Inline(&health, &HealthServiceImpl::Check))
        .Add(health_service + "Watch", [watchers](std::shared_ptr<http2::GrpcCall> call) {
          health::HealthCheckRequest request;
          if (Status parsed = ParseRequest(*call, &request); !parsed.ok()) return call->Finish(parsed);
          watchers->Watch(std::move(call), request.service());
        });
    return router;
  }

  std::shared_ptr<DeadlineTimer> timer = std::make_shared<DeadlineTimer>();
  PredictionServiceImpl prediction;
  ModelServiceImpl model;
  InferenceServiceImpl inference;
  HealthServiceImpl health;
};

GrpcServer::GrpcServer(std::shared_ptr<ModelManager> manager, std::shared_ptr<RunPool> runs)
    : manager_(std::move(manager)), runs_(runs ? std::move(runs) : std::make_shared<RunPool>(0)) {}

GrpcServer::~GrpcServer() { Shutdown(std::chrono::milliseconds(0)); }

Status GrpcServer::Start(const GrpcServerOptions& options) {
  if (server_) return FailedPrecondition("the gRPC server is already started");
  if (options.threads < 0) return InvalidArgument("gRPC threads must be >= 0, got " + std::to_string(options.threads));
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("gRPC port must be in 0..65535, got " + std::to_string(options.port));
  }
  if (options.max_message_bytes == 0) return InvalidArgument("gRPC max_message_bytes must be > 0");
  services_ =
      std::make_unique<Services>(manager_, shutting_down_, runs_,
                                 options.predict_outputs_as_tensor_content ? codec::TensorProtoEncoding::kTensorContent
                                                                           : codec::TensorProtoEncoding::kTypedValues);
  watchers_ = std::make_unique<HealthWatchers>(
      [health = &services_->health](const std::string& service) { return health->Evaluate(service); },
      kHealthPollInterval);
  http2::ServerOptions server_options;
  server_options.address = options.address;
  server_options.port = static_cast<uint16_t>(options.port);
  server_options.io_threads =
      options.threads > 0 ? options.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  server_options.session.max_request_body_bytes = options.max_message_bytes + http2::kGrpcPrefixBytes;
  // One message of the allowed size must fit in what a connection may buffer.
  server_options.session.max_buffered_request_bytes =
      std::max(server_options.session.max_buffered_request_bytes, server_options.session.max_request_body_bytes);
  auto server = std::make_unique<http2::Server>(
      server_options, services_->Routes(options.max_message_bytes, watchers_.get()).AsHandler());
  if (Status s = server->Start(); !s.ok()) {
    watchers_.reset();
    services_.reset();
    return s;
  }
  port_ = server->port();
  server_ = std::move(server);
  return Status::Ok();
}

void GrpcServer::SetShuttingDown() {
  shutting_down_->store(true);
  if (watchers_) watchers_->Notify();
}

void GrpcServer::Shutdown(std::chrono::milliseconds deadline) {
  if (!server_) return;
  SetShuttingDown();
  // Watches never end on their own: end them first so the drain does not wait for them.
  watchers_->Stop(Unavailable("the server is shutting down"));
  server_->Drain(deadline);
  server_.reset();
  watchers_.reset();
}

}  // namespace mf::server
