// The endpoints controllers' decision, as pure functions: a Service with a selector and the pods
// of its namespace give one core/v1 Endpoints object (ready addresses, notReadyAddresses) and
// discovery.k8s.io/v1 EndpointSlices (one per distinct port mapping, ready/serving/terminating
// conditions). Named targetPorts resolve against each pod's container ports, as in Kubernetes.
#pragma once

#include <vector>

#include "tools/local/controllers/object_meta.h"

namespace mf::local {

inline constexpr std::string_view kServiceNameLabel = "kubernetes.io/service-name";
inline constexpr std::string_view kManagedByLabel = "endpointslice.kubernetes.io/managed-by";
inline constexpr std::string_view kManagedByValue = "endpointslice-controller.k8s.io";

struct ServiceEndpoints {
  Json endpoints;                   // core/v1 Endpoints named like the Service
  std::vector<Json> slices;         // discovery.k8s.io/v1 EndpointSlices, deterministic names
};

// Returns nullopt-like empty result (ok, no objects) for a Service without a selector: its
// Endpoints are managed by hand. Pods without an IP are skipped; terminating pods appear in
// slices with terminating=true (and not in Endpoints), as EndpointSlice consumers expect.
StatusOr<ServiceEndpoints> BuildServiceEndpoints(const Json& service, const std::vector<Json>& pods);

}  // namespace mf::local
