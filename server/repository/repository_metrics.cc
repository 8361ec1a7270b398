#include "server/repository/repository_metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include "metrics/metrics.h"

namespace mf::server::repository_metrics {
namespace {

struct Families {
  prometheus::Family<prometheus::Gauge>& version_state;
  prometheus::Family<prometheus::Counter>& load_failures;
  prometheus::Family<prometheus::Counter>& storage_errors;
  prometheus::Family<prometheus::Histogram>& load_seconds;
  prometheus::Family<prometheus::Gauge>& memory_bytes;
  prometheus::Family<prometheus::Gauge>& gpu_memory_bytes;
};

Families& Get() {
  static Families* families = [] {
    auto& registry = *metrics::DefaultRegistry();
    return new Families{
        prometheus::BuildGauge()
            .Name("modelfleet_model_version_state")
            .Help("Lifecycle state of each model version (TF Serving numbers: 10 START, 20 "
                  "LOADING, 30 AVAILABLE, 40 UNLOADING, 50 END)")
            .Register(registry),
        prometheus::BuildCounter()
            .Name("modelfleet_model_load_failures_total")
            .Help("Model version loads that failed (each is retried with backoff)")
            .Register(registry),
        prometheus::BuildCounter()
            .Name("modelfleet_model_storage_errors_total")
            .Help("Repository polls that could not read a model's base path; loaded versions "
                  "keep serving")
            .Register(registry),
        prometheus::BuildHistogram()
            .Name("modelfleet_model_load_seconds")
            .Help("Time to load and warm up one model version")
            .Register(registry),
        prometheus::BuildGauge()
            .Name("modelfleet_model_memory_bytes")
            .Help("Bytes a loaded model version holds (weights and activation plan)")
            .Register(registry),
        prometheus::BuildGauge()
            .Name("modelfleet_model_gpu_memory_bytes")
            .Help("GPU memory a loaded model version placed on the GPU holds")
            .Register(registry),
    };
  }();
  return *families;
}

}  // namespace

void SetVersionState(const std::string& model, int64_t version, VersionState state) {
  Get().version_state.Add({{"model", model}, {"version", std::to_string(version)}}).Set(static_cast<double>(state));
}

void RemoveVersion(const std::string& model, int64_t version) {
  const prometheus::Labels labels = {{"model", model}, {"version", std::to_string(version)}};
  auto& state = Get().version_state;
  state.Remove(&state.Add(labels));
  auto& memory = Get().memory_bytes;
  memory.Remove(&memory.Add(labels));
  auto& gpu = Get().gpu_memory_bytes;
  if (gpu.Has(labels)) gpu.Remove(&gpu.Add(labels));
}

void SetMemoryBytes(const std::string& model, int64_t version, std::string_view device, double bytes) {
  const prometheus::Labels labels = {{"model", model}, {"version", std::to_string(version)}};
  Get().memory_bytes.Add(labels).Set(bytes);
  auto& gpu = Get().gpu_memory_bytes;
  // A version that never ran on the GPU gets no GPU series; one that did drops to 0 on unload.
  if (device == "cuda" || gpu.Has(labels)) gpu.Add(labels).Set(device == "cuda" ? bytes : 0.0);
}

void CountLoadFailure(const std::string& model) { Get().load_failures.Add({{"model", model}}).Increment(); }

void CountStorageError(const std::string& model) { Get().storage_errors.Add({{"model", model}}).Increment(); }

void ObserveLoadSeconds(const std::string& model, double seconds) {
  Get().load_seconds.Add({{"model", model}}, metrics::ExponentialBuckets(0.01, 2, 14)).Observe(seconds);
}

}  // namespace mf::server::repository_metrics
