#include "tools/local/kubelet/pod_status.h"

namespace mf::local {

using State = ContainerRuntimeState::State;

bool InitContainersDone(const std::vector<ContainerRuntimeState>& init_containers) {
  for (const auto& c : init_containers) {
    if (c.state != State::kTerminated || c.exit_code != 0) return false;
  }
  return true;
}

std::string PodPhase(const std::string& restart_policy, const std::vector<ContainerRuntimeState>& init_containers,
                     const std::vector<ContainerRuntimeState>& containers) {
  if (!InitContainersDone(init_containers)) {
    for (const auto& c : init_containers) {
      if (restart_policy == "Never" && c.state == State::kTerminated && c.exit_code != 0) return "Failed";
    }
    return "Pending";
  }
  int never_started = 0, running = 0, restarting = 0, succeeded = 0, failed = 0;
  for (const auto& c : containers) {
    switch (c.state) {
      case State::kWaiting:
        // A container waiting to be restarted has run before: the pod is Running (CrashLoopBackOff).
        (c.last_state.contains("terminated") ? restarting : never_started)++;
        break;
      case State::kRunning:
        running++;
        break;
      case State::kTerminated:
        (c.exit_code == 0 ? succeeded : failed)++;
        break;
    }
  }
  if (never_started > 0) return "Pending";
  if (running > 0 || restarting > 0) return "Running";
  if (containers.empty()) return "Pending";
  // Every container has terminated.
  if (restart_policy == "Always") return "Running";  // they will be restarted
  if (failed == 0) return "Succeeded";
  if (restart_policy == "OnFailure") return "Running";
  return "Failed";
}

Json ContainerStateJson(const ContainerRuntimeState& c) {
  switch (c.state) {
    case State::kRunning:
      return {{"running", {{"startedAt", c.started_at}}}};
    case State::kTerminated: {
      Json t = {{"exitCode", c.exit_code},
                {"reason", c.reason},
                {"startedAt", c.started_at},
                {"finishedAt", c.finished_at},
                {"containerID", c.container_id}};
      if (!c.message.empty()) t["message"] = c.message;
      return {{"terminated", t}};
    }
    case State::kWaiting:
      break;
  }
  Json w = {{"reason", c.reason}};
  if (!c.message.empty()) w["message"] = c.message;
  return {{"waiting", w}};
}

Json BuildPodStatus(const Json& pod, const PodRuntimeInfo& info, Clock::time_point now) {
  const Json& spec = ObjectAt(pod, {"spec"});
  Json status = ObjectAt(pod, {"status"});
  status["phase"] = PodPhase(StringAt(spec, {"restartPolicy"}, "Always"), info.init_containers, info.containers);
  if (!info.host_ip.empty()) {
    status["hostIP"] = info.host_ip;
    status["hostIPs"] = Json::array({{{"ip", info.host_ip}}});
  }
  if (!info.pod_ip.empty()) {
    status["podIP"] = info.pod_ip;
    status["podIPs"] = Json::array({{{"ip", info.pod_ip}}});
  }
  if (!info.start_time.empty()) status["startTime"] = info.start_time;
  status["qosClass"] = status.value("qosClass", "BestEffort");

  std::map<std::string, std::string> images;
  for (const char* list : {"initContainers", "containers"}) {
    if (auto cs = spec.find(list); cs != spec.end() && cs->is_array()) {
      for (const Json& c : *cs) images[StringAt(c, {"name"})] = StringAt(c, {"image"});
    }
  }
  auto statuses = [&](const std::vector<ContainerRuntimeState>& containers) {
    Json out = Json::array();
    for (const auto& c : containers) {
      Json s = {{"name", c.name},
                {"image", images[c.name]},
                {"imageID", ""},
                {"ready", c.ready},
                {"started", c.state == State::kRunning && c.started},
                {"restartCount", c.restart_count},
                {"state", ContainerStateJson(c)},
                {"lastState", c.last_state}};
      if (!c.container_id.empty()) s["containerID"] = c.container_id;
      out.push_back(std::move(s));
    }
    return out;
  };
  bool all_ready = !info.containers.empty();
  for (const auto& c : info.containers) all_ready = all_ready && c.ready;
  status["containerStatuses"] = statuses(info.containers);
  if (!info.init_containers.empty()) {
    status["initContainerStatuses"] = statuses(info.init_containers);
  } else {
    status.erase("initContainerStatuses");
  }
  const bool initialized = InitContainersDone(info.init_containers);

  Json conditions = status.value("conditions", Json::array());
  SetCondition(conditions, "PodScheduled", true, "", "", now);
  SetCondition(conditions, "Initialized", initialized, initialized ? "" : "ContainersNotInitialized", "", now);
  std::string not_ready_reason = status["phase"] == "Succeeded" ? "PodCompleted" : "ContainersNotReady";
  SetCondition(conditions, "ContainersReady", all_ready, all_ready ? "" : not_ready_reason, "", now);
  SetCondition(conditions, "Ready", all_ready, all_ready ? "" : not_ready_reason, "", now);
  // Kubernetes omits empty reason/message; SetCondition writes them as given.
  for (Json& c : conditions) {
    if (c.value("reason", "").empty()) c.erase("reason");
    if (c.value("message", "").empty()) c.erase("message");
  }
  status["conditions"] = std::move(conditions);
  return status;
}

}  // namespace mf::local
