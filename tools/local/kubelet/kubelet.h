// The node agent: a kubelet that runs the pods bound to its Node as local processes, talking to
// the real kube-apiserver as user system:node:<name> (group system:nodes), so the Node
// authorizer and NodeRestriction admission hold it to what a kubelet may do.
//
// It registers the Node (capacity, including configured extended resources such as
// nvidia.com/gpu, and the kubelet API port in daemonEndpoints), renews its Lease in
// kube-node-lease and its Ready condition every 10 s; informers watch the pods bound to it
// (fieldSelector spec.nodeName) and, as kube-proxy does, every Service and Endpoints object.
// Each pod of this node gets a PodWorker (pod_worker.h); a pod being deleted is stopped and then
// deleted for good (grace period 0), as the kubelet does. With simulate_pods no pod runs:
// SimulatedPods (simulated_pods.h) reports them Running and Ready instead, as kwok does.
// Services are proxied on their cluster IPs (service_proxy.h); a LoadBalancer Service also gets
// a listener on a 127.0.0.x address of the host (through the host socket broker) written to its
// status, as `minikube tunnel` does.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "k8s/client.h"
#include "k8s/informer.h"
#include "tools/local/kubelet/pod_worker.h"
#include "tools/local/kubelet/service_proxy.h"
#include "tools/local/kubelet/simulated_pods.h"
#include "tools/local/kubelet_api/kubelet_api_server.h"

namespace mf::local {

class Kubelet {
 public:
  Kubelet(k8s::Client* client, KubeletOptions options);
  ~Kubelet();  // Stop()
  Kubelet(const Kubelet&) = delete;
  Kubelet& operator=(const Kubelet&) = delete;

  Status Start();
  // Stops every container (SIGTERM, then SIGKILL after its grace period) and the sync thread.
  // Pods stay in the API; a later node agent restarts them. Idempotent.
  void Stop();

 private:
  void Loop(std::stop_token stop);
  void SyncPods();
  // Service proxy listeners, LoadBalancer ingress, and the hosts files.
  bool SyncNetworking();  // true: something failed or was not ready, to be tried again
  Status RegisterNode();
  void Heartbeat();
  k8s::Json NodeObject() const;
  void Wake(bool network);  // network: a Service or Endpoints changed, else a pod
  // The kubelet API (logs, exec, port-forward) over the pods this agent runs.
  Status StartApiServer();
  // The running container "ns/pod" + name, for exec; NotFound / FailedPrecondition otherwise.
  StatusOr<RunningContainer> FindRunning(const std::string& ns, const std::string& pod,
                                         const std::string& container) const;

  k8s::Client* const client_;
  const KubeletOptions options_;
  PodIpAllocator ips_;
  GpuAllocator gpus_;
  ServiceProxy proxy_;                           // used by the sync thread only
  std::set<std::string> proxy_errors_;           // last reported, to log each failure once
  std::map<std::string, std::string> host_ips_;  // LoadBalancer "ns/name" -> 127.0.0.x
  // Host addresses another program (another local cluster) held when we tried them, and when:
  // skipped for a minute so each LoadBalancer moves on to a free address.
  std::map<std::string, std::chrono::steady_clock::time_point> busy_host_ips_;
  std::unique_ptr<k8s::Informer> pods_, services_, endpoints_;
  std::unique_ptr<SimulatedPods> simulated_;  // with options_.simulate_pods, instead of pod workers

  mutable std::mutex mu_;
  std::condition_variable_any wake_;
  bool dirty_ = true;  // anything changed
  // Services or Endpoints changed. Each sync of the Service proxy reads all of them (15,000 of
  // each at 5,000 ModelDeployments), so, like kube-proxy's minSyncPeriod, syncs are spaced by
  // twice the last one's duration (at least 100 ms).
  bool network_dirty_ = true;
  std::chrono::steady_clock::time_point next_network_sync_;
  std::map<std::string, std::unique_ptr<PodWorker>> workers_;  // by pod uid
  std::map<std::string, std::string> uid_by_key_;              // "ns/name" -> uid of its worker
  std::unique_ptr<KubeletApiServer> api_server_;
  std::chrono::steady_clock::time_point next_heartbeat_;
  bool stopped_ = false;
  std::jthread thread_;
};

}  // namespace mf::local
