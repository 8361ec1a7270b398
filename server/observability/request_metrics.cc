#include "server/observability/request_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>

#include "metrics/metrics.h"

namespace mf::server {
namespace {

struct Families {
  prometheus::Family<prometheus::Counter>& tf_request_count;
  prometheus::Family<prometheus::Histogram>& tf_request_latency;
  prometheus::Family<prometheus::Histogram>& tf_runtime_latency;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& request_latency;
  prometheus::Family<prometheus::Histogram>& compute_latency;
};

Families& Get() {
  static Families* families = [] {
    auto& r = *metrics::DefaultRegistry();
    return new Families{
        prometheus::BuildCounter()
            .Name(":tensorflow:serving:request_count")
            .Help("The number of requests (TF Serving's name).")
            .Register(r),
        prometheus::BuildHistogram()
            .Name(":tensorflow:serving:request_latency")
            .Help("Distribution of wall time (in microseconds) for requests (TF Serving's name).")
            .Register(r),
        prometheus::BuildHistogram()
            .Name(":tensorflow:serving:runtime_latency")
            .Help("Distribution of wall time (in microseconds) for model runs (TF Serving's name).")
            .Register(r),
        prometheus::BuildCounter()
            .Name("modelfleet_requests_total")
            .Help("Model API requests by model, version, API and canonical status code")
            .Register(r),
        prometheus::BuildHistogram()
            .Name("modelfleet_request_latency_seconds")
            .Help("Time from request arrival to response, by model and API")
            .Register(r),
        prometheus::BuildHistogram()
            .Name("modelfleet_compute_latency_seconds")
            .Help("Time the model spent computing a request's batch")
            .Register(r),
    };
  }();
  return *families;
}

// TF Serving's request latency buckets: 10 µs growing by 1.8, 33 of them.
const prometheus::Histogram::BucketBoundaries& TfMicrosBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries(metrics::ExponentialBuckets(10, 1.8, 33));
  return *buckets;
}

}  // namespace

void RecordRequest(const RequestRecord& record) {
  Families& f = Get();
  const std::string model(record.model);
  const std::string api(record.api);
  const std::string status(StatusCodeName(record.code));
  f.tf_request_count.Add({{"model_name", model}, {"status", status}}).Increment();
  f.tf_request_latency
      .Add({{"model_name", model},
            {"API", api},
            {"entrypoint", record.entrypoint == Entrypoint::kRest ? "REST" : "GRPC"}},
           TfMicrosBuckets())
      .Observe(record.total_seconds * 1e6);
  f.requests
      .Add({{"model", model},
            {"version", record.version >= 0 ? std::to_string(record.version) : ""},
            {"api", api},
            {"status", status}})
      .Increment();
  f.request_latency.Add({{"model", model}, {"api", api}}, metrics::LatencySecondsBuckets())
      .Observe(record.total_seconds);
}

void RecordCompute(std::string_view model_name, double seconds) {
  Families& f = Get();
  const std::string model(model_name);
  f.tf_runtime_latency.Add({{"model_name", model}, {"API", "Predict"}, {"runtime", "onnx"}}, TfMicrosBuckets())
      .Observe(seconds * 1e6);
  f.compute_latency.Add({{"model", model}}, metrics::LatencySecondsBuckets()).Observe(seconds);
}

}  // namespace mf::server
