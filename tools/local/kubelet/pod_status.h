// A pod's .status as a pure function of what the kubelet knows about its containers: phase
// (Pending / Running / Succeeded / Failed, by Kubernetes' rules for each restartPolicy),
// initContainerStatuses, containerStatuses (state, lastState, restartCount, ready, started), conditions (PodScheduled,
// Initialized, ContainersReady, Ready) and podIP / hostIP / startTime.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tools/local/kubelet/object_fields.h"

namespace mf::local {

struct ContainerRuntimeState {
  enum class State { kWaiting, kRunning, kTerminated };
  std::string name;
  State state = State::kWaiting;
  std::string reason;  // waiting: ContainerCreating, CrashLoopBackOff, ...; terminated: Completed, Error
  std::string message;
  int exit_code = 0;
  std::string started_at;  // RFC 3339
  std::string finished_at;
  int restart_count = 0;
  bool ready = false;
  bool started = false;              // running and past its startup probe (if any)
  std::string container_id;          // "local://<pid>"
  Json last_state = Json::object();  // {"terminated": {...}} after the first exit
};

struct PodRuntimeInfo {
  std::string pod_ip;
  std::string host_ip;
  std::string start_time;
  std::vector<ContainerRuntimeState> init_containers;  // in spec order; run one by one first
  std::vector<ContainerRuntimeState> containers;       // in spec order
};

// Init containers are done when each has exited 0.
bool InitContainersDone(const std::vector<ContainerRuntimeState>& init_containers);

// "Pending" | "Running" | "Succeeded" | "Failed". While init containers run the pod is Pending,
// unless one failed under restartPolicy Never, which fails the pod.
std::string PodPhase(const std::string& restart_policy, const std::vector<ContainerRuntimeState>& init_containers,
                     const std::vector<ContainerRuntimeState>& containers);

// The full status to store; conditions keep their lastTransitionTime while unchanged.
Json BuildPodStatus(const Json& pod, const PodRuntimeInfo& info, Clock::time_point now);

// {"terminated": {...}} / {"running": {...}} / {"waiting": {...}} for one container.
Json ContainerStateJson(const ContainerRuntimeState& c);

}  // namespace mf::local
