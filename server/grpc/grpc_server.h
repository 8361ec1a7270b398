// The gRPC front end of modelfleet-server, on one port: tensorflow.serving.PredictionService
// and ModelService (TF Serving clients), inference.GRPCInferenceService (KServe v2 / Triton
// clients) and grpc.health.v1.Health. Services are thin: they resolve a servable handle from the
// ModelManager, convert tensors with server/codec, run, and fill model_spec / model_version with
// the version that answered.
//
// Built on grpc++'s async API with a fixed set of threads, one completion queue each (see
// async_unary_call.h for why not the sync API). A thread decodes a call, runs the model inline
// (or hands it to the batch scheduler, which answers from its own thread), and writes the answer.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "server/repository/model_manager.h"

namespace grpc {
class Server;
class Service;
class ServerCompletionQueue;
}  // namespace grpc

namespace mf::server {

class InFlightCalls;

struct GrpcServerOptions {
  std::string address = "0.0.0.0";
  int port = 8500;  // 0 picks a free port (see GrpcServer::port())
  // Completion-queue threads; 0: one per hardware thread. Each runs one model at a time, so
  // this is also how many unbatched gRPC model runs proceed at once.
  int threads = 0;
};

class GrpcServer {
 public:
  explicit GrpcServer(std::shared_ptr<ModelManager> manager);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds and starts the threads. UNAVAILABLE when the bind fails, INVALID_ARGUMENT for
  // negative thread counts; call once.
  Status Start(const GrpcServerOptions& options);
  int port() const { return port_; }
  // Health checks and ServerReady answer NOT_SERVING / false from here on.
  void SetShuttingDown() { shutting_down_->store(true); }
  // Stops accepting, waits up to `deadline` for in-flight calls, then cancels the rest.
  void Shutdown(std::chrono::milliseconds deadline);

 private:
  struct Methods;  // the async services and the per-queue method tables

  void ArmAll();

  std::shared_ptr<ModelManager> manager_;
  std::shared_ptr<std::atomic<bool>> shutting_down_ = std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<InFlightCalls> in_flight_;
  std::unique_ptr<Methods> methods_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::thread> threads_;
  int port_ = 0;
};

}  // namespace mf::server
