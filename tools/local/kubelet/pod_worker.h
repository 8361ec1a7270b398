// Runs one pod's containers as local processes, on its own thread (like the kubelet's pod
// workers), so a slow probe or a long termination grace period never delays other pods.
//
// Each pass: prepare the pod (IP, volumes) once; run init containers one by one to success;
// start containers that should run (restart policy + CrashLoopBackOff); reap exits; run due probes (a failed liveness
// probe restarts the container); write the pod status when it changed. On deletion (deletionTimestamp, or the pod
// vanished) every container's process group gets SIGTERM, then SIGKILL after the grace period,
// and the pod is then deleted for good (grace period 0), as the kubelet does.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "k8s/client.h"
#include "tools/local/kubelet/gpu_devices.h"
#include "tools/local/kubelet/image_map.h"
#include "tools/local/kubelet/pod_ip_allocator.h"
#include "tools/local/kubelet/pod_status.h"
#include "tools/local/kubelet/probe.h"
#include "tools/local/kubelet/restart_backoff.h"
#include "tools/local/kubelet/volumes.h"

namespace mf::local {

struct KubeletOptions {
  std::filesystem::path data_dir;  // pod directories, logs, hosts files live here
  std::string node_name = "local";
  std::string node_ip = "10.244.0.1";        // the Node's InternalIP and every pod's hostIP
  std::string pod_ip_base = "10.244.1.1";    // pods get addresses from here upward
  std::string api_service_ip = "10.96.0.1";  // the `kubernetes` Service (KUBERNETES_SERVICE_HOST)
  uint16_t kubelet_port = 10250;             // the kubelet API (logs, exec, port-forward)
  std::string kubelet_version = "v1.37.2";
  // In the Node's capacity, e.g. nvidia.com/gpu: 4 (also how many GPU indices there are to assign).
  std::map<std::string, int64_t> extended_resources;
  std::filesystem::path host_broker;  // host_sockets.h: listeners for LoadBalancer Services
  std::filesystem::path pki_dir;      // ca.crt and kubelet.crt/.key for the kubelet API
  ImageMap images;
  BackoffPolicy backoff;
  // Added to every container's environment before its own env (e.g. KUBECONFIG for operators).
  EnvList extra_env;
  // Pods are not run but simulated as kwok does (simulated_pods.h), for benchmarks at scale.
  bool simulate_pods = false;
  // How often each pod worker checks its processes when nothing else wakes it.
  std::chrono::milliseconds pod_sync_interval{100};
};

// What `kubectl exec` needs of a running container: its environment, working directory and
// volume mounts (paths in the command are rewritten as the container's own were).
struct RunningContainer {
  EnvList env;
  std::filesystem::path working_dir;
  MountTable mounts;
};

class PodWorker {
 public:
  PodWorker(k8s::Client* client, const KubeletOptions* options, PodIpAllocator* ips, GpuAllocator* gpus, Json pod);
  ~PodWorker();  // stops the containers (as on kubelet shutdown) and joins
  PodWorker(const PodWorker&) = delete;
  PodWorker& operator=(const PodWorker&) = delete;

  // The newest version of the pod, from the kubelet's sync loop.
  void Update(Json pod);
  // The pod left the store: stop everything; the worker then finishes.
  void PodRemoved();
  // Starts stopping the containers (kubelet shutdown) without waiting; the destructor waits.
  // Lets the kubelet stop every pod in parallel instead of one grace period after another.
  void RequestShutdown();
  bool finished() const { return finished_; }
  // Process group ids of running containers (for tests checking the process table).
  std::vector<pid_t> RunningPids() const;
  // The kubelet API's view (thread-safe, refreshed after every pass): a running container by
  // name, and the pod's IP ("" before it has one).
  std::optional<RunningContainer> Running(const std::string& container) const;
  std::string PodIp() const;

 private:
  struct Container {
    Json spec;
    ContainerRuntimeState state;
    std::optional<pid_t> pid;
    std::chrono::steady_clock::time_point started;
    RestartBackoff backoff;
    std::optional<ProbeTracker> startup, liveness, readiness;
    SpawnSpec spawn;  // what the last start used: exec probes run with the same env and cwd
    std::optional<MountTable> mounts;
    bool finished_for_good = false;  // restartPolicy says it stays terminated
  };

  void Run();
  Container NewContainer(const Json& spec, std::string waiting_reason) const;
  void SyncContainers(const Json& pod);
  // Reaps, probes, or (re)starts one container as its restart policy and back-off allow.
  void SyncContainer(const Json& pod, Container& c, const std::string& policy);
  void StartContainer(const Json& pod, Container& c);
  void OnExit(const Json& pod, Container& c, int exit_code, std::string reason, std::string message);
  void RunProbes(const Json& pod, Container& c);
  Status Prepare(const Json& pod);
  void StopAll(std::chrono::milliseconds grace);
  void WriteStatus(const Json& pod);
  void Terminate(const Json& pod, bool pod_exists);
  // ConfigMaps and Secrets of the pod's namespace, and ("serviceaccounttoken", name) a token
  // bound to this pod from the TokenRequest API.
  std::optional<Json> Lookup(std::string_view resource, std::string_view name) const;

  k8s::Client* const client_;
  const KubeletOptions* const options_;
  PodIpAllocator* const ips_;
  GpuAllocator* const gpus_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  Json latest_;                                      // guarded by mu_
  bool removed_ = false;                             // guarded by mu_
  bool shutdown_ = false;                            // guarded by mu_
  std::vector<pid_t> running_pids_;                  // guarded by mu_, refreshed after every pass
  std::map<std::string, RunningContainer> running_;  // guarded by mu_, likewise
  std::string published_ip_;                         // guarded by mu_
  std::atomic<bool> finished_{false};

  // Owned by the worker thread (RunningPids reads pids under mu_).
  std::vector<Container> init_containers_;
  std::vector<Container> containers_;
  bool prepared_ = false;
  std::string pod_ip_;
  std::string start_time_;
  VolumeDirs volumes_;
  Json last_status_;
  std::string last_error_;
  std::thread thread_;
};

}  // namespace mf::local
