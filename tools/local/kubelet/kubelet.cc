#include "tools/local/kubelet/kubelet.h"

#include <algorithm>

#include "common/logging.h"
#include "tools/local/controllers/controller_loop.h"
#include "tools/local/controllers/resources.h"
#include "tools/local/kubelet/hosts_file.h"
#include "tools/local/kubelet/pod_paths.h"

namespace mf::local {

Kubelet::Kubelet(Store* store, KubeletOptions options) : store_(store), options_(std::move(options)) {}

Kubelet::~Kubelet() { Stop(); }

Status Kubelet::Start() {
  if (options_.data_dir.empty()) return InvalidArgument("the kubelet needs a data directory");
  MF_RETURN_IF_ERROR(WriteFileIfChanged(PythonResolverDirectory(options_.data_dir) / "sitecustomize.py",
                                        PythonResolverSource()));
  MF_RETURN_IF_ERROR(RegisterNode());
  WatchOptions watch;
  watch.send_initial_events = false;
  watch.resource_version = store_->CurrentResourceVersion();
  MF_ASSIGN_OR_RETURN(pod_watch_, store_->Watch(resources::kPods, "", watch));
  thread_ = std::thread([this] { Loop(); });
  log::Info("local kubelet started", {{"node", options_.node_name}, {"data_dir", options_.data_dir.string()}});
  return Status::Ok();
}

void Kubelet::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (pod_watch_) pod_watch_->Stop();
  if (thread_.joinable()) thread_.join();
  proxy_.Apply({});  // close every Service listener
  std::map<std::string, std::unique_ptr<PodWorker>> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (auto& [uid, worker] : workers) worker->RequestShutdown();  // all pods stop in parallel
  workers.clear();                                                  // and each is waited for
}

std::vector<pid_t> Kubelet::PidsOf(const std::string& ns, const std::string& name) const {
  std::lock_guard lock(mu_);
  for (const auto& [uid, key] : worker_keys_) {
    auto it = workers_.find(uid);
    if (key == ns + "/" + name && it != workers_.end()) return it->second->RunningPids();
  }
  return {};
}

Status Kubelet::RegisterNode() {
  if (!store_->FindType(resources::kNodes)) return Status::Ok();
  if (store_->Get({resources::kNodes, "", options_.node_name}).ok()) return Status::Ok();
  std::string now = FormatTime(Clock::now());
  Json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata",
       {{"name", options_.node_name},
        {"labels", {{"kubernetes.io/hostname", options_.node_name}, {"kubernetes.io/os", "linux"}}}}},
      {"status",
       {{"addresses", Json::array({{{"type", "InternalIP"}, {"address", options_.host_ip}},
                                   {{"type", "Hostname"}, {"address", options_.node_name}}})},
        {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}, {"reason", "KubeletReady"},
                                     {"message", "modelfleet-local kubelet is posting ready status"},
                                     {"lastHeartbeatTime", now}, {"lastTransitionTime", now}}})},
        {"nodeInfo", {{"kubeletVersion", "v1.32.0-modelfleet-local"}, {"operatingSystem", "linux"}}}}}};
  auto created = store_->Create(resources::kNodes, "", node);
  if (!created.ok() && created.status().code() != StatusCode::kAlreadyExists) {
    return created.status().WithContext("registering node " + options_.node_name);
  }
  if (created.ok()) {
    // The status subresource ignores status on create: write it separately.
    auto with_status = store_->GuaranteedUpdate(
        {resources::kNodes, "", options_.node_name}, Subresource::kStatus,
        [&](const Json& current) -> StatusOr<Json> {
          Json updated = current;
          updated["status"] = node["status"];
          return updated;
        });
    if (!with_status.ok()) return with_status.status().WithContext("writing node status");
  }
  return Status::Ok();
}

void Kubelet::Loop() {
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    for (auto [what, step] : {std::pair<const char*, void (Kubelet::*)()>{"pods", &Kubelet::SyncPods},
                              {"services", &Kubelet::SyncNetworking}}) {
      Status s = CatchMalformed(std::string("kubelet sync of ") + what, [&] {
        (this->*step)();
        return Status::Ok();
      });
      if (!s.ok()) log::Warning("kubelet sync failed", {{"error", s.message()}});
    }
    // Sleep until a pod changes, or 200 ms: Services and Endpoints are polled at that pace.
    if (pod_watch_->done()) {
      WatchOptions watch;
      watch.send_initial_events = false;
      watch.resource_version = store_->CurrentResourceVersion();
      auto renewed = store_->Watch(resources::kPods, "", watch);
      if (renewed.ok()) pod_watch_ = *renewed;
    }
    if (pod_watch_->Next(std::chrono::milliseconds(200))) {
      while (pod_watch_->Next(std::chrono::milliseconds(0))) {
      }
    }
  }
}

void Kubelet::Bind(const Json& pod) {
  auto bound = store_->GuaranteedUpdate(
      {resources::kPods, NamespaceOf(pod), NameOf(pod)}, Subresource::kMain,
      [&](const Json& current) -> StatusOr<Json> {
        if (Uid(current) != Uid(pod)) return Aborted("the pod was replaced");
        if (!StringAt(current, {"spec", "nodeName"}).empty() || IsBeingDeleted(current)) {
          return current;
        }
        Json updated = current;
        updated["spec"]["nodeName"] = options_.node_name;
        Json finalizers = current["metadata"].value("finalizers", Json::array());
        if (std::find(finalizers.begin(), finalizers.end(), kKubeletFinalizer) == finalizers.end()) {
          finalizers.push_back(kKubeletFinalizer);
        }
        updated["metadata"]["finalizers"] = finalizers;
        return updated;
      });
  if (!bound.ok()) {
    log::Warning("cannot bind pod to the local node", {{"pod", NamespaceOf(pod) + "/" + NameOf(pod)},
                                                       {"error", bound.status().message()}});
  }
}

void Kubelet::SyncPods() {
  auto pods = store_->List(resources::kPods, "");
  if (!pods.ok()) {
    log::Warning("kubelet cannot list pods", {{"error", pods.status().message()}});
    return;
  }
  std::map<std::string, const Json*> ours;  // by uid
  for (const Json& pod : pods->items) {
    std::string node = StringAt(pod, {"spec", "nodeName"});
    if (node.empty() && !IsBeingDeleted(pod)) {
      Bind(pod);  // the next pass (woken by the watch) runs it
      continue;
    }
    if (node != options_.node_name) continue;
    ours[Uid(pod)] = &pod;
  }
  std::lock_guard lock(mu_);
  for (auto it = workers_.begin(); it != workers_.end();) {
    auto found = ours.find(it->first);
    if (found == ours.end()) {
      it->second->PodRemoved();
    } else {
      it->second->Update(*found->second);
    }
    if (it->second->finished()) {
      worker_keys_.erase(it->first);
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [uid, pod] : ours) {
    if (workers_.count(uid)) continue;
    const std::string phase = StringAt(*pod, {"status", "phase"});
    bool has_finalizer = false;
    for (const Json& f : ObjectAt(*pod, {"metadata"}).value("finalizers", Json::array())) {
      has_finalizer = has_finalizer || f == kKubeletFinalizer;
    }
    // A finished pod is not run again; a terminating one only needs its finalizer released.
    if ((phase == "Succeeded" || phase == "Failed") && !IsBeingDeleted(*pod)) continue;
    if (IsBeingDeleted(*pod) && !has_finalizer) continue;
    workers_[uid] = std::make_unique<PodWorker>(store_, &options_, &ips_, *pod);
    worker_keys_[uid] = NamespaceOf(*pod) + "/" + NameOf(*pod);
  }
}

void Kubelet::SyncNetworking() {
  if (!store_->FindType(resources::kEndpoints)) return;
  auto endpoints = store_->List(resources::kEndpoints, "");
  if (!endpoints.ok()) return;
  std::vector<Json> services;
  if (store_->FindType(resources::kServices)) {
    auto listed = store_->List(resources::kServices, "");
    if (!listed.ok()) return;
    services = std::move(listed->items);
  }
  std::map<std::string, std::string> vips;
  for (const Json& svc : services) {
    if (!IsProxiedService(svc)) continue;
    const std::string key = NamespaceOf(svc) + "/" + NameOf(svc);
    std::string vip = proxy_.VipFor(key, StringAt(svc, {"spec", "clusterIP"}));
    if (!vip.empty()) vips[key] = vip;
  }
  for (const auto& [key, vip] : known_vips_) {
    if (!vips.count(key)) proxy_.Forget(key);
  }
  known_vips_ = vips;
  std::vector<std::string> errors = proxy_.Apply(PlanServiceProxy(services, endpoints->items, vips));
  std::set<std::string> error_set(errors.begin(), errors.end());
  for (const std::string& e : error_set) {
    if (!proxy_errors_.count(e)) log::Warning("cannot open a Service proxy listener", {{"listener", e}});
  }
  proxy_errors_ = std::move(error_set);

  // A LoadBalancer Service's ingress is its VIP: reachable from the host, like `minikube tunnel`.
  for (const Json& svc : services) {
    const std::string key = NamespaceOf(svc) + "/" + NameOf(svc);
    if (StringAt(svc, {"spec", "type"}) != "LoadBalancer" || !vips.count(key)) continue;
    Json status = ObjectAt(svc, {"status"});
    status["loadBalancer"] = {{"ingress", Json::array({{{"ip", vips[key]}}})}};
    Status s = UpdateStatusIfChanged(store_, resources::kServices, svc, status);
    if (!s.ok()) log::Warning("cannot write LoadBalancer status", {{"service", key}, {"error", s.message()}});
  }

  std::set<std::string> namespaces;
  for (const Json& ep : endpoints->items) namespaces.insert(NamespaceOf(ep));
  for (const Json& svc : services) namespaces.insert(NamespaceOf(svc));
  {
    std::lock_guard lock(mu_);
    for (const auto& [uid, key] : worker_keys_) namespaces.insert(key.substr(0, key.find('/')));
  }
  for (const std::string& ns : namespaces) {
    Status s = WriteFileIfChanged(HostsFilePath(options_.data_dir, ns), BuildHostsFile(ns, endpoints->items, vips));
    if (!s.ok()) log::Warning("cannot write hosts file", {{"error", s.message()}});
  }
}

}  // namespace mf::local
