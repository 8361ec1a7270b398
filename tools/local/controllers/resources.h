// The built-in resources the controllers and the kubelet read and write, as store keys.
#pragma once

#include "tools/local/store/store.h"

namespace mf::local::resources {

inline const GroupVersionResource kPods{"", "v1", "pods"};
inline const GroupVersionResource kServices{"", "v1", "services"};
inline const GroupVersionResource kEndpoints{"", "v1", "endpoints"};
inline const GroupVersionResource kConfigMaps{"", "v1", "configmaps"};
inline const GroupVersionResource kSecrets{"", "v1", "secrets"};
inline const GroupVersionResource kNodes{"", "v1", "nodes"};
inline const GroupVersionResource kDeployments{"apps", "v1", "deployments"};
inline const GroupVersionResource kReplicaSets{"apps", "v1", "replicasets"};
inline const GroupVersionResource kEndpointSlices{"discovery.k8s.io", "v1", "endpointslices"};

}  // namespace mf::local::resources
