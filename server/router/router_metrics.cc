#include "server/router/router_metrics.h"

#include <prometheus/registry.h>

#include "common/status.h"
#include "metrics/metrics.h"

namespace mf::router {

struct RouterFamilies {
  explicit RouterFamilies(prometheus::Registry& r)
      : requests(prometheus::BuildCounter()
                     .Name("modelfleet_router_requests_total")
                     .Help("Requests the router answered, by the version that served them and the response code")
                     .Register(r)),
        duration(prometheus::BuildHistogram()
                     .Name("modelfleet_router_request_duration_seconds")
                     .Help("Time from a request's arrival at the router to its answer, by version")
                     .Register(r)),
        in_flight(prometheus::BuildGauge()
                      .Name("modelfleet_router_in_flight")
                      .Help("Requests being proxied to each version now")
                      .Register(r)),
        mirrored(prometheus::BuildCounter()
                     .Name("modelfleet_router_mirrored_total")
                     .Help("Copies of requests sent to the mirror version")
                     .Register(r)),
        disagreements(prometheus::BuildCounter()
                          .Name("modelfleet_router_mirror_disagreements_total")
                          .Help("Mirrored requests whose answer differed from the primary's (status, or predictions "
                                "beyond 1e-4)")
                          .Register(r)),
        ready(prometheus::BuildGauge()
                  .Name("modelfleet_router_ready_endpoints")
                  .Help("Ready endpoints of each version in the current snapshot")
                  .Register(r)),
        retries(prometheus::BuildCounter()
                    .Name("modelfleet_router_retries_total")
                    .Help("Requests retried on another endpoint after a connect failure or a reset before any "
                          "response byte, by the version first tried")
                    .Register(r)),
        ejections(prometheus::BuildCounter()
                      .Name("modelfleet_router_ejections_total")
                      .Help("Endpoints ejected after consecutive failures")
                      .Register(r)),
        generation(prometheus::BuildGauge()
                       .Name("modelfleet_router_config_generation")
                       .Help("Snapshots applied since start (config or endpoint changes)")
                       .Register(r)
                       .Add({})),
        config_errors(prometheus::BuildCounter()
                          .Name("modelfleet_router_config_errors_total")
                          .Help("Configs refused (the previous snapshot stayed in force)")
                          .Register(r)
                          .Add({})) {}

  prometheus::Family<prometheus::Counter>& requests;
  prometheus::Family<prometheus::Histogram>& duration;
  prometheus::Family<prometheus::Gauge>& in_flight;
  prometheus::Family<prometheus::Counter>& mirrored;
  prometheus::Family<prometheus::Counter>& disagreements;
  prometheus::Family<prometheus::Gauge>& ready;
  prometheus::Family<prometheus::Counter>& retries;
  prometheus::Family<prometheus::Counter>& ejections;
  prometheus::Gauge& generation;
  prometheus::Counter& config_errors;
};

namespace {
const char* ProtocolName(Protocol p) { return p == Protocol::kRest ? "rest" : "grpc"; }
}  // namespace

VersionMetrics::VersionMetrics(std::string version, RouterFamilies& families)
    : version_(std::move(version)), families_(families) {
  for (Protocol p : {Protocol::kRest, Protocol::kGrpc}) {
    int i = static_cast<int>(p);
    duration_[i] = &families.duration.Add({{"version", version_}, {"protocol", ProtocolName(p)}},
                                          metrics::LatencySecondsBuckets());
    ready_[i] = &families.ready.Add({{"version", version_}, {"protocol", ProtocolName(p)}});
  }
  in_flight_ = &families.in_flight.Add({{"version", version_}});
  mirrored_ = &families.mirrored.Add({{"version", version_}});
  disagreements_ = &families.disagreements.Add({{"version", version_}});
  retries_ = &families.retries.Add({{"version", version_}});
  ejections_ = &families.ejections.Add({{"version", version_}});
}

prometheus::Counter& VersionMetrics::Requests(Protocol protocol, int code) {
  if (code < 0 || code >= kCodes) code = 0;
  std::atomic<prometheus::Counter*>& slot = requests_[static_cast<int>(protocol)][code];
  prometheus::Counter* counter = slot.load(std::memory_order_acquire);
  if (counter == nullptr) {
    std::string label =
        protocol == Protocol::kRest ? std::to_string(code) : std::string(StatusCodeName(static_cast<StatusCode>(code)));
    // Family::Add returns the existing series for the same labels, so a race here is harmless.
    counter = &families_.requests.Add({{"version", version_}, {"protocol", ProtocolName(protocol)}, {"code", label}});
    slot.store(counter, std::memory_order_release);
  }
  return *counter;
}

void VersionMetrics::RecordRequest(Protocol protocol, int code, double seconds) {
  Requests(protocol, code).Increment();
  duration_[static_cast<int>(protocol)]->Observe(seconds);
}

RouterMetrics& RouterMetrics::Get() {
  static RouterMetrics* metrics = new RouterMetrics();  // never destroyed: used by io threads until exit
  return *metrics;
}

RouterMetrics::RouterMetrics() : families_(std::make_unique<RouterFamilies>(*metrics::DefaultRegistry())) {}

VersionMetrics& RouterMetrics::ForVersion(const std::string& version) {
  std::lock_guard lock(mu_);
  std::unique_ptr<VersionMetrics>& slot = versions_[version];
  if (!slot) slot = std::make_unique<VersionMetrics>(version, *families_);
  return *slot;
}

prometheus::Gauge& RouterMetrics::config_generation() { return families_->generation; }
prometheus::Counter& RouterMetrics::config_errors() { return families_->config_errors; }

}  // namespace mf::router
