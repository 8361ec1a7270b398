// The gRPC front end of modelfleet-server, on one port: tensorflow.serving.PredictionService
// and ModelService (TF Serving clients), inference.GRPCInferenceService (KServe v2 / Triton
// clients) and grpc.health.v1.Health. Services are thin: they resolve a servable handle from the
// ModelManager, convert tensors with server/codec, run, and fill model_spec / model_version with
// the version that answered.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "server/repository/model_manager.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace mf::server {

class GrpcServer {
 public:
  explicit GrpcServer(std::shared_ptr<ModelManager> manager);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds address:port (port 0 picks one; see port()). UNAVAILABLE when the bind fails.
  Status Start(const std::string& address, int port);
  int port() const { return port_; }
  // Health checks and ServerReady answer NOT_SERVING / false from here on.
  void SetShuttingDown() { shutting_down_->store(true); }
  // Stops accepting, waits up to `deadline` for in-flight calls, then cancels the rest.
  void Shutdown(std::chrono::milliseconds deadline);

 private:
  std::shared_ptr<ModelManager> manager_;
  std::shared_ptr<std::atomic<bool>> shutting_down_ = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::unique_ptr<grpc::Service>> services_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace mf::server
