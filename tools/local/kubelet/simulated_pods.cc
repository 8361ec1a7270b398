#include "tools/local/kubelet/simulated_pods.h"

#include "common/logging.h"
#include "k8s/resource.h"

namespace mf::local {

using State = ContainerRuntimeState::State;

Json SimulatedPodStatus(const Json& pod, const std::string& pod_ip, const std::string& host_ip, Clock::time_point now) {
  const std::string start_time = StringAt(pod, {"status", "startTime"}, FormatTime(now));
  PodRuntimeInfo info{
      .pod_ip = pod_ip, .host_ip = host_ip, .start_time = start_time, .init_containers = {}, .containers = {}};
  auto simulated = [&](const Json& spec, State state) {
    ContainerRuntimeState c;
    c.name = StringAt(spec, {"name"});
    c.state = state;
    c.reason = state == State::kTerminated ? "Completed" : "";
    c.started_at = start_time;
    c.finished_at = start_time;
    c.ready = c.started = state == State::kRunning;
    c.container_id = "simulated://" + Uid(pod) + "/" + c.name;
    return c;
  };
  const Json& spec = ObjectAt(pod, {"spec"});
  for (const Json& c : spec.value("initContainers", Json::array())) {
    info.init_containers.push_back(simulated(c, State::kTerminated));
  }
  for (const Json& c : spec.value("containers", Json::array())) {
    info.containers.push_back(simulated(c, State::kRunning));
  }
  return BuildPodStatus(pod, info, now);
}

SimulatedPods::SimulatedPods(k8s::Client* client, k8s::Informer* pods, PodIpAllocator* ips, std::string node_ip,
                             int workers)
    : client_(client),
      pods_(pods),
      ips_(ips),
      node_ip_(std::move(node_ip)),
      // Retries of failed writes (429s under load) back off per pod, and all together at most
      // 50 per second, so an overloaded API server is not flooded with retries.
      queue_(k8s::ItemRateLimiter::Options{
          .base = std::chrono::milliseconds(50), .cap = std::chrono::seconds(30), .qps = 50, .burst = 200}) {
  auto enqueue = [this](const k8s::ObjectPtr& pod) { queue_.Add(k8s::ObjectKey(*pod)); };
  pods_->AddEventHandlers({.on_add = enqueue,
                           .on_update = [enqueue](const k8s::ObjectPtr&, const k8s::ObjectPtr& pod) { enqueue(pod); },
                           .on_delete = enqueue});
  workers_ =
      std::make_unique<k8s::WorkerPool>(queue_, workers, [this](const std::string& key) { return Reconcile(key); });
}

SimulatedPods::~SimulatedPods() { workers_.reset(); }

k8s::ReconcileResult SimulatedPods::Reconcile(const std::string& key) {
  k8s::ObjectPtr pod = pods_->store().Get(key);
  if (!pod) {
    ips_->Release(key);
    return {};
  }
  Status status = CatchMalformed("simulated pod " + key, [&]() -> Status {
    if (IsBeingDeleted(*pod)) {
      // Nothing runs, so nothing to wait for: the final delete, as the kubelet's after its
      // containers stopped. The uid makes it miss a pod recreated under the same name.
      Status removed = client_->Delete({k8s::resources::Pods(), NamespaceOf(*pod), NameOf(*pod), ""}, Uid(*pod), 0);
      if (removed.ok() || removed.code() == StatusCode::kNotFound ||
          removed.code() == StatusCode::kFailedPrecondition || removed.code() == StatusCode::kAborted) {
        ips_->Release(key);
        return Status::Ok();
      }
      return removed.WithContext("deleting simulated pod " + key);
    }
    std::string ip = StringAt(*pod, {"status", "podIP"});
    if (ip.empty() || !ips_->Claim(key, ip)) {
      auto allocated = ips_->Allocate(key);
      if (!allocated) return ResourceExhausted("no free pod address for simulated pod " + key);
      ip = *allocated;
    }
    Json status = SimulatedPodStatus(*pod, ip, node_ip_, Clock::now());
    if (status == ObjectAt(*pod, {"status"})) return Status::Ok();
    Json patch = {{"metadata", {{"uid", Uid(*pod)}}}, {"status", status}};
    auto written = client_->Patch({k8s::resources::Pods(), NamespaceOf(*pod), NameOf(*pod), "status"},
                                  k8s::PatchType::kStrategicMerge, patch);
    if (written.ok() || written.status().code() == StatusCode::kNotFound) return Status::Ok();
    return written.status().WithContext("writing the status of simulated pod " + key);
  });
  return {.status = status};
}

}  // namespace mf::local
