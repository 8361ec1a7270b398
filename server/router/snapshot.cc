#include "server/router/snapshot.h"

#include <algorithm>

namespace mf::router {
namespace {

std::string JoinHostPort(const std::string& ip, int port) {
  return (ip.find(':') != std::string::npos ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
}

int PortNamed(const nlohmann::json& slice, std::string_view name, int fallback) {
  auto ports = slice.find("ports");
  if (ports == slice.end() || !ports->is_array()) return fallback;
  for (const nlohmann::json& port : *ports) {
    if (!port.is_object()) continue;
    auto n = port.find("name");
    auto p = port.find("port");
    if (n != port.end() && n->is_string() && *n == name && p != port.end() && p->is_number_integer()) {
      int value = p->get<int>();
      if (value >= 1 && value <= 65535) return value;
    }
  }
  return fallback;
}

bool BoolField(const nlohmann::json& object, std::string_view key, bool fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

}  // namespace

ServiceEndpoints ServiceEndpointsFromSlices(const std::vector<std::shared_ptr<const nlohmann::json>>& slices) {
  ServiceEndpoints out;
  for (const auto& slice_ptr : slices) {
    if (!slice_ptr || !slice_ptr->is_object()) continue;
    const nlohmann::json& slice = *slice_ptr;
    std::string service;
    if (auto meta = slice.find("metadata"); meta != slice.end() && meta->is_object()) {
      if (auto labels = meta->find("labels"); labels != meta->end() && labels->is_object()) {
        auto name = labels->find("kubernetes.io/service-name");
        if (name != labels->end() && name->is_string()) service = name->get<std::string>();
      }
    }
    if (service.empty()) continue;
    std::vector<DiscoveredEndpoint>& list = out[service];
    const int http_port = PortNamed(slice, "http", 8501);
    const int grpc_port = PortNamed(slice, "grpc", 8500);
    auto endpoints = slice.find("endpoints");
    if (endpoints == slice.end() || !endpoints->is_array()) continue;
    for (const nlohmann::json& endpoint : *endpoints) {
      if (!endpoint.is_object()) continue;
      bool ready = false;
      if (auto conditions = endpoint.find("conditions"); conditions != endpoint.end() && conditions->is_object()) {
        // EndpointSlice API: a nil `ready` means ready, but the API server always sets it; be strict.
        ready = BoolField(*conditions, "ready", false) && !BoolField(*conditions, "terminating", false);
      }
      auto addresses = endpoint.find("addresses");
      if (addresses == endpoint.end() || !addresses->is_array()) continue;
      for (const nlohmann::json& address : *addresses) {
        if (!address.is_string() || address.get_ref<const std::string&>().empty()) continue;
        list.push_back({address.get<std::string>(), http_port, grpc_port, ready});
      }
    }
  }
  for (auto& [service, list] : out) {
    std::sort(list.begin(), list.end(), [](const DiscoveredEndpoint& a, const DiscoveredEndpoint& b) {
      return std::tie(a.ip, a.http_port, a.grpc_port) < std::tie(b.ip, b.http_port, b.grpc_port);
    });
  }
  return out;
}

std::shared_ptr<const Snapshot> BuildSnapshot(const RouterConfig& config, const ServiceEndpoints* discovered,
                                              uint64_t generation, EndpointRegistry& registry, RouterMetrics* metrics) {
  auto snapshot = std::make_shared<Snapshot>();
  snapshot->generation = generation;
  snapshot->config = config;
  snapshot->mirror_version = config.mirror ? config.VersionIndex(config.mirror->version) : -1;
  if (metrics) snapshot->unrouted_metrics = &metrics->ForVersion("none");
  for (const VersionConfig& version : config.versions) {
    VersionTargets targets;
    targets.name = version.name;
    targets.weight = version.weight;
    if (discovered == nullptr) {
      for (const std::string& address : version.endpoints) targets.rest.push_back(registry.Get("rest", address));
      for (const std::string& address : version.grpc_endpoints) targets.grpc.push_back(registry.Get("grpc", address));
      targets.rest_total = static_cast<int>(targets.rest.size());
      targets.grpc_total = static_cast<int>(targets.grpc.size());
    } else if (auto it = discovered->find(version.service); it != discovered->end()) {
      for (const DiscoveredEndpoint& endpoint : it->second) {
        ++targets.rest_total;
        ++targets.grpc_total;
        if (!endpoint.ready) continue;
        targets.rest.push_back(registry.Get("rest", JoinHostPort(endpoint.ip, endpoint.http_port)));
        targets.grpc.push_back(registry.Get("grpc", JoinHostPort(endpoint.ip, endpoint.grpc_port)));
      }
    }
    snapshot->rest_ready.push_back(static_cast<int>(targets.rest.size()));
    snapshot->rest_total.push_back(targets.rest_total);
    snapshot->grpc_ready.push_back(static_cast<int>(targets.grpc.size()));
    snapshot->grpc_total.push_back(targets.grpc_total);
    if (metrics) targets.metrics = &metrics->ForVersion(version.name);
    snapshot->versions.push_back(std::move(targets));
  }
  return snapshot;
}

}  // namespace mf::router
