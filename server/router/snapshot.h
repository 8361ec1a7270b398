// The immutable routing state every request reads: the validated config plus, per version, its
// ready endpoints and metric series. Built off the hot path whenever the config or the
// endpoints change, then published with one atomic pointer swap; a request keeps the snapshot it
// started with (shared_ptr) until it finishes, so a swap never disturbs requests in flight.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server/router/endpoint.h"
#include "server/router/router_config.h"
#include "server/router/router_metrics.h"

namespace mf::router {

// One pod address behind a Service, as an EndpointSlice lists it.
struct DiscoveredEndpoint {
  std::string ip;
  int http_port = 8501;
  int grpc_port = 8500;
  bool ready = false;  // conditions.ready == true and not terminating
  friend bool operator==(const DiscoveredEndpoint&, const DiscoveredEndpoint&) = default;
};
// Service name -> its endpoints, merged over all of its slices, sorted by ip.
using ServiceEndpoints = std::map<std::string, std::vector<DiscoveredEndpoint>>;

// Reads discovery.k8s.io/v1 EndpointSlices (any services; those without the
// kubernetes.io/service-name label are skipped). Ports: the one named "http" (default 8501) and
// "grpc" (default 8500). An endpoint is ready when conditions.ready is true and
// conditions.terminating is not. Never throws on malformed objects: bad entries are skipped.
ServiceEndpoints ServiceEndpointsFromSlices(const std::vector<std::shared_ptr<const nlohmann::json>>& slices);

struct VersionTargets {
  std::string name;
  int weight = 0;
  std::vector<std::shared_ptr<Endpoint>> rest;  // ready only
  std::vector<std::shared_ptr<Endpoint>> grpc;  // ready only
  int rest_total = 0;                           // ready or not: for "0/2 ready" messages
  int grpc_total = 0;
  VersionMetrics* metrics = nullptr;
};

struct Snapshot {
  uint64_t generation = 0;
  RouterConfig config;
  std::vector<VersionTargets> versions;                             // parallel to config.versions
  std::vector<int> rest_ready, rest_total, grpc_ready, grpc_total;  // per version
  int mirror_version = -1;                                          // index, or -1
  VersionMetrics* unrouted_metrics = nullptr;                       // version="none"
};

// Static mode (`discovered` null): each version's endpoints come from the config (all ready).
// Cluster mode: from the version's service in `discovered`.
std::shared_ptr<const Snapshot> BuildSnapshot(const RouterConfig& config, const ServiceEndpoints* discovered,
                                              uint64_t generation, EndpointRegistry& registry, RouterMetrics* metrics);

// The published snapshot. Load() on every request, Store() by the config watcher.
//
// Load() takes no lock: each thread keeps the snapshot it read last and re-reads the shared
// pointer (whose std::atomic<shared_ptr> load spins on a lock bit shared by every thread) only when
// the version counter moved. Store() publishes the pointer before bumping the counter, so a
// thread that sees the new count reads the new snapshot.
class SnapshotStore {
 public:
  std::shared_ptr<const Snapshot> Load() const {
    struct Cache {
      uint64_t store = 0;  // id_ of the store it caches (an address could be reused)
      uint64_t version = 0;
      std::shared_ptr<const Snapshot> snapshot;
    };
    thread_local Cache cache;
    const uint64_t version = version_.load(std::memory_order_acquire);
    if (cache.store != id_ || cache.version != version) {
      cache.snapshot = current_.load(std::memory_order_acquire);
      cache.store = id_;
      cache.version = version;
    }
    return cache.snapshot;
  }
  void Store(std::shared_ptr<const Snapshot> snapshot) {
    current_.store(std::move(snapshot), std::memory_order_release);
    version_.fetch_add(1, std::memory_order_acq_rel);
  }

 private:
  static inline std::atomic<uint64_t> next_id_{1};
  const uint64_t id_ = next_id_.fetch_add(1);
  std::atomic<std::shared_ptr<const Snapshot>> current_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace mf::router
