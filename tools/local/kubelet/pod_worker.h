// Runs one pod's containers as local processes, on its own thread (like the kubelet's pod
// workers), so a slow probe or a long termination grace period never delays other pods.
//
// Each pass: prepare the pod (IP, volumes) once; run init containers one by one to success;
// start containers that should run (restart policy + CrashLoopBackOff); reap exits; run due probes (a failed liveness probe restarts the
// container); write the pod status when it changed. On deletion (deletionTimestamp, or the pod
// vanished) every container's process group gets SIGTERM, then SIGKILL after the grace period,
// and the kubelet's finalizer is removed so the store can drop the pod.
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

#include "tools/local/kubelet/image_map.h"
#include "tools/local/kubelet/pod_ip_allocator.h"
#include "tools/local/kubelet/pod_status.h"
#include "tools/local/kubelet/probe.h"
#include "tools/local/kubelet/restart_backoff.h"
#include "tools/local/kubelet/volumes.h"
#include "tools/local/store/store.h"

namespace mf::local {

inline constexpr std::string_view kKubeletFinalizer = "modelfleet.io/local-kubelet";

struct KubeletOptions {
  std::filesystem::path data_dir;      // pod directories, logs, hosts files live here
  std::string node_name = "local";
  std::string host_ip = "127.0.0.1";
  ImageMap images;
  BackoffPolicy backoff;
  // Added to every container's environment before its own env (e.g. KUBECONFIG for operators).
  EnvList extra_env;
  // How often each pod worker checks its processes when nothing else wakes it.
  std::chrono::milliseconds pod_sync_interval{100};
};

class PodWorker {
 public:
  PodWorker(Store* store, const KubeletOptions* options, PodIpAllocator* ips, Json pod);
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

 private:
  struct Container {
    Json spec;
    ContainerRuntimeState state;
    std::optional<pid_t> pid;
    std::chrono::steady_clock::time_point started;
    RestartBackoff backoff;
    std::optional<ProbeTracker> startup, liveness, readiness;
    SpawnSpec spawn;  // what the last start used: exec probes run with the same env and cwd
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
  std::optional<Json> Lookup(std::string_view resource, std::string_view name) const;

  Store* const store_;
  const KubeletOptions* const options_;
  PodIpAllocator* const ips_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  Json latest_;               // guarded by mu_
  bool removed_ = false;      // guarded by mu_
  bool shutdown_ = false;     // guarded by mu_
  std::vector<pid_t> running_pids_;  // guarded by mu_, refreshed after every pass
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
