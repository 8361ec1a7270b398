// The cluster's own network. kube-apiserver refuses loopback addresses in Endpoints and
// EndpointSlices, so pods, the node and Services get private addresses; they live in a network
// namespace that `modelfleet-local up` creates for itself, where
//   ip route add local 10.244.0.0/16 dev lo     (node + pods)
//   ip route add local 10.96.0.0/16 dev lo      (Service cluster IPs)
// makes every address of both ranges bindable without any interface. Nothing in that namespace
// can reach another machine: it has no link but its own loopback. The host reaches the cluster
// only through loopback listeners opened in the host namespace (host_sockets.h).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace mf::local {

inline constexpr char kNodeIp[] = "10.244.0.1";      // the node, kube-apiserver's advertise address
inline constexpr char kPodCidr[] = "10.244.0.0/16";  // pods from 10.244.1.1 upward (pod_ip_allocator.h)
inline constexpr char kServiceCidr[] = "10.96.0.0/16";
inline constexpr uint16_t kApiServerPort = 6443;
inline constexpr uint16_t kKubeletPort = 10250;
inline constexpr uint16_t kEtcdClientPort = 2379;
inline constexpr uint16_t kEtcdPeerPort = 2380;

// Moves the calling process into a new network namespace with the routes above and loopback up.
// As root: unshare(CLONE_NEWNET). Otherwise: a new user namespace too (the caller becomes root
// inside it, mapped to its own uid), which unprivileged users may create. Must be called while
// the process has a single thread; every child started afterwards inherits the namespace, and
// the namespace disappears with the last process in it.
Status EnterClusterNetwork();

}  // namespace mf::local
