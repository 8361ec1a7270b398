// Simulated pods, as kwok runs them, for benchmarks of the control plane, the operator and the
// router at scale (~15,000 pods on one machine): a pod bound to the node is not run; it goes
// straight to Running with a pod IP and every container running and ready (init containers
// Completed), and a pod being deleted is deleted for good (grace period 0) at once.
//
// No thread per pod: the pod informer feeds a work queue of "ns/name" keys that a few workers
// drain. A reconcile is idempotent and reads only the informer's cache: it writes a status only
// when the stored one differs from the simulated one (which is stable: times come from the
// stored startTime), so a pod costs one status patch and, at the end, one delete.
#pragma once

#include <memory>
#include <string>

#include "k8s/client.h"
#include "k8s/informer.h"
#include "k8s/work_queue.h"
#include "tools/local/kubelet/pod_ip_allocator.h"
#include "tools/local/kubelet/pod_status.h"

namespace mf::local {

// The Node's pods, CPU (cores), memory and ephemeral storage (GiB) when it simulates them, and
// its nvidia.com/gpu unless configured: nothing runs, so only addresses (65,000-odd) bound them.
inline constexpr int64_t kSimulatedNodePods = 30000;

// The status of a simulated pod (pure): Running, the given IPs, every container running, started
// and ready since the pod's startTime (`now` when it has none).
Json SimulatedPodStatus(const Json& pod, const std::string& pod_ip, const std::string& host_ip, Clock::time_point now);

class SimulatedPods {
 public:
  // `pods` is the informer of the pods bound to the node; handlers are added here, so this is
  // constructed before pods->Start().
  SimulatedPods(k8s::Client* client, k8s::Informer* pods, PodIpAllocator* ips, std::string node_ip, int workers);
  ~SimulatedPods();  // stops the workers
  SimulatedPods(const SimulatedPods&) = delete;
  SimulatedPods& operator=(const SimulatedPods&) = delete;

 private:
  k8s::ReconcileResult Reconcile(const std::string& key);

  k8s::Client* const client_;
  k8s::Informer* const pods_;
  PodIpAllocator* const ips_;
  const std::string node_ip_;
  k8s::WorkQueue queue_;
  std::unique_ptr<k8s::WorkerPool> workers_;
};

}  // namespace mf::local
