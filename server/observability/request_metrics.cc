#include "server/observability/request_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>

#include <array>
#include <cmath>
#include <initializer_list>
#include <string>
#include <unordered_map>

#include "metrics/metrics.h"

namespace mf::server {
namespace {

struct Families {
  prometheus::Family<prometheus::Counter>& tf_request_count;
  prometheus::Family<prometheus::Histogram>& tf_request_latency;
  prometheus::Family<prometheus::Histogram>& tf_runtime_latency;
  prometheus::Family<prometheus::Histogram>& tf_queuing_latency;
  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& request_latency;
  prometheus::Family<prometheus::Histogram>& compute_latency;
  prometheus::Family<prometheus::Histogram>& queue_latency;
  prometheus::Family<prometheus::Counter>& nv_success;
  prometheus::Family<prometheus::Counter>& nv_failure;
  prometheus::Family<prometheus::Counter>& nv_inferences;
  prometheus::Family<prometheus::Counter>& nv_executions;
  prometheus::Family<prometheus::Counter>& nv_request_us;
  prometheus::Family<prometheus::Counter>& nv_queue_us;
  prometheus::Family<prometheus::Counter>& nv_compute_infer_us;
};

prometheus::Family<prometheus::Counter>& Counter(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r);
}

prometheus::Family<prometheus::Histogram>& Histogram(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r);
}

Families& Get() {
  static Families* families = [] {
    auto& r = *metrics::DefaultRegistry();
    return new Families{
        Counter(r, ":tensorflow:serving:request_count", "The number of requests (TF Serving's name)."),
        Histogram(r, ":tensorflow:serving:request_latency",
                  "Distribution of wall time (in microseconds) for requests (TF Serving's name)."),
        Histogram(r, ":tensorflow:serving:runtime_latency",
                  "Distribution of wall time (in microseconds) for model runs (TF Serving's name)."),
        Histogram(r, ":tensorflow:serving:batching_session:queuing_latency",
                  "Distribution of wall time spent (in microseconds) in queuing (TF Serving's name)."),
        Counter(r, "modelfleet_requests_total", "Model API requests by model, version, API and canonical status code"),
        Histogram(r, "modelfleet_request_latency_seconds", "Time from request arrival to response, by model and API"),
        Histogram(r, "modelfleet_compute_latency_seconds", "Time the model spent computing a request's batch"),
        Histogram(r, "modelfleet_queue_latency_seconds",
                  "Time a request waited in the batching queue before its batch started"),
        Counter(r, "nv_inference_request_success", "Number of successful inference requests, all batch sizes"),
        Counter(r, "nv_inference_request_failure", "Number of failed inference requests, all batch sizes"),
        Counter(r, "nv_inference_count", "Number of inferences performed (a request counts its batch size)"),
        Counter(r, "nv_inference_exec_count", "Number of model executions performed"),
        Counter(r, "nv_inference_request_duration_us", "Cumulative inference request duration in microseconds"),
        Counter(r, "nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds"),
        Counter(r, "nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds"),
    };
  }();
  return *families;
}

// TF Serving's request latency buckets: 10 µs growing by 1.8, 33 of them.
const prometheus::Histogram::BucketBoundaries& TfMicrosBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries(metrics::ExponentialBuckets(10, 1.8, 33));
  return *buckets;
}

// TF Serving's batching queue buckets: 100 µs growing by 1.2, 52 of them (~1 s).
const prometheus::Histogram::BucketBoundaries& TfQueuingBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries(metrics::ExponentialBuckets(100, 1.2, 52));
  return *buckets;
}

// Triton's labels. Only inference requests on a resolved version have Triton series: a request
// refused before it reached a model version (unknown model, undecodable body) is not counted,
// as Triton's frontends do not count requests that never reach the model.
prometheus::Labels TritonLabels(std::string_view model, int64_t version) {
  return {{"model", std::string(model)}, {"version", std::to_string(version)}};
}

bool IsInference(std::string_view api) {
  static constexpr std::array<std::string_view, 5> kInferenceApis = {"Predict", "Classify", "Regress", "MultiInference",
                                                                     "ModelInfer"};
  for (std::string_view name : kInferenceApis) {
    if (api == name) return true;
  }
  return false;
}

// Triton's duration counters are whole microseconds (nanoseconds / 1000 per request).
double WholeMicros(double seconds) { return seconds > 0 ? std::floor(seconds * 1e6) : 0; }

// The series a request, execution or queue wait updates, looked up once per label set and
// thread, then kept: Family::Add per update would take the family's lock and build a label map
// every time. The pointers stay valid because nothing ever removes series from these families.
struct RequestSeries {
  prometheus::Counter* tf_count;
  prometheus::Histogram* tf_latency;
  prometheus::Counter* requests;
  prometheus::Histogram* latency;
  prometheus::Counter* nv_outcome = nullptr;  // success or failure; null when not an inference
  prometheus::Counter* nv_request_us = nullptr;
};

struct ExecutionSeries {
  prometheus::Histogram* tf_runtime;
  prometheus::Histogram* compute;
  prometheus::Counter* nv_executions = nullptr;  // Triton's series: null without a version
  prometheus::Counter* nv_inferences = nullptr;
  prometheus::Counter* nv_compute_us = nullptr;
};

struct QueueSeries {
  prometheus::Histogram* queue;
  prometheus::Histogram* tf_queuing;
  prometheus::Counter* nv_queue_us = nullptr;
};

template <typename Series, typename Make>
const Series& Cached(std::string key, Make make) {
  thread_local std::unordered_map<std::string, Series> cache;
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(std::move(key), make()).first;
  return it->second;
}

std::string Key(std::initializer_list<std::string_view> parts) {
  std::string key;
  for (std::string_view part : parts) {
    key.append(part);
    key.push_back('\0');
  }
  return key;
}

RequestSeries MakeRequestSeries(const RequestRecord& record) {
  Families& f = Get();
  const std::string model(record.model);
  const std::string api(record.api);
  const std::string status(StatusCodeName(record.code));
  RequestSeries series{
      &f.tf_request_count.Add({{"model_name", model}, {"status", status}}),
      &f.tf_request_latency.Add({{"model_name", model},
                                 {"API", api},
                                 {"entrypoint", record.entrypoint == Entrypoint::kRest ? "REST" : "GRPC"}},
                                TfMicrosBuckets()),
      &f.requests.Add({{"model", model},
                       {"version", record.version >= 0 ? std::to_string(record.version) : ""},
                       {"api", api},
                       {"status", status}}),
      &f.request_latency.Add({{"model", model}, {"api", api}}, metrics::LatencySecondsBuckets()),
  };
  if (record.version >= 0 && IsInference(record.api)) {
    const prometheus::Labels labels = TritonLabels(record.model, record.version);
    if (record.code == StatusCode::kOk) {
      series.nv_outcome = &f.nv_success.Add(labels);
      series.nv_request_us = &f.nv_request_us.Add(labels);
    } else {
      series.nv_outcome = &f.nv_failure.Add(labels);
    }
  }
  return series;
}

}  // namespace

void RecordRequest(const RequestRecord& record) {
  const std::string version = std::to_string(record.version);
  const RequestSeries& series =
      Cached<RequestSeries>(Key({record.model, version, record.api, StatusCodeName(record.code),
                                 record.entrypoint == Entrypoint::kRest ? "REST" : "GRPC"}),
                            [&] { return MakeRequestSeries(record); });
  series.tf_count->Increment();
  series.tf_latency->Observe(record.total_seconds * 1e6);
  series.requests->Increment();
  series.latency->Observe(record.total_seconds);
  if (series.nv_outcome) series.nv_outcome->Increment();
  if (series.nv_request_us) series.nv_request_us->Increment(WholeMicros(record.total_seconds));
}

void RecordExecution(const ExecutionRecord& record) {
  const ExecutionSeries& series = Cached<ExecutionSeries>(Key({record.model, std::to_string(record.version)}), [&] {
    Families& f = Get();
    const std::string model(record.model);
    ExecutionSeries made{
        &f.tf_runtime_latency.Add({{"model_name", model}, {"API", "Predict"}, {"runtime", "onnx"}}, TfMicrosBuckets()),
        &f.compute_latency.Add({{"model", model}}, metrics::LatencySecondsBuckets()),
    };
    if (record.version >= 0) {
      const prometheus::Labels labels = TritonLabels(record.model, record.version);
      made.nv_executions = &f.nv_executions.Add(labels);
      made.nv_inferences = &f.nv_inferences.Add(labels);
      made.nv_compute_us = &f.nv_compute_infer_us.Add(labels);
    }
    return made;
  });
  series.tf_runtime->Observe(record.compute_seconds * 1e6);
  series.compute->Observe(record.compute_seconds);
  if (!record.ok || !series.nv_executions) return;
  series.nv_executions->Increment();
  series.nv_inferences->Increment(static_cast<double>(record.rows));
  // Each request of a batch spent the whole execution computing (Triton's per-request sum).
  series.nv_compute_us->Increment(WholeMicros(record.compute_seconds) * static_cast<double>(record.requests));
}

void RecordQueueWait(std::string_view model, int64_t version, double seconds) {
  const QueueSeries& series = Cached<QueueSeries>(Key({model, std::to_string(version)}), [&] {
    Families& f = Get();
    // TF Serving's series is per batch thread pool, not per model; its pools are named
    // "batch_threads" unless configured otherwise, and ours is the one shared scheduler.
    QueueSeries made{&f.queue_latency.Add({{"model", std::string(model)}}, metrics::LatencySecondsBuckets()),
                     &f.tf_queuing_latency.Add({{"thread_pool_name", "batch_threads"}}, TfQueuingBuckets())};
    if (version >= 0) made.nv_queue_us = &f.nv_queue_us.Add(TritonLabels(model, version));
    return made;
  });
  series.queue->Observe(seconds);
  series.tf_queuing->Observe(seconds * 1e6);
  if (series.nv_queue_us) series.nv_queue_us->Increment(WholeMicros(seconds));
}

}  // namespace mf::server
