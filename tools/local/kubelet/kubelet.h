// The local kubelet: runs the pods scheduled to this machine as local processes.
//
// One sync thread lists pods (woken early by a pod watch): a pod with no node is bound to this
// node (spec.nodeName, PodScheduled) and gets the kubelet's finalizer, so deleting it waits until
// its processes are gone; each pod of this node gets a PodWorker (pod_worker.h); pods that left
// the store or were replaced have their workers stopped. It also keeps the per-namespace hosts
// files (hosts_file.h) and the Service proxy (service_proxy.h) in step with Services and
// Endpoints, writes LoadBalancer Services' ingress IP (their VIP, reachable from the host), and
// registers Node "local" when nodes are served.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tools/local/kubelet/pod_worker.h"
#include "tools/local/kubelet/service_proxy.h"

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
  // Service VIPs and proxy listeners, LoadBalancer ingress, and the hosts files.
  void SyncNetworking();
  Status RegisterNode();
  void Bind(const Json& pod);

  Store* const store_;
  const KubeletOptions options_;
  PodIpAllocator ips_;
  ServiceProxy proxy_;                     // used by the sync thread only
  std::set<std::string> proxy_errors_;     // last reported, to log each failure once
  std::map<std::string, std::string> known_vips_;  // "ns/name" -> VIP, as last applied

  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<PodWorker>> workers_;  // by pod uid
  std::map<std::string, std::string> worker_keys_;             // uid -> "ns/name"
  bool stopping_ = false;
  std::shared_ptr<Watcher> pod_watch_;
  std::thread thread_;
};

}  // namespace mf::local
