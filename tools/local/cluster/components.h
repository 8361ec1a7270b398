// The command lines of the control plane's processes: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler (the real ones, built from their pinned Go modules by
// scripts/build-go-tools.sh) and our node agent. A pure function of the layout, so what
// `modelfleet-local up` runs is reviewed and tested as data.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "tools/local/cluster/pki.h"

namespace mf::local {

struct ControlPlaneLayout {
  std::filesystem::path data_dir;
  std::filesystem::path go_bin_dir;   // etcd, kube-apiserver, kube-controller-manager, kube-scheduler
  std::filesystem::path self_binary;  // modelfleet-local itself (runs the node agent)
  std::string node_name = "local";
  ClusterPki pki;
  std::string image_map;                              // node agent --image-map
  std::map<std::string, int64_t> extended_resources;  // node agent --extended-resources
  std::string log_level = "info";
  // Node agent --simulate-pods (simulated_pods.h); the controller manager and the scheduler then
  // get API rate limits that let them create and bind ~15,000 pods in minutes.
  bool simulate_pods = false;
  // Extra kube-apiserver flags, appended (tests: e.g. a short --etcd-compaction-interval).
  std::vector<std::string> apiserver_flags;
};

struct ComponentSpec {
  std::string name;
  std::vector<std::string> argv;
  std::filesystem::path log_path;  // stdout + stderr
};

// In start order.
std::vector<ComponentSpec> ControlPlaneComponents(const ControlPlaneLayout& layout);

// Where `up` keeps things under the data directory.
std::filesystem::path ComponentKubeconfig(const std::filesystem::path& data_dir, const std::string& component);
std::filesystem::path HostBrokerSocket(const std::filesystem::path& data_dir);
std::filesystem::path AuditPolicyPath(const std::filesystem::path& data_dir);
// The audit policy kube-apiserver is started with: metadata of every request except the
// high-volume reads and health checks, as the usual production policies do.
std::string AuditPolicyYaml();

}  // namespace mf::local
