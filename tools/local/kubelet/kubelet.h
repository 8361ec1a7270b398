// The local kubelet: runs the pods scheduled to this machine as local processes.
//
// One sync thread lists pods (woken early by a pod watch): a pod with no node is bound to this
// node (spec.nodeName, PodScheduled) and gets the kubelet's finalizer, so deleting it waits until
// its processes are gone; each pod of this node gets a PodWorker (pod_worker.h); pods that left
// the store or were replaced have their workers stopped. It also keeps the per-namespace hosts
// files (hosts_file.h) in step with Endpoints, and registers Node "local" when nodes are served.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tools/local/kubelet/pod_worker.h"

namespace mf::local {

class Kubelet {
 public:
  Kubelet(Store* store, KubeletOptions options);
  ~Kubelet();  // Stop()
  Kubelet(const Kubelet&) = delete;
  Kubelet& operator=(const Kubelet&) = delete;

  Status Start();
  // Stops every container (SIGTERM, then SIGKILL after its grace period) and the sync thread.
  // Pods stay in the store; a later kubelet restarts them. Idempotent.
  void Stop();

  // Running containers' process group ids of pod ns/name (tests check the process table).
  std::vector<pid_t> PidsOf(const std::string& ns, const std::string& name) const;

 private:
  void Loop();
  void SyncPods();
  void SyncHostsFiles();
  Status RegisterNode();
  void Bind(const Json& pod);

  Store* const store_;
  const KubeletOptions options_;
  PodIpAllocator ips_;

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<PodWorker>> workers_;  // by pod uid
  std::map<std::string, std::string> worker_keys_;             // uid -> "ns/name"
  bool stopping_ = false;
  std::shared_ptr<Watcher> pod_watch_, endpoints_watch_;
  std::thread thread_;
};

}  // namespace mf::local
