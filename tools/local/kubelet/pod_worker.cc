#include "tools/local/kubelet/pod_worker.h"

#include <signal.h>

#include <cstdlib>
#include <fstream>

#include "common/logging.h"
#include "k8s/resource.h"
#include "tools/local/kubelet/container_env.h"
#include "tools/local/kubelet/pod_paths.h"
#include "tools/local/kubelet/termination_message.h"

namespace mf::local {
namespace {

using State = ContainerRuntimeState::State;
using SteadyClock = std::chrono::steady_clock;

// The API server sets deletionGracePeriodSeconds on a graceful delete (the client's
// gracePeriodSeconds, else the pod's terminationGracePeriodSeconds).
std::chrono::milliseconds GracePeriod(const Json& pod) {
  int64_t secs = IntAt(pod, {"metadata", "deletionGracePeriodSeconds"}, -1);
  if (secs < 0) secs = IntAt(pod, {"spec", "terminationGracePeriodSeconds"}, 30);
  return std::chrono::seconds(std::max<int64_t>(secs, 0));
}

constexpr int64_t kTokenSeconds = 3607;  // the kubelet's default for projected tokens

// Variables every container inherits from the kubelet's own environment.
EnvList HostEnv() {
  EnvList env;
  for (const char* name : {"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LD_LIBRARY_PATH"}) {
    if (const char* v = std::getenv(name)) env.emplace_back(name, v);
  }
  return env;
}

void SetEnv(EnvList& env, const std::string& name, std::string value) {
  for (auto& [k, v] : env) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  env.emplace_back(name, std::move(value));
}

std::string GetEnv(const EnvList& env, const std::string& name) {
  for (const auto& [k, v] : env) {
    if (k == name) return v;
  }
  return "";
}

}  // namespace

PodWorker::PodWorker(k8s::Client* client, const KubeletOptions* options, PodIpAllocator* ips, GpuAllocator* gpus,
                     Json pod)
    : client_(client), options_(options), ips_(ips), gpus_(gpus), latest_(std::move(pod)) {
  thread_ = std::thread([this] { Run(); });
}

PodWorker::~PodWorker() {
  RequestShutdown();
  thread_.join();
}

void PodWorker::RequestShutdown() {
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
  }
  wake_.notify_all();
}

void PodWorker::Update(Json pod) {
  {
    std::lock_guard lock(mu_);
    latest_ = std::move(pod);
  }
  wake_.notify_all();
}

void PodWorker::PodRemoved() {
  {
    std::lock_guard lock(mu_);
    removed_ = true;
  }
  wake_.notify_all();
}

std::vector<pid_t> PodWorker::RunningPids() const {
  std::lock_guard lock(mu_);
  return running_pids_;
}

std::optional<RunningContainer> PodWorker::Running(const std::string& container) const {
  std::lock_guard lock(mu_);
  auto it = running_.find(container);
  if (it == running_.end()) return std::nullopt;
  return it->second;
}

std::string PodWorker::PodIp() const {
  std::lock_guard lock(mu_);
  return published_ip_;
}

std::optional<Json> PodWorker::Lookup(std::string_view resource, std::string_view name) const {
  Json pod;
  {
    std::lock_guard lock(mu_);
    pod = latest_;
  }
  if (resource == "serviceaccounttoken") {
    Json request = {
        {"apiVersion", "authentication.k8s.io/v1"},
        {"kind", "TokenRequest"},
        {"spec",
         {{"expirationSeconds", kTokenSeconds},
          {"boundObjectRef", {{"apiVersion", "v1"}, {"kind", "Pod"}, {"name", NameOf(pod)}, {"uid", Uid(pod)}}}}}};
    auto answer = client_->Call(
        "POST", "/api/v1/namespaces/" + NamespaceOf(pod) + "/serviceaccounts/" + std::string(name) + "/token",
        request.dump(), "application/json");
    if (!answer.ok()) {
      log::Warning("cannot get a service account token",
                   {{"pod", NamespaceOf(pod) + "/" + NameOf(pod)}, {"error", answer.status().message()}});
      return std::nullopt;
    }
    Json parsed = Json::parse(*answer, nullptr, false);
    std::string token = StringAt(parsed, {"status", "token"});
    if (token.empty()) return std::nullopt;
    return Json{{"token", token}};
  }
  auto gvr = resource == "secrets" ? k8s::resources::Secrets() : k8s::resources::ConfigMaps();
  auto obj = client_->Get({gvr, NamespaceOf(pod), std::string(name), ""});
  if (!obj.ok()) return std::nullopt;
  return *obj;
}

void PodWorker::Run() {
  while (true) {
    Json pod;
    bool removed, shutdown;
    {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, options_->pod_sync_interval);
      pod = latest_;
      removed = removed_;
      shutdown = shutdown_;
    }
    if (shutdown) {
      // The kubelet stops, the pod stays: its processes must not outlive the cluster.
      StopAll(GracePeriod(pod));
      break;
    }
    if (removed || IsBeingDeleted(pod)) {
      Terminate(pod, !removed);
      break;
    }
    Status synced = CatchMalformed("pod " + NamespaceOf(pod) + "/" + NameOf(pod), [&] {
      SyncContainers(pod);
      WriteStatus(pod);
      return Status::Ok();
    });
    if (!synced.ok() && synced.message() != last_error_) {
      last_error_ = synced.message();  // the spec cannot change type under a running pod: log once
      log::Warning("cannot run pod", {{"error", synced.message()}});
    }
    std::vector<pid_t> pids;
    std::map<std::string, RunningContainer> running;
    for (const auto* list : {&init_containers_, &containers_}) {
      for (const Container& c : *list) {
        if (!c.pid) continue;
        pids.push_back(*c.pid);
        if (c.mounts) running[c.state.name] = {c.spawn.env, c.spawn.working_dir, *c.mounts};
      }
    }
    std::lock_guard lock(mu_);
    running_pids_ = std::move(pids);
    running_ = std::move(running);
    published_ip_ = pod_ip_;
  }
  {
    std::lock_guard lock(mu_);
    running_pids_.clear();
    running_.clear();
    gpus_->ReleasePod(Uid(latest_));
  }
  finished_ = true;
}

PodWorker::Container PodWorker::NewContainer(const Json& spec, std::string waiting_reason) const {
  Container c{.spec = spec,
              .state = {},
              .pid = std::nullopt,
              .started = {},
              .backoff = RestartBackoff(options_->backoff),
              .startup = std::nullopt,
              .liveness = std::nullopt,
              .readiness = std::nullopt,
              .spawn = {}};
  c.state.name = StringAt(spec, {"name"});
  c.state.reason = std::move(waiting_reason);
  return c;
}

Status PodWorker::Prepare(const Json& pod) {
  const std::string key = NamespaceOf(pod) + "/" + NameOf(pod);
  std::string ip = StringAt(pod, {"status", "podIP"});
  if (ip.empty() || !ips_->Claim(key, ip)) {
    auto allocated = ips_->Allocate(key);
    if (!allocated) return ResourceExhausted("no free loopback address for pod " + key);
    ip = *allocated;
  }
  pod_ip_ = ip;
  std::error_code ec;
  std::filesystem::create_directories(PodDirectory(options_->data_dir, NamespaceOf(pod), NameOf(pod)), ec);
  if (ec) return Internal("cannot create the pod directory: " + ec.message());
  const Json& spec = ObjectAt(pod, {"spec"});
  for (const char* list : {"initContainers", "containers"}) {
    for (const Json& container : spec.value(list, Json::array())) {
      auto pid_file =
          ContainerPidPath(options_->data_dir, NamespaceOf(pod), NameOf(pod), StringAt(container, {"name"}));
      if (KillStaleProcessGroup(pid_file, std::chrono::seconds(2))) {
        log::Info("stopped a container left running by an earlier kubelet",
                  {{"pod", key}, {"container", StringAt(container, {"name"})}});
      }
    }
  }
  auto lookup = [this](std::string_view r, std::string_view n) { return Lookup(r, n); };
  MF_ASSIGN_OR_RETURN(volumes_, PrepareVolumes(pod, options_->data_dir, lookup));
  start_time_ = StringAt(pod, {"status", "startTime"}, FormatTime(Clock::now()));
  // Restart counts survive a kubelet restart: they live in the stored status.
  std::map<std::string, int> restarts;
  const Json& status = ObjectAt(pod, {"status"});
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    const Json statuses = status.value(list, Json::array());
    if (!statuses.is_array()) continue;
    for (const Json& s : statuses) restarts[StringAt(s, {"name"})] = static_cast<int>(IntAt(s, {"restartCount"}, 0));
  }
  // A pod that was initialized before a kubelet restart does not run its init containers again.
  bool initialized = false;
  for (const Json& c : status.value("conditions", Json::array())) {
    initialized = initialized || (StringAt(c, {"type"}) == "Initialized" && StringAt(c, {"status"}) == "True");
  }
  init_containers_.clear();
  for (const Json& container : spec.value("initContainers", Json::array())) {
    Container c = NewContainer(container, "PodInitializing");
    c.state.restart_count = restarts[c.state.name];
    if (initialized) {
      c.state.state = State::kTerminated;
      c.state.reason = "Completed";
    }
    init_containers_.push_back(std::move(c));
  }
  containers_.clear();
  for (const Json& container : spec.value("containers", Json::array())) {
    Container c = NewContainer(container, init_containers_.empty() ? "ContainerCreating" : "PodInitializing");
    c.state.restart_count = restarts[c.state.name];
    for (auto [field, slot, initial] :
         {std::make_tuple("startupProbe", &c.startup, false), std::make_tuple("livenessProbe", &c.liveness, true),
          std::make_tuple("readinessProbe", &c.readiness, false)}) {
      if (!container.contains(field)) continue;
      MF_ASSIGN_OR_RETURN(ProbeTiming timing, ParseProbeTiming(container[field]));
      slot->emplace(timing, initial);
    }
    containers_.push_back(std::move(c));
  }
  prepared_ = true;
  return Status::Ok();
}

void PodWorker::SyncContainers(const Json& pod) {
  if (!prepared_) {
    if (Status s = Prepare(pod); !s.ok()) {
      log::Warning("pod cannot start yet", {{"pod", NamespaceOf(pod) + "/" + NameOf(pod)}, {"error", s.message()}});
      containers_.clear();
      init_containers_.clear();
      for (const Json& spec : ObjectAt(pod, {"spec"}).value("containers", Json::array())) {
        containers_.push_back(NewContainer(spec, "CreateContainerConfigError"));
        containers_.back().state.message = s.message();
      }
      return;
    }
  }
  const std::string policy = StringAt(pod, {"spec", "restartPolicy"}, "Always");
  // Init containers run one at a time, in order, each to success (a failed one is retried unless
  // the pod's policy is Never); only then do the app containers start.
  const std::string init_policy = policy == "Never" ? "Never" : "OnFailure";
  for (Container& c : init_containers_) {
    SyncContainer(pod, c, init_policy);
    if (c.state.state == State::kTerminated && (c.state.exit_code == 0 || c.finished_for_good)) {
      gpus_->Release(Uid(pod), c.state.name);  // done for good: app containers may reuse its devices
    }
    if (c.state.state != State::kTerminated || c.state.exit_code != 0) return;
  }
  for (Container& c : containers_) SyncContainer(pod, c, policy);
  // As the scheduler counts them, a finished pod holds no devices.
  std::vector<ContainerRuntimeState> states;
  for (const Container& c : containers_) states.push_back(c.state);
  if (const std::string phase = PodPhase(policy, {}, states); phase == "Succeeded" || phase == "Failed") {
    gpus_->ReleasePod(Uid(pod));
  }
}

void PodWorker::SyncContainer(const Json& pod, Container& c, const std::string& policy) {
  if (c.pid) {
    auto code = TryReap(*c.pid);
    if (!code) {
      RunProbes(pod, c);
      return;
    }
    OnExit(pod, c, *code, *code == 0 ? "Completed" : "Error", "");
  }
  if (c.finished_for_good) return;
  if (c.state.state == State::kTerminated || c.state.last_state.contains("terminated")) {
    bool restart = policy == "Always" || (policy == "OnFailure" && c.state.exit_code != 0);
    if (c.state.state == State::kTerminated && !restart) {
      c.finished_for_good = true;
      return;
    }
    if (!c.backoff.CanStart(SteadyClock::now())) {
      if (c.state.state == State::kTerminated) {
        // Keep the exit visible in lastState while waiting out the back-off.
        c.state.last_state = {{"terminated", ContainerStateJson(c.state)["terminated"]}};
      }
      c.state.state = State::kWaiting;
      c.state.reason = "CrashLoopBackOff";
      c.state.message = "back-off " + std::to_string(c.backoff.current_delay().count() / 1000) +
                        "s restarting failed container=" + c.state.name + " pod=" + NameOf(pod) + "_" +
                        NamespaceOf(pod) + "(" + Uid(pod) + ")";
      return;
    }
  }
  StartContainer(pod, c);
}

void PodWorker::StartContainer(const Json& pod, Container& c) {
  const bool restarting = c.state.state == State::kTerminated || c.state.last_state.contains("terminated");
  if (c.state.state == State::kTerminated) {
    c.state.last_state = {{"terminated", ContainerStateJson(c.state)["terminated"]}};
  }
  auto fail = [&](std::string reason, const Status& s) {
    c.state.state = State::kWaiting;
    c.state.reason = std::move(reason);
    c.state.message = s.message();
  };
  Json pod_with_ip = pod;
  pod_with_ip["status"]["podIP"] = pod_ip_;
  pod_with_ip["status"]["hostIP"] = options_->node_ip;
  auto lookup = [this](std::string_view r, std::string_view n) { return Lookup(r, n); };
  auto own_env = BuildContainerEnv(pod_with_ip, c.spec, lookup);
  if (!own_env.ok()) return fail("CreateContainerConfigError", own_env.status());
  auto mounts = MountTable::ForContainer(c.spec, volumes_);
  if (!mounts.ok()) return fail("CreateContainerConfigError", mounts.status());
  auto gpus_wanted = GpuLimit(c.spec);
  if (!gpus_wanted.ok()) return fail("CreateContainerConfigError", gpus_wanted.status());
  auto gpus = gpus_->Allocate(Uid(pod), c.state.name, *gpus_wanted);
  if (!gpus.ok()) return fail("UnexpectedAdmissionError", gpus.status());
  const std::string ns = NamespaceOf(pod);
  // Each instance starts with an empty termination message file (termination_message.h).
  const auto message_file = ContainerTerminationMessagePath(options_->data_dir, ns, NameOf(pod), c.state.name);
  if (!std::ofstream(message_file, std::ios::trunc)) {
    return fail("CreateContainerConfigError", Internal("cannot create " + message_file.string()));
  }
  mounts->AddFile(TerminationMessagePath(c.spec), message_file);

  EnvList env = HostEnv();
  for (const auto& [k, v] : options_->extra_env) SetEnv(env, k, v);
  SetEnv(env, "HOSTNAME", StringAt(pod, {"spec", "hostname"}, NameOf(pod)));
  SetEnv(env, "MODELFLEET_POD_IP", pod_ip_);
  // As the kubelet does for every container: where the API server is (the `kubernetes` Service,
  // proxied on its cluster IP), which in-cluster client configs read.
  SetEnv(env, "KUBERNETES_SERVICE_HOST", options_->api_service_ip);
  SetEnv(env, "KUBERNETES_SERVICE_PORT", "443");
  SetEnv(env, "KUBERNETES_SERVICE_PORT_HTTPS", "443");
  SetEnv(env, "MODELFLEET_HOSTS_FILE", HostsFilePath(options_->data_dir, ns).string());
  SetEnv(env, "MODELFLEET_TERMINATION_MESSAGE_PATH", message_file.string());
  for (const auto& [k, v] : mounts->VolumeEnv()) SetEnv(env, k, v);
  for (const auto& [k, v] : *own_env) SetEnv(env, k, mounts->Rewrite(v));
  // After the container's own env, as the device plugin's variables come after it.
  for (const auto& [k, v] : GpuEnv(*gpus)) SetEnv(env, k, v);
  std::string python_path = PythonResolverDirectory(options_->data_dir).string();
  if (std::string user = GetEnv(*own_env, "PYTHONPATH"); !user.empty()) python_path += ":" + user;
  SetEnv(env, "PYTHONPATH", python_path);

  auto argv = BuildContainerArgv(c.spec, options_->images, *own_env);
  if (!argv.ok()) return fail("ErrImagePull", argv.status());
  for (std::string& a : *argv) a = mounts->Rewrite(a);

  SpawnSpec spawn;
  spawn.argv = std::move(*argv);
  spawn.env = std::move(env);
  std::string working_dir = StringAt(c.spec, {"workingDir"});
  spawn.working_dir = working_dir.empty() ? PodDirectory(options_->data_dir, ns, NameOf(pod))
                                          : std::filesystem::path(mounts->Rewrite(working_dir));
  spawn.log_path = ContainerLogPath(options_->data_dir, ns, NameOf(pod), c.state.name);
  if (restarting) {
    std::error_code ec;  // keep one previous instance for `kubectl logs --previous`
    std::filesystem::rename(spawn.log_path, ContainerLogPath(options_->data_dir, ns, NameOf(pod), c.state.name, true),
                            ec);
  }
  auto pid = SpawnProcessGroup(spawn);
  if (restarting) c.state.restart_count++;
  c.started = SteadyClock::now();
  c.state.started_at = FormatTime(Clock::now());
  if (!pid.ok()) {
    // As container runtimes do: the container "ran" and terminated with 128 / StartError.
    OnExit(pod, c, 128, "StartError", pid.status().message());
    return;
  }
  if (Status s = WritePidFile(ContainerPidPath(options_->data_dir, ns, NameOf(pod), c.state.name), *pid); !s.ok()) {
    log::Warning("cannot record a container's pid", {{"pod", ns + "/" + NameOf(pod)}, {"error", s.message()}});
  }
  c.spawn = std::move(spawn);
  c.mounts = *mounts;
  c.pid = *pid;
  c.state.state = State::kRunning;
  c.state.reason.clear();
  c.state.message.clear();
  c.state.container_id = "local://" + std::to_string(*pid);
  c.state.started = !c.startup.has_value();
  c.state.ready = !c.readiness.has_value() && c.state.started;
  if (c.startup) c.startup.emplace(c.startup->timing(), false);
  if (c.readiness) c.readiness.emplace(c.readiness->timing(), false);
  if (c.liveness) c.liveness.emplace(c.liveness->timing(), true);
  log::Info(
      "container started",
      {{"pod", ns + "/" + NameOf(pod)}, {"container", c.state.name}, {"pid", std::to_string(*pid)}, {"ip", pod_ip_}});
}

void PodWorker::OnExit(const Json& pod, Container& c, int exit_code, std::string reason, std::string message) {
  c.pid.reset();
  c.state.state = State::kTerminated;
  c.state.exit_code = exit_code;
  c.state.reason = std::move(reason);
  c.state.message = std::move(message);
  // A container that could not start wrote nothing and has no log to fall back to.
  if (c.state.reason != "StartError") {
    const std::string ns = NamespaceOf(pod), name = NameOf(pod);
    std::string written = ReadTerminationMessage(
        c.spec, exit_code, ContainerTerminationMessagePath(options_->data_dir, ns, name, c.state.name),
        ContainerLogPath(options_->data_dir, ns, name, c.state.name));
    if (!written.empty()) c.state.message += (c.state.message.empty() ? "" : ": ") + written;
  }
  c.state.finished_at = FormatTime(Clock::now());
  c.state.ready = false;
  c.state.started = false;
  c.backoff.OnExit(c.started, SteadyClock::now());
  log::Info("container exited", {{"pod", NamespaceOf(pod) + "/" + NameOf(pod)},
                                 {"container", c.state.name},
                                 {"exit_code", std::to_string(exit_code)}});
}

void PodWorker::RunProbes(const Json& pod, Container& c) {
  auto now = SteadyClock::now();
  auto run = [&](ProbeTracker& tracker, const char* field) {
    ProbeOutcome outcome = RunProbe(c.spec[field], pod_ip_, c.spec, c.spawn,
                                    std::chrono::duration_cast<std::chrono::milliseconds>(tracker.timing().timeout));
    tracker.Record(outcome.success, SteadyClock::now());
    return outcome;
  };
  auto restart = [&](const std::string& why) {
    log::Info("probe failed, restarting container",
              {{"pod", NamespaceOf(pod) + "/" + NameOf(pod)}, {"container", c.state.name}, {"error", why}});
    int code = StopProcessGroup(*c.pid, GracePeriod(pod));
    OnExit(pod, c, code, "Error", why);
  };
  if (c.startup && !c.startup->healthy()) {
    if (!c.startup->Due(c.started, now)) return;
    ProbeOutcome outcome = run(*c.startup, "startupProbe");
    if (c.startup->failed()) return restart("Startup probe failed: " + outcome.message);
    if (!c.startup->healthy()) return;
    c.state.started = true;
    c.state.ready = !c.readiness.has_value();
  }
  if (c.liveness && c.liveness->Due(c.started, now)) {
    ProbeOutcome outcome = run(*c.liveness, "livenessProbe");
    if (!c.liveness->healthy()) return restart("Liveness probe failed: " + outcome.message);
  }
  if (c.readiness && c.readiness->Due(c.started, now)) {
    run(*c.readiness, "readinessProbe");
    c.state.ready = c.readiness->healthy();
  }
}

void PodWorker::StopAll(std::chrono::milliseconds grace) {
  // Signal every container first so they shut down in parallel, then wait out one grace period.
  for (auto* list : {&init_containers_, &containers_}) {
    for (Container& c : *list) {
      if (c.pid) SignalProcessGroup(*c.pid, SIGTERM);
    }
  }
  auto deadline = SteadyClock::now() + grace;
  for (auto* list : {&init_containers_, &containers_}) {
    for (Container& c : *list) {
      if (!c.pid) continue;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
      int code = StopProcessGroup(*c.pid, std::max(left, std::chrono::milliseconds(0)));
      c.pid.reset();
      c.state.state = State::kTerminated;
      c.state.exit_code = code;
      c.state.reason = code == 0 ? "Completed" : "Error";
      c.state.finished_at = FormatTime(Clock::now());
      c.state.ready = false;
      c.state.started = false;
    }
  }
}

void PodWorker::Terminate(const Json& pod, bool pod_exists) {
  StopAll(GracePeriod(pod));
  const std::string ns = NamespaceOf(pod), name = NameOf(pod);
  ips_->Release(ns + "/" + name);
  std::error_code ec;
  std::filesystem::remove_all(PodDirectory(options_->data_dir, ns, name), ec);
  if (!pod_exists) return;
  // Containers are gone: the final delete lets the API server drop the pod.
  Status removed = client_->Delete({k8s::resources::Pods(), ns, name, ""}, Uid(pod), 0);
  if (!removed.ok() && removed.code() != StatusCode::kNotFound && removed.code() != StatusCode::kFailedPrecondition &&
      removed.code() != StatusCode::kAborted) {
    log::Warning("cannot delete a stopped pod", {{"pod", ns + "/" + name}, {"error", removed.message()}});
  }
}

void PodWorker::WriteStatus(const Json& pod) {
  PodRuntimeInfo info{.pod_ip = pod_ip_,
                      .host_ip = options_->node_ip,
                      .start_time = start_time_,
                      .init_containers = {},
                      .containers = {}};
  for (const Container& c : init_containers_) info.init_containers.push_back(c.state);
  for (const Container& c : containers_) info.containers.push_back(c.state);
  Json status = BuildPodStatus(pod, info, Clock::now());
  if (status == last_status_) return;
  // A strategic merge patch: conditions merge by type (the scheduler's PodScheduled stays), and
  // the uid makes it fail rather than touch a pod recreated under the same name.
  Json patch = {{"metadata", {{"uid", Uid(pod)}}}, {"status", status}};
  auto written = client_->Patch({k8s::resources::Pods(), NamespaceOf(pod), NameOf(pod), "status"},
                                k8s::PatchType::kStrategicMerge, patch);
  if (written.ok()) {
    last_status_ = status;
  } else if (written.status().code() != StatusCode::kNotFound) {
    log::Warning("cannot write pod status",
                 {{"pod", NamespaceOf(pod) + "/" + NameOf(pod)}, {"error", written.status().message()}});
  }
}

}  // namespace mf::local
