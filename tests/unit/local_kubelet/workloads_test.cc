// The controllers and the local kubelet together over an in-process store: a Deployment of
// python3 -m http.server becomes ready pods behind its Service's endpoints; scaling starts and
// stops processes; deleting the Deployment stops them all. Plus pod-level kubelet behaviour:
// exit codes, restart policies with back-off, liveness restarts, logs.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "tools/local/controllers/resources.h"
#include "tools/local/controllers/run.h"
#include "tools/local/kubelet/hosts_file.h"
#include "tools/local/kubelet/kubelet.h"
#include "tools/local/kubelet/pod_paths.h"

namespace mf::local {
namespace {

using namespace std::chrono_literals;
namespace r = resources;
const GroupVersionResource kNamespaces{"", "v1", "namespaces"};

void RegisterBuiltinTypes(Store& store) {
  store.RegisterType({kNamespaces, "Namespace", false, true, nullptr});
  store.RegisterType({r::kNodes, "Node", false, true, nullptr});
  store.RegisterType({r::kPods, "Pod", true, true, nullptr});
  store.RegisterType({r::kServices, "Service", true, true, nullptr});
  store.RegisterType({r::kEndpoints, "Endpoints", true, false, nullptr});
  store.RegisterType({r::kConfigMaps, "ConfigMap", true, false, nullptr});
  store.RegisterType({r::kSecrets, "Secret", true, false, nullptr});
  store.RegisterType({r::kDeployments, "Deployment", true, true, nullptr});
  store.RegisterType({r::kReplicaSets, "ReplicaSet", true, true, nullptr});
  store.RegisterType({r::kEndpointSlices, "EndpointSlice", true, false, nullptr});
}

class WorkloadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_dir_ = std::filesystem::temp_directory_path() / ("mf-workloads-" + std::to_string(getpid()));
    std::filesystem::remove_all(data_dir_);
    auto store = Store::Open({});
    ASSERT_TRUE(store.ok());
    store_ = std::move(store).value();
    RegisterBuiltinTypes(*store_);
    ASSERT_TRUE(store_->Create(kNamespaces, "", {{"metadata", {{"name", "default"}}}}).ok());
  }
  void TearDown() override {
    if (workloads_) workloads_->Stop();
    if (kubelet_) kubelet_->Stop();
    std::filesystem::remove_all(data_dir_);
  }

  // Polls `done` every 50 ms for up to `limit`.
  bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds limit = 30s) {
    auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (done()) return true;
      std::this_thread::sleep_for(50ms);
    }
    return done();
  }
  std::vector<Json> Pods() {
    auto list = store_->List(r::kPods, "default");
    return list.ok() ? list->items : std::vector<Json>{};
  }
  Json Get(const GroupVersionResource& gvr, const std::string& name) {
    auto obj = store_->Get({gvr, gvr == r::kNodes ? "" : "default", name});
    return obj.ok() ? *obj : Json();
  }
  std::string Read(const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  Kubelet& StartKubelet() {
    KubeletOptions options;
    options.data_dir = data_dir_;
    options.backoff = BackoffPolicy{200ms, 400ms, 60s};
    kubelet_ = std::make_unique<Kubelet>(store_.get(), std::move(options));
    EXPECT_TRUE(kubelet_->Start().ok());
    return *kubelet_;
  }
  Json ContainerStatus(const std::string& pod) {
    Json p = Get(r::kPods, pod);
    if (!p.contains("status") || !p["status"].contains("containerStatuses")) return Json();
    return p["status"]["containerStatuses"][0];
  }

  std::filesystem::path data_dir_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<LocalWorkloads> workloads_;
  std::unique_ptr<Kubelet> kubelet_;
};

Json HttpServerDeployment(int replicas) {
  Json container = {
      {"name", "web"},
      {"image", "python:3.11"},
      {"command", {"/usr/bin/python3", "-m", "http.server", "8000", "--bind", "$(POD_IP)"}},
      {"env", Json::array({{{"name", "POD_IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}}})},
      {"ports", Json::array({{{"name", "http"}, {"containerPort", 8000}}})},
      {"readinessProbe", {{"httpGet", {{"path", "/"}, {"port", "http"}}}, {"periodSeconds", 1}}}};
  return {{"metadata", {{"name", "web"}}},
          {"spec",
           {{"replicas", replicas},
            {"selector", {{"matchLabels", {{"app", "web"}}}}},
            {"template",
             {{"metadata", {{"labels", {{"app", "web"}}}}},
              {"spec", {{"terminationGracePeriodSeconds", 5}, {"containers", Json::array({container})}}}}}}}};
}

TEST_F(WorkloadsTest, DeploymentServesThroughServiceEndpointsScalesAndDeletes) {
  auto started = StartLocalWorkloads(*store_, {data_dir_, "", "local", {}});
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  workloads_ = std::move(started).value();
  EXPECT_EQ(Get(r::kNodes, "local")["status"]["conditions"][0]["type"], "Ready");

  ASSERT_TRUE(store_->Create(r::kServices, "default",
                             {{"metadata", {{"name", "web"}}},
                              {"spec", {{"selector", {{"app", "web"}}},
                                        {"type", "LoadBalancer"},
                                        {"ports", Json::array({{{"name", "http"}, {"port", 8080}, {"targetPort", "http"}}})}}}})
                  .ok());
  ASSERT_TRUE(store_->Create(r::kDeployments, "default", HttpServerDeployment(2)).ok());

  auto available = [&](int n) {
    Json d = Get(r::kDeployments, "web");
    return IntAt(d, {"status", "availableReplicas"}, -1) == n && IntAt(d, {"status", "replicas"}, -1) == n &&
           IntAt(d, {"status", "updatedReplicas"}, -1) == n;
  };
  ASSERT_TRUE(WaitFor([&] { return available(2); })) << Get(r::kDeployments, "web").dump(2);
  Json deployment = Get(r::kDeployments, "web");
  EXPECT_EQ(deployment["status"]["observedGeneration"], deployment["metadata"]["generation"]);

  // Every ready pod is in the Endpoints and answers HTTP on its own loopback address.
  auto ready_addresses = [&] {
    std::vector<std::string> ips;
    Json ep = Get(r::kEndpoints, "web");
    for (const Json& subset : ep.value("subsets", Json::array())) {
      for (const Json& a : subset.value("addresses", Json::array())) ips.push_back(a["ip"]);
    }
    return ips;
  };
  ASSERT_TRUE(WaitFor([&] { return ready_addresses().size() == 2; })) << Get(r::kEndpoints, "web").dump(2);
  std::vector<std::string> ips = ready_addresses();
  EXPECT_NE(ips[0], ips[1]);
  for (const std::string& ip : ips) {
    ProbeOutcome get = RunProbe({{"httpGet", {{"path", "/"}, {"port", 8000}}}}, ip, Json::object(), {}, 2000ms);
    EXPECT_TRUE(get.success) << ip << ": " << get.message;
  }
  auto slices = store_->List(r::kEndpointSlices, "default");
  ASSERT_TRUE(slices.ok());
  ASSERT_EQ(slices->items.size(), 1u);
  EXPECT_EQ(slices->items[0]["endpoints"].size(), 2u);
  // The Service has a VIP on the loopback network, published as its LoadBalancer ingress and
  // resolvable by name, whose port 8080 reaches the pods' port 8000. (Ports below 1024 work only
  // where the kubelet may bind them: root, CAP_NET_BIND_SERVICE or net.ipv4.ip_unprivileged_port_start.)
  std::string vip;
  ASSERT_TRUE(WaitFor([&] {
    vip = StringAt(Get(r::kServices, "web")["status"]["loadBalancer"]["ingress"][0], {"ip"});
    return !vip.empty();
  })) << Get(r::kServices, "web").dump(2);
  EXPECT_NE(Read(HostsFilePath(data_dir_, "default")).find(vip + " web.default.svc\n"), std::string::npos);
  auto get_via_vip = [&] {
    return RunProbe({{"httpGet", {{"path", "/"}, {"port", 8080}}}}, vip, Json::object(), {}, 2000ms);
  };
  // The proxy follows Endpoints on its next sync (as kube-proxy does): wait for the first success.
  ASSERT_TRUE(WaitFor([&] { return get_via_vip().success; })) << get_via_vip().message;
  for (int i = 0; i < 4; ++i) {
    ProbeOutcome get = get_via_vip();
    EXPECT_TRUE(get.success) << vip << ": " << get.message;
  }

  auto all_pids = [&] {
    std::vector<pid_t> pids;
    for (const Json& pod : Pods()) {
      for (pid_t p : workloads_->kubelet().PidsOf("default", NameOf(pod))) pids.push_back(p);
    }
    return pids;
  };
  std::vector<pid_t> first_pids = all_pids();
  ASSERT_EQ(first_pids.size(), 2u);
  for (pid_t p : first_pids) EXPECT_TRUE(ProcessExists(p));

  auto scale = [&](int n) {
    auto scaled = store_->GuaranteedUpdate({r::kDeployments, "default", "web"}, Subresource::kMain,
                                           [n](const Json& cur) -> StatusOr<Json> {
                                             Json u = cur;
                                             u["spec"]["replicas"] = n;
                                             return u;
                                           });
    ASSERT_TRUE(scaled.ok());
  };
  scale(3);
  ASSERT_TRUE(WaitFor([&] { return available(3) && all_pids().size() == 3; }));
  EXPECT_TRUE(WaitFor([&] { return ready_addresses().size() == 3; }));

  std::vector<pid_t> before_scale_down = all_pids();
  scale(1);
  ASSERT_TRUE(WaitFor([&] { return available(1) && Pods().size() == 1 && all_pids().size() == 1; }))
      << Get(r::kDeployments, "web").dump(2);
  int alive = 0;
  for (pid_t p : before_scale_down) alive += ProcessExists(p) ? 1 : 0;
  EXPECT_EQ(alive, 1);
  EXPECT_TRUE(WaitFor([&] { return ready_addresses().size() == 1; }));

  // Deleting the Deployment cascades to ReplicaSet and pods; every process ends.
  std::vector<pid_t> last = all_pids();
  ASSERT_TRUE(store_->Delete({r::kDeployments, "default", "web"}).ok());
  ASSERT_TRUE(WaitFor([&] { return Pods().empty(); })) << Pods().size();
  EXPECT_TRUE(WaitFor([&] {
    for (pid_t p : last) {
      if (ProcessExists(p)) return false;
    }
    return true;
  }));
  EXPECT_TRUE(WaitFor([&] { return ready_addresses().empty(); }));
}

TEST_F(WorkloadsTest, RollingUpdateReplacesPodsWithNewTemplate) {
  auto started = StartLocalWorkloads(*store_, {data_dir_, "", "local", {}});
  ASSERT_TRUE(started.ok());
  workloads_ = std::move(started).value();
  Json d = HttpServerDeployment(2);
  d["spec"]["strategy"] = {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxSurge", 1}, {"maxUnavailable", 0}}}};
  ASSERT_TRUE(store_->Create(r::kDeployments, "default", d).ok());
  auto status = [&](const char* f) { return IntAt(Get(r::kDeployments, "web"), {"status", f}, -1); };
  ASSERT_TRUE(WaitFor([&] { return status("availableReplicas") == 2; }));
  auto updated = store_->GuaranteedUpdate({r::kDeployments, "default", "web"}, Subresource::kMain,
                                          [](const Json& cur) -> StatusOr<Json> {
                                            Json u = cur;
                                            u["spec"]["template"]["metadata"]["labels"]["version"] = "2";
                                            return u;
                                          });
  ASSERT_TRUE(updated.ok());
  // Availability never drops below 2 (maxUnavailable 0) while the pods are replaced.
  int min_available = 2;
  ASSERT_TRUE(WaitFor([&] {
    min_available = std::min<int>(min_available, static_cast<int>(status("availableReplicas")));
    Json dep = Get(r::kDeployments, "web");
    return status("updatedReplicas") == 2 && status("replicas") == 2 && status("availableReplicas") == 2 &&
           IntAt(dep, {"status", "observedGeneration"}, 0) == IntAt(dep, {"metadata", "generation"}, -1);
  }, 60s)) << Get(r::kDeployments, "web").dump(2);
  EXPECT_EQ(min_available, 2);
  auto sets = store_->List(r::kReplicaSets, "default");
  ASSERT_TRUE(sets.ok());
  ASSERT_EQ(sets->items.size(), 2u);
  for (const Json& rs : sets->items) {
    bool is_new = rs["spec"]["template"]["metadata"]["labels"].contains("version");
    EXPECT_EQ(rs["spec"]["replicas"], is_new ? 2 : 0);
  }
  for (const Json& c : Get(r::kDeployments, "web")["status"]["conditions"]) {
    if (c["type"] == "Progressing") {
      EXPECT_EQ(c["reason"], "NewReplicaSetAvailable");
    }
  }
}

Json SimplePod(const std::string& name, const std::string& policy, Json command, Json extra = Json::object()) {
  Json container = {{"name", "main"}, {"image", "busybox"}, {"command", command}};
  container.update(extra);
  return {{"metadata", {{"name", name}}},
          {"spec", {{"restartPolicy", policy}, {"terminationGracePeriodSeconds", 1},
                    {"containers", Json::array({container})}}}};
}

TEST_F(WorkloadsTest, ExitCodesRestartPoliciesAndLogs) {
  StartKubelet();
  ASSERT_TRUE(store_->Create(r::kPods, "default", SimplePod("never", "Never", {"sh", "-c", "echo bye; exit 3"})).ok());
  ASSERT_TRUE(store_->Create(r::kPods, "default", SimplePod("done", "OnFailure", {"sh", "-c", "exit 0"})).ok());
  ASSERT_TRUE(store_->Create(r::kPods, "default", SimplePod("crash", "Always", {"sh", "-c", "echo run $$; exit 1"})).ok());

  ASSERT_TRUE(WaitFor([&] { return StringAt(Get(r::kPods, "never"), {"status", "phase"}) == "Failed"; }));
  Json never = ContainerStatus("never");
  EXPECT_EQ(never["state"]["terminated"]["exitCode"], 3);
  EXPECT_EQ(never["state"]["terminated"]["reason"], "Error");
  EXPECT_EQ(never["restartCount"], 0);
  EXPECT_EQ(Get(r::kPods, "never")["spec"]["nodeName"], "local");
  EXPECT_EQ(Read(ContainerLogPath(data_dir_, "default", "never", "main")), "bye\n");

  ASSERT_TRUE(WaitFor([&] { return StringAt(Get(r::kPods, "done"), {"status", "phase"}) == "Succeeded"; }));
  EXPECT_EQ(ContainerStatus("done")["state"]["terminated"]["reason"], "Completed");

  // Always: restarted after a back-off, the count grows, the previous run's log is kept.
  ASSERT_TRUE(WaitFor([&] { return IntAt(ContainerStatus("crash"), {"restartCount"}, 0) >= 2; }));
  Json crash = Get(r::kPods, "crash");
  EXPECT_EQ(crash["status"]["phase"], "Running");
  EXPECT_EQ(ContainerStatus("crash")["lastState"]["terminated"]["exitCode"], 1);
  EXPECT_TRUE(WaitFor([&] { return StringAt(ContainerStatus("crash"), {"state", "waiting", "reason"}) == "CrashLoopBackOff"; }));
  EXPECT_EQ(Read(ContainerLogPath(data_dir_, "default", "crash", "main", true)).rfind("run ", 0), 0u);
}

TEST_F(WorkloadsTest, LivenessFailureRestartsAndReadinessGatesReady) {
  StartKubelet();
  Json liveness = {{"exec", {{"command", {"sh", "-c", "test ! -e gone"}}}}, {"periodSeconds", 1}, {"failureThreshold", 1}};
  Json readiness = {{"exec", {{"command", {"test", "-e", "ready"}}}}, {"periodSeconds", 1}};
  Json probes = {{"livenessProbe", liveness}, {"readinessProbe", readiness}};
  ASSERT_TRUE(store_->Create(r::kPods, "default", SimplePod("probed", "Always", {"sleep", "600"}, probes)).ok());
  ASSERT_TRUE(WaitFor([&] { return StringAt(Get(r::kPods, "probed"), {"status", "phase"}) == "Running"; }));
  std::filesystem::path pod_dir = PodDirectory(data_dir_, "default", "probed");
  std::this_thread::sleep_for(1500ms);
  EXPECT_FALSE(IsPodReady(Get(r::kPods, "probed")));
  { std::ofstream(pod_dir / "ready") << "1"; }  // exec probes run in the pod's working directory
  ASSERT_TRUE(WaitFor([&] { return IsPodReady(Get(r::kPods, "probed")); }, 10s));
  pid_t first = kubelet_->PidsOf("default", "probed").at(0);
  { std::ofstream(pod_dir / "gone") << "1"; }
  ASSERT_TRUE(WaitFor([&] { return IntAt(ContainerStatus("probed"), {"restartCount"}, 0) >= 1; }, 15s));
  EXPECT_FALSE(ProcessExists(first));
  EXPECT_NE(StringAt(ContainerStatus("probed"), {"lastState", "terminated", "message"}).find("Liveness probe failed"),
            std::string::npos);
}

TEST_F(WorkloadsTest, StartupProbeHoldsOffLivenessAndRestartsWhenItFails) {
  StartKubelet();
  Json gated = {
      {"startupProbe", {{"exec", {{"command", {"test", "-e", "started"}}}}, {"periodSeconds", 1}, {"failureThreshold", 30}}},
      {"livenessProbe", {{"exec", {{"command", {"false"}}}}, {"periodSeconds", 1}, {"failureThreshold", 1}}}};
  ASSERT_TRUE(store_->Create(r::kPods, "default", SimplePod("gated", "Always", {"sleep", "600"}, gated)).ok());
  Json never_starts = {
      {"startupProbe", {{"exec", {{"command", {"false"}}}}, {"periodSeconds", 1}, {"failureThreshold", 2}}}};
  ASSERT_TRUE(store_->Create(r::kPods, "default", SimplePod("never-starts", "Always", {"sleep", "600"}, never_starts)).ok());

  ASSERT_TRUE(WaitFor([&] { return StringAt(Get(r::kPods, "gated"), {"status", "phase"}) == "Running"; }));
  std::this_thread::sleep_for(2500ms);  // the failing liveness probe must not run yet
  EXPECT_EQ(IntAt(ContainerStatus("gated"), {"restartCount"}, -1), 0);
  EXPECT_EQ(ContainerStatus("gated")["started"], false);
  EXPECT_FALSE(IsPodReady(Get(r::kPods, "gated")));
  { std::ofstream(PodDirectory(data_dir_, "default", "gated") / "started") << "1"; }
  ASSERT_TRUE(WaitFor([&] { return IntAt(ContainerStatus("gated"), {"restartCount"}, 0) >= 1; }, 15s));
  EXPECT_NE(StringAt(ContainerStatus("gated"), {"lastState", "terminated", "message"}).find("Liveness probe failed"),
            std::string::npos);

  ASSERT_TRUE(WaitFor([&] { return IntAt(ContainerStatus("never-starts"), {"restartCount"}, 0) >= 1; }, 15s));
  EXPECT_NE(StringAt(ContainerStatus("never-starts"), {"lastState", "terminated", "message"}).find("Startup probe failed"),
            std::string::npos);
}

TEST_F(WorkloadsTest, DeletingAPodStopsItAndReleasesTheFinalizer) {
  StartKubelet();
  // Its child ignores SIGTERM: only the group SIGKILL after the 1 s grace period ends it.
  ASSERT_TRUE(store_->Create(r::kPods, "default",
                             SimplePod("stubborn", "Always", {"sh", "-c", "trap '' TERM; sleep 600 & wait"})).ok());
  ASSERT_TRUE(WaitFor([&] { return !kubelet_->PidsOf("default", "stubborn").empty(); }));
  pid_t pid = kubelet_->PidsOf("default", "stubborn")[0];
  Json pod = Get(r::kPods, "stubborn");
  EXPECT_NE(pod["metadata"]["finalizers"].dump().find(std::string(kKubeletFinalizer)), std::string::npos);
  auto deleted_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(store_->Delete({r::kPods, "default", "stubborn"}).ok());
  // Terminating (deletionTimestamp set) while the processes get their grace period.
  EXPECT_TRUE(IsBeingDeleted(Get(r::kPods, "stubborn")));
  ASSERT_TRUE(WaitFor([&] { return !store_->Get({r::kPods, "default", "stubborn"}).ok(); }, 15s));
  EXPECT_GE(std::chrono::steady_clock::now() - deleted_at, 900ms);
  EXPECT_FALSE(ProcessExists(pid));
}

TEST_F(WorkloadsTest, InitContainersRunFirstAndShareVolumesThroughMountPaths) {
  StartKubelet();
  Json pod = {
      {"metadata", {{"name", "staged"}}},
      {"spec",
       {{"restartPolicy", "Never"},
        {"volumes", Json::array({{{"name", "work"}, {"emptyDir", Json::object()}}})},
        {"initContainers",
         Json::array({{{"name", "fetch"}, {"image", "busybox"},
                       // Mount paths are rewritten where an argument is a path, not inside scripts.
                       {"command", {"sh", "-c", "echo model-v1 > \"$1\"", "sh", "/work/model.txt"}},
                       {"volumeMounts", Json::array({{{"name", "work"}, {"mountPath", "/work"}}})}}})},
        {"containers",
         Json::array({{{"name", "serve"}, {"image", "busybox"},
                       {"command", {"cat", "/data/model.txt"}},
                       {"volumeMounts", Json::array({{{"name", "work"}, {"mountPath", "/data"}}})}}})}}}};
  ASSERT_TRUE(store_->Create(r::kPods, "default", pod).ok());
  ASSERT_TRUE(WaitFor([&] { return StringAt(Get(r::kPods, "staged"), {"status", "phase"}) == "Succeeded"; }))
      << Get(r::kPods, "staged").dump(2);
  Json status = Get(r::kPods, "staged")["status"];
  EXPECT_EQ(status["initContainerStatuses"][0]["state"]["terminated"]["exitCode"], 0);
  EXPECT_EQ(Read(ContainerLogPath(data_dir_, "default", "staged", "serve")), "model-v1\n");

  // A failing init container under restartPolicy Never fails the pod; the app never starts.
  pod["metadata"]["name"] = "broken";
  pod["spec"]["initContainers"][0]["command"] = {"sh", "-c", "exit 9"};
  ASSERT_TRUE(store_->Create(r::kPods, "default", pod).ok());
  ASSERT_TRUE(WaitFor([&] { return StringAt(Get(r::kPods, "broken"), {"status", "phase"}) == "Failed"; }));
  Json broken = Get(r::kPods, "broken")["status"];
  EXPECT_EQ(broken["initContainerStatuses"][0]["state"]["terminated"]["exitCode"], 9);
  EXPECT_EQ(broken["containerStatuses"][0]["state"]["waiting"]["reason"], "PodInitializing");
}

TEST_F(WorkloadsTest, ConfigErrorsAreReportedOnTheContainer) {
  StartKubelet();
  Json env = {{"env", Json::array({{{"name", "X"}, {"valueFrom", {{"configMapKeyRef", {{"name", "absent"}, {"key", "k"}}}}}}})}};
  ASSERT_TRUE(store_->Create(r::kPods, "default", SimplePod("misconfigured", "Always", {"true"}, env)).ok());
  Json unknown = {{"metadata", {{"name", "unknown-image"}}},
                  {"spec", {{"containers", Json::array({{{"name", "main"}, {"image", "no/such-image:1"}}})}}}};
  ASSERT_TRUE(store_->Create(r::kPods, "default", unknown).ok());
  ASSERT_TRUE(WaitFor([&] {
    return StringAt(ContainerStatus("misconfigured"), {"state", "waiting", "reason"}) == "CreateContainerConfigError" &&
           StringAt(ContainerStatus("unknown-image"), {"state", "waiting", "reason"}) == "ErrImagePull";
  }));
  EXPECT_NE(StringAt(ContainerStatus("misconfigured"), {"state", "waiting", "message"}).find("absent"), std::string::npos);
  EXPECT_NE(StringAt(ContainerStatus("unknown-image"), {"state", "waiting", "message"}).find("no/such-image:1"), std::string::npos);
  EXPECT_EQ(Get(r::kPods, "misconfigured")["status"]["phase"], "Pending");
  // A container that is not even an object is reported, and the kubelet keeps serving others.
  Json garbage = {{"metadata", {{"name", "garbage"}}}, {"spec", {{"containers", {"oops"}}}}};
  ASSERT_TRUE(store_->Create(r::kPods, "default", garbage).ok());
  ASSERT_TRUE(store_->Create(r::kPods, "default", SimplePod("after-garbage", "Never", {"true"})).ok());
  EXPECT_TRUE(WaitFor([&] { return StringAt(Get(r::kPods, "after-garbage"), {"status", "phase"}) == "Succeeded"; }));
  // Creating the ConfigMap lets the container start.
  ASSERT_TRUE(store_->Create(r::kConfigMaps, "default", {{"metadata", {{"name", "absent"}}}, {"data", {{"k", "v"}}}}).ok());
  EXPECT_TRUE(WaitFor([&] { return IntAt(ContainerStatus("misconfigured"), {"restartCount"}, 0) >= 1 ||
                                   ContainerStatus("misconfigured")["state"].contains("terminated") ||
                                   ContainerStatus("misconfigured")["state"].contains("running"); }));
}

}  // namespace
}  // namespace mf::local
