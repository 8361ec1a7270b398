// The REST front end of modelfleet-server: TF Serving's /v1 API, KServe v2's /v2 API, and the
// Prometheus endpoints, on one port. Handlers ask the ModelManager for a servable handle, run
// it asynchronously (answering from the batch thread when batching), and name the version that
// answered: the X-Model-Version header on /v1 predictions, model_version in v2 bodies.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "http/server.h"
#include "modelfleet_version.h"
#include "server/config/monitoring_config.h"
#include "server/repository/deadline_timer.h"
#include "server/repository/model_manager.h"
#include "server/repository/run_pool.h"

namespace mf::server::rest {

inline constexpr std::string_view kModelVersionHeader = "X-Model-Version";

struct RestApiOptions {
  MonitoringOptions monitoring;
  // --rest_api_timeout_in_ms: a prediction not answered by then gets 504 DEADLINE_EXCEEDED.
  std::chrono::milliseconds timeout{30000};
  // Where model runs of servables that compute on the caller's thread go: a pool shared with the
  // gRPC front end, or (null) one of run_threads threads of its own (0: one per core).
  std::shared_ptr<RunPool> run_pool;
  int run_threads = 0;
  std::string server_version = MODELFLEET_VERSION;
  // --rest_api_enable_cors_support: browsers may call the API from any origin (the server adds
  // Access-Control-Allow-Origin: * to every response, see CorsHeaders()); OPTIONS preflights
  // are answered 204.
  bool cors = false;
};

// The headers TF Serving's CORS support adds to every response.
http::Headers CorsHeaders();

class RestApi {
 public:
  RestApi(std::shared_ptr<const ModelManager> manager, RestApiOptions options);

  http::Handler handler() const;
  // From here /v2/health/ready answers 503 (the drain on SIGTERM starts with this).
  void SetShuttingDown() { shutting_down_->store(true); }

 private:
  std::shared_ptr<const ModelManager> manager_;
  RestApiOptions options_;
  std::shared_ptr<std::atomic<bool>> shutting_down_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<DeadlineTimer> timer_ = std::make_shared<DeadlineTimer>();
  std::shared_ptr<RunPool> pool_;
};

}  // namespace mf::server::rest
