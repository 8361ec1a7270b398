// The one entry point `modelfleet-local up` calls: starts the built-in controllers (Deployment,
// ReplicaSet, Service endpoints) and the local kubelet over the store, and stops them (every pod
// process included) when the handle is stopped or destroyed.
//
//   LocalWorkloadsOptions options;
//   options.data_dir = data_dir;                    // pod logs: kubelet/pod_paths.h
//   options.image_map_path = "images.yaml";         // optional, see kubelet/image_map.h
//   MF_ASSIGN_OR_RETURN(auto workloads, StartLocalWorkloads(store, options));
//   ...
//   workloads->Stop();                              // before the store goes away
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "tools/local/kubelet/kubelet.h"
#include "tools/local/store/store.h"

namespace mf::local {

struct LocalWorkloadsOptions {
  std::filesystem::path data_dir;
  // YAML image -> program map (kubelet/image_map.h). Empty: only containers with a command run.
  std::string image_map_path;
  std::string node_name = "local";
  // Extra environment for every container (e.g. KUBECONFIG pointing at this cluster).
  EnvList extra_env;
};

class BuiltinControllers;

class LocalWorkloads {
 public:
  LocalWorkloads(std::unique_ptr<BuiltinControllers> controllers, std::unique_ptr<Kubelet> kubelet);
  ~LocalWorkloads();  // Stop()
  void Stop();
  Kubelet& kubelet() { return *kubelet_; }

 private:
  std::unique_ptr<BuiltinControllers> controllers_;
  std::unique_ptr<Kubelet> kubelet_;
};

StatusOr<std::unique_ptr<LocalWorkloads>> StartLocalWorkloads(Store& store, const LocalWorkloadsOptions& options);

}  // namespace mf::local
