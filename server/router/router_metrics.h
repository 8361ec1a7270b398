// The router's Prometheus series (docs/router.md), in the process-wide registry:
//   modelfleet_router_requests_total{version,protocol,code}     counter
//   modelfleet_router_request_duration_seconds{version,protocol} histogram
//   modelfleet_router_in_flight{version}                         gauge
//   modelfleet_router_mirrored_total{version}                    counter
//   modelfleet_router_mirror_disagreements_total{version}        counter
//   modelfleet_router_ready_endpoints{version,protocol}          gauge
//   modelfleet_router_retries_total{version}                     counter
//   modelfleet_router_ejections_total{version}                   counter
//   modelfleet_router_config_generation                          gauge
//   modelfleet_router_config_errors_total                        counter
// `code` is the HTTP status for REST and the gRPC status name (OK, UNAVAILABLE, ...) for gRPC.
// Requests no version could take (503: nothing ready) count under version="none".
//
// The hot path never touches a prometheus Family (whose Add() takes the family's lock): a
// VersionMetrics is looked up once per snapshot build and caches its series per code.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace mf::router {

enum class Protocol { kRest = 0, kGrpc = 1 };

struct RouterFamilies;  // the registered families (router_metrics.cc)

class VersionMetrics {
 public:
  VersionMetrics(std::string version, RouterFamilies& families);

  // One answered request: `code` is an HTTP status (REST) or a gRPC status code (gRPC).
  void RecordRequest(Protocol protocol, int code, double seconds);
  prometheus::Gauge& in_flight() { return *in_flight_; }
  prometheus::Counter& mirrored() { return *mirrored_; }
  prometheus::Counter& mirror_disagreements() { return *disagreements_; }
  prometheus::Counter& retries() { return *retries_; }
  prometheus::Counter& ejections() { return *ejections_; }
  prometheus::Gauge& ready_endpoints(Protocol protocol) { return *ready_[static_cast<int>(protocol)]; }

 private:
  prometheus::Counter& Requests(Protocol protocol, int code);

  const std::string version_;
  RouterFamilies& families_;
  static constexpr int kCodes = 600;  // HTTP statuses; gRPC codes use 0..16
  std::array<std::array<std::atomic<prometheus::Counter*>, kCodes>, 2> requests_{};
  std::array<prometheus::Histogram*, 2> duration_{};
  std::array<prometheus::Gauge*, 2> ready_{};
  prometheus::Gauge* in_flight_;
  prometheus::Counter* mirrored_;
  prometheus::Counter* disagreements_;
  prometheus::Counter* retries_;
  prometheus::Counter* ejections_;
};

class RouterMetrics {
 public:
  // The process-wide instance (registered in mf::metrics::DefaultRegistry on first use).
  static RouterMetrics& Get();

  // The series of `version`, created on first use and kept for the life of the process.
  VersionMetrics& ForVersion(const std::string& version);
  prometheus::Gauge& config_generation();
  prometheus::Counter& config_errors();

 private:
  RouterMetrics();
  std::unique_ptr<RouterFamilies> families_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<VersionMetrics>> versions_;
};

}  // namespace mf::router
