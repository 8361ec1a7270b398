// Per-request metrics, under both naming schemes (docs/metrics.md):
//  TF Serving's, so existing dashboards work:
//   :tensorflow:serving:request_count{model_name,status}
//   :tensorflow:serving:request_latency{model_name,API,entrypoint}   µs histogram
//   :tensorflow:serving:runtime_latency{model_name,API,runtime}      µs histogram
//  Prometheus-style:
//   modelfleet_requests_total{model,version,api,status}
//   modelfleet_request_latency_seconds{model,api}
//   modelfleet_compute_latency_seconds{model}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mf::server {

enum class Entrypoint { kRest, kGrpc };

struct RequestRecord {
  std::string_view model;
  int64_t version = -1;  // -1: no version was resolved (e.g. unknown model)
  std::string_view api;  // "Predict", "GetModelMetadata", "GetModelStatus", "ModelInfer", ...
  Entrypoint entrypoint = Entrypoint::kRest;
  StatusCode code = StatusCode::kOk;
  double total_seconds = 0;
};

void RecordRequest(const RequestRecord& record);
// One model run (a whole batch when batching), timed where the model runs, so it excludes
// queueing (that is modelfleet_queue_latency_seconds).
void RecordCompute(std::string_view model, double seconds);

}  // namespace mf::server
