// The gRPC front end of modelfleet-server, on one port: tensorflow.serving.PredictionService
// and ModelService (TF Serving clients), inference.GRPCInferenceService (KServe v2 / Triton,
// with Triton's ModelConfig) and grpc.health.v1.Health (Check, and Watch streaming). Services are thin: they
// resolve a servable handle from the ModelManager, convert tensors with server/codec, run, and
// fill model_spec / model_version with the version that answered.
//
// Served on our own HTTP/2 server (src/http2: framing, HPACK and the protocol engine written
// for this project; nghttp2 is only its test peer) rather than grpc++: grpc++'s per-call
// cost alone was more than a whole REST Predict (docs/benchmarks.md). A fixed set of io
// threads, each with its own connections; an io thread decodes a call and hands the model run
// to the RunPool (or, for a batched model, to the batch scheduler); the thread that finishes the
// run encodes the answer, which is posted back to the connection's io thread to be written.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "common/status.h"
#include "server/repository/model_manager.h"
#include "server/repository/run_pool.h"

namespace mf::http2 {
class Server;
}  // namespace mf::http2

namespace mf::server {

class HealthWatchers;

struct GrpcServerOptions {
  std::string address = "0.0.0.0";
  int port = 8500;  // 0 picks a free port (see GrpcServer::port())
  // io threads; 0: one per hardware thread. They decode and answer calls; model runs go to the
  // RunPool (or the batch threads).
  int threads = 0;
  // Larger request messages get RESOURCE_EXHAUSTED (the REST API's body limit is the same).
  size_t max_message_bytes = 64u << 20;
  // Predict outputs in tensor_content instead of TF Serving's default typed *_val fields.
  bool predict_outputs_as_tensor_content = false;
};

class GrpcServer {
 public:
  // `runs`: where model runs of non-batching servables go (shared with the REST front end);
  // null: a pool of one thread per core of its own.
  explicit GrpcServer(std::shared_ptr<ModelManager> manager, std::shared_ptr<RunPool> runs = nullptr);
  ~GrpcServer();
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds and starts the threads. UNAVAILABLE when the bind fails, INVALID_ARGUMENT for
  // negative thread counts or a bad port; call once.
  Status Start(const GrpcServerOptions& options);
  int port() const { return port_; }
  // Health checks and ServerReady answer NOT_SERVING / false from here on; health watchers are
  // told at once.
  void SetShuttingDown();
  // Ends health watches, sends every connection a GOAWAY, waits up to `deadline` for in-flight
  // calls, then closes what is left.
  void Shutdown(std::chrono::milliseconds deadline);

 private:
  struct Services;

  std::shared_ptr<ModelManager> manager_;
  std::shared_ptr<RunPool> runs_;
  std::shared_ptr<std::atomic<bool>> shutting_down_ = std::make_shared<std::atomic<bool>>(false);
  std::unique_ptr<Services> services_;
  // Declared before server_: the server's streams call into the watchers until it stopped.
  std::unique_ptr<HealthWatchers> watchers_;
  std::unique_ptr<http2::Server> server_;
  int port_ = 0;
};

}  // namespace mf::server
