// Per-request metrics, under three naming schemes (docs/metrics.md), each fed from one
// measurement:
//  TF Serving's, so existing dashboards work:
//   :tensorflow:serving:request_count{model_name,status}
//   :tensorflow:serving:request_latency{model_name,API,entrypoint}   µs histogram
//   :tensorflow:serving:runtime_latency{model_name,API,runtime}      µs histogram
//   :tensorflow:serving:batching_session:queuing_latency{thread_pool_name}   µs histogram
//  Prometheus-style:
//   modelfleet_requests_total{model,version,api,status}
//   modelfleet_request_latency_seconds{model,api}
//   modelfleet_compute_latency_seconds{model}
//   modelfleet_queue_latency_seconds{model}
//  Triton's (KServe/Triton clients and dashboards read these), cumulative counters per
//  {model,version}, counting inference requests that reached a model version:
//   nv_inference_request_success, nv_inference_request_failure
//   nv_inference_count (rows inferred), nv_inference_exec_count (model executions)
//   nv_inference_request_duration_us, nv_inference_queue_duration_us,
//   nv_inference_compute_infer_duration_us   (per successful request, whole microseconds)
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

// Called once per request by the REST and gRPC handlers, when the answer is known.
void RecordRequest(const RequestRecord& record);

// One model execution, recorded by the servable that knows whom it ran for: BatchingServable for
// a batch, MeteredServable for a request that runs alone. Timed where the model runs, so it
// excludes queueing.
struct ExecutionRecord {
  std::string_view model;
  int64_t version = -1;
  int64_t rows = 0;      // the requests' rows (Triton's inferences); batch padding excluded
  int64_t requests = 0;  // requests the execution answers
  bool ok = true;        // false: the run failed, its requests fail (counted by RecordRequest)
  double compute_seconds = 0;
};
void RecordExecution(const ExecutionRecord& record);

// The time one request waited in its batching queue before its batch started.
void RecordQueueWait(std::string_view model, int64_t version, double seconds);

}  // namespace mf::server
