#include "tools/local/kubelet/kubelet.h"

#include <arpa/inet.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/logging.h"
#include "k8s/resource.h"
#include "tools/local/cluster/host_sockets.h"
#include "tools/local/cluster/pki.h"
#include "tools/local/kubelet/pod_paths.h"
#include "tools/local/kubelet/service_hosts.h"

namespace mf::local {
namespace {

using namespace std::chrono_literals;
namespace res = k8s::resources;

constexpr auto kHeartbeatInterval = 10s;
constexpr int64_t kLeaseDurationSeconds = 40;
constexpr char kFieldManager[] = "modelfleet-node-agent";
// Concurrent status writes of simulated pods (each worker has one request in flight).
constexpr int kSimulationWorkers = 8;

// metav1.MicroTime, as Lease.spec.renewTime needs.
std::string MicroTime(Clock::time_point t) {
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() % 1'000'000;
  std::string text = FormatTime(t);
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%06lld", static_cast<long long>(micros));
  return text.substr(0, text.size() - 1) + frac + "Z";
}

k8s::Json NodeConditions(const std::string& now) {
  auto condition = [&](const char* type, const char* status, const char* reason, const char* message) {
    return k8s::Json{
        {"type", type}, {"status", status}, {"reason", reason}, {"message", message}, {"lastHeartbeatTime", now}};
  };
  return k8s::Json::array(
      {condition("Ready", "True", "KubeletReady", "modelfleet-local node agent is posting ready status"),
       condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
       condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
       condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available")});
}

bool IsLoopbackHost(const std::string& ip) { return ip.rfind("127.", 0) == 0; }

}  // namespace

Kubelet::Kubelet(k8s::Client* client, KubeletOptions options)
    : client_(client),
      options_(std::move(options)),
      ips_(options_.pod_ip_base),
      gpus_(static_cast<int>(
          options_.extended_resources.count(kGpuResource) ? options_.extended_resources.at(kGpuResource) : 0)),
      proxy_([broker = options_.host_broker](const std::string& ip, uint16_t port) -> StatusOr<int> {
        if (IsLoopbackHost(ip)) return OpenHostListener(broker, ip, port);
        return OpenLocalListener(ip, port);
      }) {}

Kubelet::~Kubelet() { Stop(); }

k8s::Json Kubelet::NodeObject() const {
  const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const long long memory = static_cast<long long>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  // Pods are processes sharing this machine: CPU is offered 8-fold so typical requests schedule.
  k8s::Json capacity = {{"cpu", std::to_string(cores * 8)},
                        {"memory", std::to_string(memory / 1024) + "Ki"},
                        {"pods", "110"},
                        {"ephemeral-storage", "100Gi"}};
  if (options_.simulate_pods) {
    // Simulated pods use nothing: room for benchmarks with as many pods as addresses allow.
    capacity = {{"cpu", std::to_string(kSimulatedNodePods)},
                {"memory", std::to_string(kSimulatedNodePods) + "Gi"},
                {"pods", std::to_string(kSimulatedNodePods)},
                {"ephemeral-storage", std::to_string(kSimulatedNodePods) + "Gi"}};
  }
  for (const auto& [name, count] : options_.extended_resources) capacity[name] = std::to_string(count);
  utsname uts{};
  uname(&uts);
  const std::string now = FormatTime(Clock::now());
  return {{"apiVersion", "v1"},
          {"kind", "Node"},
          {"metadata",
           {{"name", options_.node_name},
            {"labels",
             {{"kubernetes.io/hostname", options_.node_name},
              {"kubernetes.io/os", "linux"},
              {"kubernetes.io/arch", "amd64"},
              // Pods here are processes in one network namespace: a port is bound once per node, so
              // the operator gives each task of a TrainingJob a port of its own.
              {"modelfleet.io/pod-network", "shared"}}}}},
          {"status",
           {{"capacity", capacity},
            {"allocatable", capacity},
            {"addresses", k8s::Json::array({{{"type", "InternalIP"}, {"address", options_.node_ip}},
                                            {{"type", "Hostname"}, {"address", options_.node_name}}})},
            {"daemonEndpoints", {{"kubeletEndpoint", {{"Port", options_.kubelet_port}}}}},
            {"conditions", NodeConditions(now)},
            {"nodeInfo",
             {{"machineID", "modelfleet-local"},
              {"systemUUID", "modelfleet-local"},
              {"bootID", "modelfleet-local"},
              {"kernelVersion", uts.release},
              {"osImage", "modelfleet-local"},
              {"containerRuntimeVersion", "modelfleet-local://1"},
              {"kubeletVersion", options_.kubelet_version},
              {"kubeProxyVersion", ""},
              {"operatingSystem", "linux"},
              {"architecture", "amd64"}}}}}};
}

Status Kubelet::RegisterNode() {
  k8s::Json node = NodeObject();
  auto created = client_->Create({res::Nodes(), "", ""}, node);
  if (created.ok()) return Status::Ok();
  if (created.status().code() != StatusCode::kAlreadyExists) {
    return created.status().WithContext("registering node " + options_.node_name);
  }
  // Registered by an earlier run: bring labels, capacity, addresses and conditions up to date.
  auto labelled = client_->Patch({res::Nodes(), "", options_.node_name, ""}, k8s::PatchType::kStrategicMerge,
                                 {{"metadata", {{"labels", node["metadata"]["labels"]}}}});
  if (!labelled.ok()) return labelled.status().WithContext("labelling node " + options_.node_name);
  k8s::Json patch = {{"status", node["status"]}};
  auto patched =
      client_->Patch({res::Nodes(), "", options_.node_name, "status"}, k8s::PatchType::kStrategicMerge, patch);
  return patched.status().WithContext("updating node " + options_.node_name);
}

void Kubelet::Heartbeat() {
  const auto now = Clock::now();
  k8s::Json status_patch = {{"status", {{"conditions", NodeConditions(FormatTime(now))}}}};
  auto patched =
      client_->Patch({res::Nodes(), "", options_.node_name, "status"}, k8s::PatchType::kStrategicMerge, status_patch);
  if (!patched.ok()) {
    log::Warning("node status heartbeat failed", {{"error", patched.status().message()}});
    if (patched.status().code() == StatusCode::kNotFound) (void)RegisterNode();  // deleted by someone: register again
  }
  k8s::Json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                     {"kind", "Lease"},
                     {"metadata", {{"name", options_.node_name}, {"namespace", "kube-node-lease"}}},
                     {"spec",
                      {{"holderIdentity", options_.node_name},
                       {"leaseDurationSeconds", kLeaseDurationSeconds},
                       {"renewTime", MicroTime(now)}}}};
  auto renewed = client_->Apply({res::Leases(), "kube-node-lease", options_.node_name}, lease, kFieldManager);
  if (!renewed.ok()) log::Warning("node lease renewal failed", {{"error", renewed.status().message()}});
}

StatusOr<RunningContainer> Kubelet::FindRunning(const std::string& ns, const std::string& pod,
                                                const std::string& container) const {
  std::lock_guard lock(mu_);
  auto uid = uid_by_key_.find(ns + "/" + pod);
  if (uid == uid_by_key_.end() || !workers_.count(uid->second)) {
    return NotFound("pod " + ns + "/" + pod + " does not run on node " + options_.node_name);
  }
  auto running = workers_.at(uid->second)->Running(container);
  if (!running) return FailedPrecondition("container " + container + " of pod " + ns + "/" + pod + " is not running");
  return *running;
}

Status Kubelet::StartApiServer() {
  MF_ASSIGN_OR_RETURN(std::string cert, ReadTextFile(options_.pki_dir / "kubelet.crt"));
  MF_ASSIGN_OR_RETURN(std::string key, ReadTextFile(options_.pki_dir / "kubelet.key"));
  MF_ASSIGN_OR_RETURN(std::string ca, ReadTextFile(options_.pki_dir / "ca.crt"));
  KubeletApiHooks hooks;
  hooks.log_path = [this](const std::string& ns, const std::string& pod, const std::string& container,
                          bool previous) -> StatusOr<std::filesystem::path> {
    auto path = ContainerLogPath(options_.data_dir, ns, pod, container, previous);
    if (!std::filesystem::exists(path)) {
      return NotFound(std::string(previous ? "previous terminated container" : "container") + " \"" + container +
                      "\" in pod \"" + pod + "\" has no log");
    }
    return path;
  };
  hooks.container_running = [this](const std::string& ns, const std::string& pod, const std::string& container) {
    return FindRunning(ns, pod, container).ok();
  };
  hooks.exec_target = [this](const std::string& ns, const std::string& pod,
                             const std::string& container) -> StatusOr<ExecTarget> {
    MF_ASSIGN_OR_RETURN(RunningContainer running, FindRunning(ns, pod, container));
    return ExecTarget{.env = running.env,
                      .working_dir = running.working_dir,
                      .rewrite_arg = [mounts = running.mounts](const std::string& arg) { return mounts.Rewrite(arg); }};
  };
  hooks.pod_ip = [this](const std::string& ns, const std::string& pod) -> StatusOr<std::string> {
    std::lock_guard lock(mu_);
    auto uid = uid_by_key_.find(ns + "/" + pod);
    std::string ip = uid != uid_by_key_.end() && workers_.count(uid->second) ? workers_.at(uid->second)->PodIp() : "";
    if (ip.empty()) return NotFound("pod " + ns + "/" + pod + " has no address on node " + options_.node_name);
    return ip;
  };
  api_server_ = std::make_unique<KubeletApiServer>(KubeletApiOptions{.address = options_.node_ip,
                                                                     .port = options_.kubelet_port,
                                                                     .certificate_pem = cert,
                                                                     .private_key_pem = key,
                                                                     .client_ca_pem = ca},
                                                   std::move(hooks));
  return api_server_->Start();
}

Status Kubelet::Start() {
  if (options_.data_dir.empty()) return InvalidArgument("the node agent needs a data directory");
  MF_RETURN_IF_ERROR(StartApiServer());
  MF_RETURN_IF_ERROR(
      WriteFileIfChanged(PythonResolverDirectory(options_.data_dir) / "sitecustomize.py", PythonResolverSource()));
  MF_RETURN_IF_ERROR(RegisterNode());
  Heartbeat();
  next_heartbeat_ = std::chrono::steady_clock::now() + kHeartbeatInterval;
  auto on_change = [this](bool network) {
    return k8s::EventHandlers{
        .on_add = [this, network](const k8s::ObjectPtr&) { Wake(network); },
        .on_update = [this, network](const k8s::ObjectPtr&, const k8s::ObjectPtr&) { Wake(network); },
        .on_delete = [this, network](const k8s::ObjectPtr&) { Wake(network); }};
  };
  pods_ = std::make_unique<k8s::Informer>(
      *client_, k8s::InformerOptions{.collection = {res::Pods(), "", "", ""},
                                     .label_selector = "",
                                     .field_selector = "spec.nodeName=" + options_.node_name});
  services_ =
      std::make_unique<k8s::Informer>(*client_, k8s::InformerOptions{.collection = {res::Services(), "", "", ""}});
  endpoints_ =
      std::make_unique<k8s::Informer>(*client_, k8s::InformerOptions{.collection = {res::Endpoints(), "", "", ""}});
  if (options_.simulate_pods) {
    // Pod events go to the simulation's queue only: the sync loop has no pod workers to update.
    simulated_ = std::make_unique<SimulatedPods>(client_, pods_.get(), &ips_, options_.node_ip, kSimulationWorkers);
  } else {
    pods_->AddEventHandlers(on_change(false));
  }
  services_->AddEventHandlers(on_change(true));
  endpoints_->AddEventHandlers(on_change(true));
  for (auto* informer : {pods_.get(), services_.get(), endpoints_.get()}) MF_RETURN_IF_ERROR(informer->Start());
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
  log::Info("node agent started", {{"node", options_.node_name},
                                   {"data_dir", options_.data_dir.string()},
                                   {"simulate_pods", options_.simulate_pods ? "true" : "false"}});
  return Status::Ok();
}

void Kubelet::Wake(bool network) {
  {
    std::lock_guard lock(mu_);
    dirty_ = true;
    if (network) network_dirty_ = true;
  }
  wake_.notify_all();
}

void Kubelet::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (api_server_) api_server_->Stop();
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  simulated_.reset();  // its workers read the pod informer's cache
  for (auto* informer : {pods_.get(), services_.get(), endpoints_.get()}) {
    if (informer) informer->Stop();
  }
  proxy_.Apply({});  // close every Service listener
  std::map<std::string, std::unique_ptr<PodWorker>> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (auto& [uid, worker] : workers) worker->RequestShutdown();  // all pods stop in parallel
  workers.clear();                                                // and each is waited for
}

void Kubelet::Loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    bool sync_network = false;
    {
      std::unique_lock lock(mu_);
      // Pod workers poll their own processes; this loop reacts to API changes, and every second
      // anyway so finished workers are collected; a pending network change wakes it on its turn.
      auto timeout = std::chrono::steady_clock::duration(1s);
      if (network_dirty_) timeout = std::min(timeout, next_network_sync_ - std::chrono::steady_clock::now());
      wake_.wait_for(lock, stop, timeout, [this] { return dirty_; });
      dirty_ = false;
      sync_network = network_dirty_ && std::chrono::steady_clock::now() >= next_network_sync_;
      if (sync_network) network_dirty_ = false;
    }
    if (stop.stop_requested()) break;
    Status s = CatchMalformed("node agent sync of pods", [&] {
      SyncPods();
      return Status::Ok();
    });
    if (!s.ok()) log::Warning("node agent sync failed", {{"error", s.message()}});
    if (sync_network) {
      const auto started = std::chrono::steady_clock::now();
      bool again = false;
      s = CatchMalformed("node agent sync of services", [&] {
        again = SyncNetworking();
        return Status::Ok();
      });
      if (!s.ok()) log::Warning("node agent sync failed", {{"error", s.message()}});
      const auto now = std::chrono::steady_clock::now();
      std::lock_guard lock(mu_);
      next_network_sync_ = now + std::max<std::chrono::steady_clock::duration>(100ms, 2 * (now - started));
      if (again || !s.ok()) {
        network_dirty_ = true;  // a second later, as before this loop synced only on changes
        next_network_sync_ = std::max(next_network_sync_, now + 1s);
      }
    }
    if (std::chrono::steady_clock::now() >= next_heartbeat_) {
      Heartbeat();
      next_heartbeat_ = std::chrono::steady_clock::now() + kHeartbeatInterval;
    }
  }
}

void Kubelet::SyncPods() {
  if (simulated_ || !pods_->HasSynced()) return;
  std::map<std::string, k8s::ObjectPtr> ours;  // by uid
  for (const k8s::ObjectPtr& pod : pods_->store().List()) {
    if (StringAt(*pod, {"spec", "nodeName"}) == options_.node_name) ours[Uid(*pod)] = pod;
  }
  std::lock_guard lock(mu_);
  for (auto it = workers_.begin(); it != workers_.end();) {
    auto found = ours.find(it->first);
    if (found == ours.end()) {
      it->second->PodRemoved();
    } else {
      it->second->Update(*found->second);
    }
    it = it->second->finished() ? workers_.erase(it) : std::next(it);
  }
  uid_by_key_.clear();
  for (const auto& [uid, pod] : ours) {
    if (workers_.count(uid)) continue;
    const std::string phase = StringAt(*pod, {"status", "phase"});
    // A finished pod is not run again, but one being deleted still needs its final delete.
    if ((phase == "Succeeded" || phase == "Failed") && !IsBeingDeleted(*pod)) continue;
    workers_[uid] = std::make_unique<PodWorker>(client_, &options_, &ips_, &gpus_, *pod);
  }
  for (const auto& [uid, pod] : ours) {
    if (workers_.count(uid)) uid_by_key_[NamespaceOf(*pod) + "/" + NameOf(*pod)] = uid;
  }
}

bool Kubelet::SyncNetworking() {
  if (!services_->HasSynced() || !endpoints_->HasSynced()) return true;
  bool again = false;
  std::vector<Json> services, endpoints;
  for (const auto& s : services_->store().List()) services.push_back(*s);
  for (const auto& e : endpoints_->store().List()) endpoints.push_back(*e);
  std::sort(services.begin(), services.end(), [](const Json& a, const Json& b) {
    return NamespaceOf(a) + "/" + NameOf(a) < NamespaceOf(b) + "/" + NameOf(b);
  });
  std::map<std::string, std::string> vips;
  for (const Json& svc : services) {
    if (IsProxiedService(svc)) vips[NamespaceOf(svc) + "/" + NameOf(svc)] = StringAt(svc, {"spec", "clusterIP"});
  }
  std::vector<ProxiedService> planned = PlanServiceProxy(services, endpoints, vips);

  // LoadBalancer Services: the same ports on a host loopback address, kept stable across
  // restarts through the address already in their status.
  std::set<std::string> used;
  std::map<std::string, std::string> host_ips;
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(busy_host_ips_, [&](const auto& kv) { return now - kv.second > std::chrono::minutes(1); });
  for (const Json& svc : services) {
    const std::string key = NamespaceOf(svc) + "/" + NameOf(svc);
    if (StringAt(svc, {"spec", "type"}) != "LoadBalancer" || !vips.count(key)) continue;
    std::string ip = host_ips_.count(key) ? host_ips_[key] : "";
    const Json& ingress = ObjectAt(svc, {"status", "loadBalancer"}).value("ingress", Json::array());
    if (ip.empty() && ingress.is_array() && !ingress.empty()) ip = StringAt(ingress[0], {"ip"});
    if (!IsLoopbackHost(ip) || used.count(ip) || busy_host_ips_.count(ip)) ip.clear();
    for (int n = 2; ip.empty() && n < 255; ++n) {
      std::string candidate = "127.0.0." + std::to_string(n);
      if (!used.count(candidate) && !busy_host_ips_.count(candidate) &&
          std::none_of(host_ips_.begin(), host_ips_.end(),
                       [&](const auto& kv) { return kv.first != key && kv.second == candidate; })) {
        ip = candidate;
      }
    }
    if (ip.empty()) continue;
    used.insert(ip);
    host_ips[key] = ip;
  }
  std::vector<ProxiedService> with_host = planned;
  for (const ProxiedService& p : planned) {
    if (auto it = host_ips.find(p.key); it != host_ips.end()) {
      ProxiedService host = p;
      host.vip = it->second;
      with_host.push_back(std::move(host));
    }
  }
  std::vector<std::string> errors = proxy_.Apply(with_host);
  std::set<std::string> error_set(errors.begin(), errors.end());
  for (const std::string& e : error_set) {
    if (!proxy_errors_.count(e)) log::Warning("cannot open a Service proxy listener", {{"listener", e}});
    // A host address another program holds: try the next one on the next pass.
    for (auto it = host_ips.begin(); it != host_ips.end();) {
      if (e.rfind(it->second + ":", 0) == 0) {
        busy_host_ips_[it->second] = now;
        it = host_ips.erase(it);
      } else {
        ++it;
      }
    }
  }
  proxy_errors_ = std::move(error_set);
  host_ips_ = host_ips;
  for (const Json& svc : services) {
    const std::string key = NamespaceOf(svc) + "/" + NameOf(svc);
    auto it = host_ips.find(key);
    if (it == host_ips.end()) continue;
    Json ingress = Json::array({{{"ip", it->second}, {"ipMode", "VIP"}}});
    if (ObjectAt(svc, {"status", "loadBalancer"}).value("ingress", Json::array()) == ingress) continue;
    auto written = client_->Patch({res::Services(), NamespaceOf(svc), NameOf(svc), "status"}, k8s::PatchType::kMerge,
                                  {{"status", {{"loadBalancer", {{"ingress", ingress}}}}}});
    if (!written.ok()) {
      log::Warning("cannot write LoadBalancer status", {{"service", key}, {"error", written.status().message()}});
      again = true;
    }
  }

  std::set<std::string> namespaces;
  for (const Json& ep : endpoints) namespaces.insert(NamespaceOf(ep));
  for (const Json& svc : services) namespaces.insert(NamespaceOf(svc));
  for (const std::string& ns : namespaces) {
    Status s = WriteFileIfChanged(HostsFilePath(options_.data_dir, ns), BuildHostsFile(ns, endpoints, vips));
    if (!s.ok()) {
      log::Warning("cannot write hosts file", {{"error", s.message()}});
      again = true;
    }
  }
  return again || !proxy_errors_.empty();  // a listener that could not open is tried again
}

}  // namespace mf::local
