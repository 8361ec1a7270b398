// Unit tests of the local kubelet's pieces: env building, image map, back-off, probes, pod
// status, hosts file, volume mounts and pod IPs.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tools/local/kubelet/container_env.h"
#include "tools/local/kubelet/image_map.h"
#include "tools/local/kubelet/pod_ip_allocator.h"
#include "tools/local/kubelet/pod_paths.h"
#include "tools/local/kubelet/pod_status.h"
#include "tools/local/kubelet/probe.h"
#include "tools/local/kubelet/restart_backoff.h"
#include "tools/local/kubelet/service_hosts.h"
#include "tools/local/kubelet/volumes.h"

namespace mf::local {
namespace {

using namespace std::chrono_literals;

Json Pod() {
  return {{"metadata", {{"name", "web-0"}, {"namespace", "ml"}, {"uid", "u-1"}, {"labels", {{"app", "web"}}}}},
          {"spec", {{"nodeName", "local"}, {"restartPolicy", "Always"}}},
          {"status", {{"podIP", "127.0.1.7"}}}};
}

ObjectLookup Objects() {
  return [](std::string_view resource, std::string_view name) -> std::optional<Json> {
    if (resource == "configmaps" && name == "cfg") {
      return Json{{"metadata", {{"name", "cfg"}, {"namespace", "ml"}}}, {"data", {{"mode", "fast"}, {"level", "3"}}}};
    }
    if (resource == "secrets" && name == "creds") {
      return Json{{"metadata", {{"name", "creds"}, {"namespace", "ml"}}}, {"data", {{"token", "czNjcjN0"}}}};
    }
    return std::nullopt;
  };
}

std::map<std::string, std::string> AsMap(const EnvList& env) { return {env.begin(), env.end()}; }

TEST(ExpandVarsTest, KubernetesRules) {
  std::map<std::string, std::string> vars = {{"A", "x"}, {"B", "y"}};
  EXPECT_EQ(ExpandVars("$(A)-$(B)", vars), "x-y");
  EXPECT_EQ(ExpandVars("$(MISSING)", vars), "$(MISSING)");
  EXPECT_EQ(ExpandVars("$$(A)", vars), "$(A)");
  EXPECT_EQ(ExpandVars("cost $5 $(A", vars), "cost $5 $(A");
  EXPECT_EQ(ExpandVars("$", vars), "$");
}

TEST(ContainerEnvTest, OrderFieldRefsAndKeyRefs) {
  Json container = {
      {"envFrom", Json::array({{{"configMapRef", {{"name", "cfg"}}}, {"prefix", "CFG_"}}})},
      {"env", Json::array({
                  {{"name", "POD"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}},
                  {{"name", "NS"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.namespace"}}}}}},
                  {{"name", "IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}},
                  {{"name", "APP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.labels['app']"}}}}}},
                  {{"name", "MODE"}, {"valueFrom", {{"configMapKeyRef", {{"name", "cfg"}, {"key", "mode"}}}}}},
                  {{"name", "TOKEN"}, {"valueFrom", {{"secretKeyRef", {{"name", "creds"}, {"key", "token"}}}}}},
                  {{"name", "URL"}, {"value", "http://$(IP):80/$(POD)/$(LATER)"}},
                  {{"name", "LATER"}, {"value", "l"}},
                  {{"name", "CFG_mode"}, {"value", "slow"}},
              })}};
  auto env = BuildContainerEnv(Pod(), container, Objects());
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  auto m = AsMap(*env);
  EXPECT_EQ(m["POD"], "web-0");
  EXPECT_EQ(m["NS"], "ml");
  EXPECT_EQ(m["IP"], "127.0.1.7");
  EXPECT_EQ(m["APP"], "web");
  EXPECT_EQ(m["MODE"], "fast");
  EXPECT_EQ(m["TOKEN"], "s3cr3t");
  EXPECT_EQ(m["URL"], "http://127.0.1.7:80/web-0/$(LATER)");  // only earlier variables expand
  EXPECT_EQ(m["CFG_mode"], "slow");                           // env overrides envFrom
  EXPECT_EQ(m["CFG_level"], "3");
}

TEST(ContainerEnvTest, MissingReferencesAreClearErrorsUnlessOptional) {
  Json missing_cm = {
      {"env", Json::array({{{"name", "X"}, {"valueFrom", {{"configMapKeyRef", {{"name", "nope"}, {"key", "k"}}}}}}})}};
  auto env = BuildContainerEnv(Pod(), missing_cm, Objects());
  EXPECT_EQ(env.status().code(), StatusCode::kNotFound);
  EXPECT_NE(env.status().message().find("configmap \"nope\" not found"), std::string::npos);
  missing_cm["env"][0]["valueFrom"]["configMapKeyRef"]["optional"] = true;
  env = BuildContainerEnv(Pod(), missing_cm, Objects());
  ASSERT_TRUE(env.ok());
  EXPECT_TRUE(env->empty());
  Json missing_key = {
      {"env", Json::array({{{"name", "X"}, {"valueFrom", {{"secretKeyRef", {{"name", "creds"}, {"key", "k"}}}}}}})}};
  EXPECT_EQ(BuildContainerEnv(Pod(), missing_key, Objects()).status().code(), StatusCode::kNotFound);
  Json bad_field = {
      {"env", Json::array({{{"name", "X"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "spec.secret"}}}}}}})}};
  EXPECT_EQ(BuildContainerEnv(Pod(), bad_field, Objects()).status().code(), StatusCode::kInvalidArgument);
}

TEST(ContainerArgvTest, CommandImageMapAndExpansion) {
  ImageMap images;
  images.Add("modelfleet/server", "/opt/mf/modelfleet-server");
  EnvList env = {{"PORT", "8501"}};
  Json c = {{"image", "modelfleet/server:0.1"}, {"args", {"--rest_api_port=$(PORT)"}}};
  EXPECT_EQ(*BuildContainerArgv(c, images, env),
            (std::vector<std::string>{"/opt/mf/modelfleet-server", "--rest_api_port=8501"}));
  c = {{"image", "unknown:1"}, {"command", {"python3", "-m", "http.server"}}, {"args", {"$(PORT)"}}};
  EXPECT_EQ(*BuildContainerArgv(c, images, env), (std::vector<std::string>{"python3", "-m", "http.server", "8501"}));
  c = {{"image", "unknown:1"}};
  auto bad = BuildContainerArgv(c, images, env);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("unknown:1"), std::string::npos);
  c = {{"image", "unknown:1"}, {"command", "python3"}};
  EXPECT_EQ(BuildContainerArgv(c, images, env).status().code(), StatusCode::kInvalidArgument);
}

TEST(ImageMapTest, ParseAndResolve) {
  auto map = ImageMap::Parse(
      "images:\n  modelfleet/server: /b/server\n  \"python:3.11\": /usr/bin/python3\n"
      "  registry:5000/team/tool: /b/tool\n",
      "t.yaml");
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->Resolve("modelfleet/server:0.1.0"), "/b/server");
  EXPECT_EQ(map->Resolve("modelfleet/server@sha256:abc"), "/b/server");
  EXPECT_EQ(map->Resolve("python:3.11"), "/usr/bin/python3");
  EXPECT_EQ(map->Resolve("python:3.12"), std::nullopt);
  EXPECT_EQ(map->Resolve("registry:5000/team/tool:v2"), "/b/tool");
  EXPECT_EQ(ImageRepository("registry:5000/team/tool"), "registry:5000/team/tool");
  EXPECT_FALSE(ImageMap::Parse("images: [a, b]", "t.yaml").ok());
  EXPECT_FALSE(ImageMap::Parse("other: {}", "t.yaml").ok());
  EXPECT_FALSE(ImageMap::Parse("images: {a: ", "t.yaml").ok());
  EXPECT_FALSE(ImageMap::Load("/nonexistent/images.yaml").ok());
}

TEST(RestartBackoffTest, DoublesCapsAndResets) {
  RestartBackoff backoff(BackoffPolicy{10s, 40s, 600s});
  auto t0 = std::chrono::steady_clock::time_point{} + 1000s;
  auto next = backoff.OnExit(t0, t0 + 1s);
  EXPECT_EQ(next, t0 + 11s);
  EXPECT_FALSE(backoff.CanStart(t0 + 10s));
  EXPECT_TRUE(backoff.CanStart(t0 + 11s));
  EXPECT_EQ(backoff.OnExit(t0 + 11s, t0 + 12s), t0 + 32s);     // 20 s
  EXPECT_EQ(backoff.OnExit(t0 + 32s, t0 + 33s), t0 + 73s);     // 40 s
  EXPECT_EQ(backoff.OnExit(t0 + 73s, t0 + 74s), t0 + 114s);    // capped at 40 s
  EXPECT_EQ(backoff.OnExit(t0 + 114s, t0 + 800s), t0 + 810s);  // ran 10+ minutes: back to 10 s
}

TEST(ProbeTrackerTest, DelayPeriodAndThresholds) {
  auto timing = ParseProbeTiming(
      {{"initialDelaySeconds", 5}, {"periodSeconds", 2}, {"failureThreshold", 2}, {"successThreshold", 2}});
  ASSERT_TRUE(timing.ok());
  ProbeTracker readiness(*timing, false);
  auto t0 = std::chrono::steady_clock::time_point{} + 100s;
  EXPECT_FALSE(readiness.Due(t0, t0 + 4s));
  EXPECT_TRUE(readiness.Due(t0, t0 + 5s));
  readiness.Record(true, t0 + 5s);
  EXPECT_FALSE(readiness.healthy());  // needs two successes
  EXPECT_FALSE(readiness.Due(t0, t0 + 6s));
  EXPECT_TRUE(readiness.Due(t0, t0 + 7s));
  EXPECT_TRUE(readiness.Record(true, t0 + 7s));
  EXPECT_TRUE(readiness.healthy());
  readiness.Record(false, t0 + 9s);
  EXPECT_TRUE(readiness.healthy());  // one failure is tolerated
  readiness.Record(false, t0 + 11s);
  EXPECT_FALSE(readiness.healthy());
  EXPECT_FALSE(ParseProbeTiming({{"periodSeconds", 0}}).ok());
  EXPECT_FALSE(ParseProbeTiming({{"failureThreshold", -1}}).ok());
}

// A loopback listener answering every connection with a fixed HTTP status line.
class FakeHttp {
 public:
  explicit FakeHttp(int status) : status_(status) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 8);
    thread_ = std::thread([this] {
      while (true) {
        int c = accept(fd_, nullptr, nullptr);
        if (c < 0 || stop_) {
          if (c >= 0) close(c);
          return;
        }
        char buf[2048];
        ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n > 0) last_request_.assign(buf, static_cast<size_t>(n));
        std::string resp = "HTTP/1.1 " + std::to_string(status_) + " X\r\nContent-Length: 0\r\n\r\n";
        send(c, resp.data(), resp.size(), MSG_NOSIGNAL);
        close(c);
      }
    });
  }
  ~FakeHttp() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  std::string last_request_;

 private:
  int status_;
  int fd_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST(ProbeTest, HttpGetStatusCodesNamedPortAndHeaders) {
  FakeHttp ok(204), bad(503);
  Json container = {{"ports", Json::array({{{"name", "http"}, {"containerPort", ok.port()}}})}};
  Json probe = {{"httpGet",
                 {{"path", "/healthz"},
                  {"port", "http"},
                  {"httpHeaders", Json::array({{{"name", "X-Probe"}, {"value", "1"}}})}}}};
  ProbeOutcome outcome = RunProbe(probe, "127.0.0.1", container, {}, 1000ms);
  EXPECT_TRUE(outcome.success) << outcome.message;
  EXPECT_NE(ok.last_request_.find("GET /healthz HTTP/1.1"), std::string::npos);
  EXPECT_NE(ok.last_request_.find("X-Probe: 1"), std::string::npos);
  probe["httpGet"]["port"] = bad.port();
  outcome = RunProbe(probe, "127.0.0.1", container, {}, 1000ms);
  EXPECT_FALSE(outcome.success);
  EXPECT_NE(outcome.message.find("503"), std::string::npos);
  probe["httpGet"]["port"] = "metrics";
  EXPECT_NE(RunProbe(probe, "127.0.0.1", container, {}, 1000ms).message.find("does not declare"), std::string::npos);
}

TEST(ProbeTest, TcpAndExec) {
  FakeHttp listener(200);
  EXPECT_TRUE(RunProbe({{"tcpSocket", {{"port", listener.port()}}}}, "127.0.0.1", Json::object(), {}, 500ms).success);
  // A closed port on an unused pod address fails quickly with a reason.
  ProbeOutcome closed = RunProbe({{"tcpSocket", {{"port", 1}}}}, "127.0.9.9", Json::object(), {}, 500ms);
  EXPECT_FALSE(closed.success);
  EXPECT_FALSE(closed.message.empty());
  SpawnSpec base;
  base.env = {{"PATH", "/usr/bin:/bin"}, {"WANT", "yes"}};
  EXPECT_TRUE(
      RunProbe({{"exec", {{"command", {"sh", "-c", "test \"$WANT\" = yes"}}}}}, "", Json::object(), base, 2000ms)
          .success);
  ProbeOutcome failed = RunProbe({{"exec", {{"command", {"sh", "-c", "exit 3"}}}}}, "", Json::object(), base, 2000ms);
  EXPECT_FALSE(failed.success);
  EXPECT_NE(failed.message.find("code 3"), std::string::npos);
  ProbeOutcome slow = RunProbe({{"exec", {{"command", {"sleep", "5"}}}}}, "", Json::object(), base, 200ms);
  EXPECT_FALSE(slow.success);
  EXPECT_NE(slow.message.find("timed out"), std::string::npos);
}

ContainerRuntimeState Container(ContainerRuntimeState::State state, int exit_code = 0, bool restarted = false) {
  ContainerRuntimeState c;
  c.name = "c";
  c.state = state;
  c.exit_code = exit_code;
  if (restarted) c.last_state = {{"terminated", {{"exitCode", 1}}}};
  return c;
}

TEST(PodPhaseTest, RulesPerRestartPolicy) {
  using S = ContainerRuntimeState::State;
  struct Case {
    std::string policy;
    std::vector<ContainerRuntimeState> containers;
    std::string want;
  };
  std::vector<Case> cases = {
      {"Always", {Container(S::kWaiting)}, "Pending"},
      {"Always", {Container(S::kRunning), Container(S::kWaiting)}, "Pending"},
      {"Always", {Container(S::kRunning)}, "Running"},
      {"Always", {Container(S::kWaiting, 0, true)}, "Running"},  // CrashLoopBackOff
      {"Always", {Container(S::kTerminated, 0)}, "Running"},
      {"Never", {Container(S::kTerminated, 0), Container(S::kTerminated, 0)}, "Succeeded"},
      {"Never", {Container(S::kTerminated, 0), Container(S::kTerminated, 2)}, "Failed"},
      {"OnFailure", {Container(S::kTerminated, 2)}, "Running"},
      {"OnFailure", {Container(S::kTerminated, 0)}, "Succeeded"},
      {"Never", {Container(S::kRunning), Container(S::kTerminated, 1)}, "Running"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(PodPhase(c.policy, {}, c.containers), c.want) << c.policy << " #" << (&c - &cases[0]);
  }
  // Init containers: Pending until each exited 0; a failed one fails the pod only under Never.
  std::vector<ContainerRuntimeState> main = {Container(S::kWaiting)};
  EXPECT_EQ(PodPhase("Always", {Container(S::kRunning)}, main), "Pending");
  EXPECT_EQ(PodPhase("Always", {Container(S::kTerminated, 0), Container(S::kTerminated, 1)}, main), "Pending");
  EXPECT_EQ(PodPhase("Never", {Container(S::kTerminated, 1)}, main), "Failed");
  EXPECT_EQ(PodPhase("Never", {Container(S::kTerminated, 0)}, {Container(S::kRunning)}), "Running");
}

TEST(PodStatusTest, InitContainersGateInitialized) {
  Json pod = Pod();
  pod["spec"]["initContainers"] = Json::array({{{"name", "init"}, {"image", "busybox"}}});
  pod["spec"]["containers"] = Json::array({{{"name", "c"}, {"image", "busybox"}}});
  ContainerRuntimeState init = Container(ContainerRuntimeState::State::kRunning);
  init.name = "init";
  PodRuntimeInfo info{"127.0.1.7", "127.0.0.1", "", {init}, {Container(ContainerRuntimeState::State::kWaiting)}};
  Json status = BuildPodStatus(pod, info, Clock::from_time_t(1795377600) /* 2026-11-22T20:00:00Z */);
  EXPECT_EQ(status["phase"], "Pending");
  EXPECT_EQ(status["initContainerStatuses"][0]["name"], "init");
  EXPECT_EQ(status["initContainerStatuses"][0]["image"], "busybox");
  for (const Json& c : status["conditions"]) {
    if (c["type"] == "Initialized") {
      EXPECT_EQ(c["status"], "False");
      EXPECT_EQ(c["reason"], "ContainersNotInitialized");
    }
  }
}

TEST(PodStatusTest, ConditionsAndContainerStatuses) {
  Json pod = Pod();
  pod["spec"]["containers"] = Json::array({{{"name", "c"}, {"image", "python:3.11"}}});
  PodRuntimeInfo info{
      "127.0.1.7", "127.0.0.1", "2026-11-22T20:00:00Z", {}, {Container(ContainerRuntimeState::State::kRunning)}};
  info.containers[0].ready = true;
  info.containers[0].restart_count = 2;
  info.containers[0].started_at = "2026-11-22T20:00:01Z";
  auto now = Clock::from_time_t(1795377602);  // 2026-11-22T20:00:02Z
  Json status = BuildPodStatus(pod, info, now);
  EXPECT_EQ(status["phase"], "Running");
  EXPECT_EQ(status["podIP"], "127.0.1.7");
  EXPECT_EQ(status["podIPs"][0]["ip"], "127.0.1.7");
  const Json& cs = status["containerStatuses"][0];
  EXPECT_EQ(cs["image"], "python:3.11");
  EXPECT_EQ(cs["restartCount"], 2);
  EXPECT_EQ(cs["state"]["running"]["startedAt"], "2026-11-22T20:00:01Z");
  std::map<std::string, std::string> conditions;
  for (const Json& c : status["conditions"]) conditions[c["type"]] = c["status"];
  EXPECT_EQ(conditions,
            (std::map<std::string, std::string>{
                {"PodScheduled", "True"}, {"Initialized", "True"}, {"ContainersReady", "True"}, {"Ready", "True"}}));
  // Becoming unready changes Ready's transition time only.
  pod["status"] = status;
  info.containers[0].ready = false;
  Json later = BuildPodStatus(pod, info, now + 10s);
  for (const Json& c : later["conditions"]) {
    EXPECT_EQ(c["lastTransitionTime"], (c["type"] == "Ready" || c["type"] == "ContainersReady")
                                           ? "2026-11-22T20:00:12Z"
                                           : "2026-11-22T20:00:02Z")
        << c.dump();
  }
}

TEST(HostsFileTest, ServiceAndHeadlessPodNames) {
  std::vector<Json> endpoints = {
      {{"metadata", {{"name", "web"}, {"namespace", "ml"}}},
       {"subsets", Json::array({{{"addresses", Json::array({{{"ip", "127.0.1.9"}}, {{"ip", "127.0.1.3"}}})}}})}},
      {{"metadata", {{"name", "train"}, {"namespace", "jobs"}}},
       {"subsets", Json::array({{{"addresses", Json::array({{{"ip", "127.0.2.1"}, {"hostname", "worker-0"}}})}}})}},
      {{"metadata", {{"name", "idle"}, {"namespace", "ml"}}},
       {"subsets", Json::array({{{"notReadyAddresses", Json::array({{{"ip", "127.0.1.4"}}})}}})}}};
  std::string ml = BuildHostsFile("ml", endpoints);
  EXPECT_NE(ml.find("127.0.1.3 web\n"), std::string::npos) << ml;
  EXPECT_NE(ml.find("127.0.1.3 web.ml.svc\n"), std::string::npos);
  EXPECT_NE(ml.find("127.0.1.3 web.ml.svc.cluster.local\n"), std::string::npos);
  EXPECT_NE(ml.find("127.0.2.1 worker-0.train.jobs.svc\n"), std::string::npos);
  EXPECT_NE(ml.find("127.0.2.1 train.jobs\n"), std::string::npos);
  EXPECT_EQ(ml.find(" train\n"), std::string::npos);  // bare names only for the own namespace
  EXPECT_EQ(ml.find("idle"), std::string::npos);      // no ready address, no name
}

TEST(HostsFileTest, PythonResolvesThroughTheFile) {
  auto dir = std::filesystem::temp_directory_path() / ("mf-hosts-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir / "py");
  ASSERT_TRUE(WriteFileIfChanged(dir / "hosts", "127.0.3.4 web.ml.svc web\n").ok());
  ASSERT_TRUE(WriteFileIfChanged(dir / "py" / "sitecustomize.py", PythonResolverSource()).ok());
  SpawnSpec spec;
  spec.argv = {"/usr/bin/python3", "-c",
               "import socket; print(socket.getaddrinfo('web.ml.svc', 80)[0][4][0], socket.gethostbyname('web'))"};
  spec.env = {{"PATH", "/usr/bin:/bin"},
              {"PYTHONPATH", (dir / "py").string()},
              {"MODELFLEET_HOSTS_FILE", (dir / "hosts").string()}};
  spec.log_path = dir / "out.log";
  auto result = RunWithTimeout(spec, 20s);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  std::ifstream out(dir / "out.log");
  std::string text((std::istreambuf_iterator<char>(out)), {});
  EXPECT_EQ(result->exit_code, 0) << text;
  EXPECT_EQ(text, "127.0.3.4 127.0.3.4\n");
  std::filesystem::remove_all(dir);
}

TEST(VolumesTest, EmptyDirConfigMapAndRewrite) {
  auto data = std::filesystem::temp_directory_path() / ("mf-vol-" + std::to_string(getpid()));
  Json pod = Pod();
  pod["spec"]["volumes"] = Json::array(
      {{{"name", "models"}, {"emptyDir", Json::object()}}, {{"name", "conf"}, {"configMap", {{"name", "cfg"}}}}});
  auto dirs = PrepareVolumes(pod, data, Objects());
  ASSERT_TRUE(dirs.ok()) << dirs.status().ToString();
  EXPECT_EQ((*dirs)["models"], EmptyDirPath(data, "ml", "web-0", "models"));
  EXPECT_TRUE(std::filesystem::is_directory((*dirs)["models"]));
  std::ifstream mode((*dirs)["conf"] / "mode");
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(mode)), {}), "fast");

  Json container = {{"volumeMounts", Json::array({{{"name", "models"}, {"mountPath", "/models"}},
                                                  {{"name", "conf"}, {"mountPath", "/models/conf/"}}})}};
  auto mounts = MountTable::ForContainer(container, *dirs);
  ASSERT_TRUE(mounts.ok());
  std::string models = (*dirs)["models"].string(), conf = (*dirs)["conf"].string();
  EXPECT_EQ(mounts->Rewrite("/models"), models);
  EXPECT_EQ(mounts->Rewrite("/models/mnist/1"), models + "/mnist/1");
  EXPECT_EQ(mounts->Rewrite("/models/conf/x.yaml"), conf + "/x.yaml");  // longest mount wins
  EXPECT_EQ(mounts->Rewrite("--model_base_path=/models/m"), "--model_base_path=" + models + "/m");
  EXPECT_EQ(mounts->Rewrite("/modelsX"), "/modelsX");
  EXPECT_EQ(mounts->Rewrite("a=/models"), "a=/models");  // only flags are split at '='
  EXPECT_EQ(AsMap(mounts->VolumeEnv())["MODELFLEET_VOLUME_MODELS"], models);
  EXPECT_FALSE(AsMap(mounts->VolumeEnv()).count("MODELFLEET_SERVICE_ACCOUNT_DIR"));

  Json bad = {{"volumeMounts", Json::array({{{"name", "nope"}, {"mountPath", "/x"}}})}};
  EXPECT_EQ(MountTable::ForContainer(bad, *dirs).status().code(), StatusCode::kInvalidArgument);
  pod["spec"]["volumes"] = Json::array({{{"name", "v"}, {"nfs", {{"server", "x"}}}}});
  EXPECT_EQ(PrepareVolumes(pod, data, Objects()).status().code(), StatusCode::kInvalidArgument);
  pod["spec"]["volumes"] = Json::array({{{"name", "v"}, {"secret", {{"secretName", "missing"}}}}});
  EXPECT_EQ(PrepareVolumes(pod, data, Objects()).status().code(), StatusCode::kNotFound);
  std::filesystem::remove_all(data);
}

TEST(VolumesTest, ServiceAccountDirForInClusterClients) {
  VolumeDirs dirs = {{"kube-api-access-x1", "/d/pods/ml_web-0/volumes/kube-api-access-x1"}, {"secrets", "/d/s"}};
  Json container = {{"volumeMounts", Json::array({{{"name", "kube-api-access-x1"},
                                                   {"mountPath", "/var/run/secrets/kubernetes.io/serviceaccount"},
                                                   {"readOnly", true}}})}};
  auto mounts = MountTable::ForContainer(container, dirs);
  ASSERT_TRUE(mounts.ok());
  EXPECT_EQ(AsMap(mounts->VolumeEnv())["MODELFLEET_SERVICE_ACCOUNT_DIR"],
            "/d/pods/ml_web-0/volumes/kube-api-access-x1");
  // A mount of a parent directory covers it too.
  container = {{"volumeMounts", Json::array({{{"name", "secrets"}, {"mountPath", "/var/run/secrets"}}})}};
  mounts = MountTable::ForContainer(container, dirs);
  ASSERT_TRUE(mounts.ok());
  EXPECT_EQ(AsMap(mounts->VolumeEnv())["MODELFLEET_SERVICE_ACCOUNT_DIR"], "/d/s/kubernetes.io/serviceaccount");
  // automountServiceAccountToken: false leaves no mount, so no variable.
  mounts = MountTable::ForContainer(Json::object(), dirs);
  ASSERT_TRUE(mounts.ok());
  EXPECT_TRUE(mounts->VolumeEnv().empty());
}

TEST(PodIpAllocatorTest, DistinctStableAndReclaimable) {
  PodIpAllocator ips("10.244.1.1");
  EXPECT_EQ(ips.Allocate("ml/a"), "10.244.1.1");
  EXPECT_EQ(ips.Allocate("ml/b"), "10.244.1.2");
  EXPECT_EQ(ips.Allocate("ml/a"), "10.244.1.1");
  EXPECT_FALSE(ips.Claim("ml/c", "10.244.1.2"));
  EXPECT_TRUE(ips.Claim("ml/c", "10.244.4.4"));
  EXPECT_FALSE(ips.Claim("ml/d", "10.0.0.1"));    // outside the pool
  EXPECT_FALSE(ips.Claim("ml/d", "10.244.0.1"));  // the node's address, below the pool
  EXPECT_FALSE(ips.Claim("ml/d", "127.0.1.1"));
  ips.Release("ml/a");
  EXPECT_EQ(ips.Allocate("ml/e"), "10.244.1.3");  // after the last one handed out, not the freed one
  // At the end of the range it wraps around to the freed addresses.
  PodIpAllocator wrap("10.244.255.253");
  EXPECT_EQ(wrap.Allocate("a"), "10.244.255.253");
  EXPECT_EQ(wrap.Allocate("b"), "10.244.255.254");
  wrap.Release("a");
  EXPECT_EQ(wrap.Allocate("c"), "10.244.255.253");
  EXPECT_EQ(wrap.Allocate("d"), std::nullopt);
  // Network- and broadcast-looking addresses are skipped.
  PodIpAllocator edge("10.244.1.254");
  EXPECT_EQ(edge.Allocate("a"), "10.244.1.254");
  EXPECT_EQ(edge.Allocate("b"), "10.244.2.1");
}

TEST(PodPathsTest, LogLayoutSharedWithTheApiServer) {
  EXPECT_EQ(ContainerLogPath("/d", "ml", "web-0", "server"), "/d/pods/ml_web-0/server.log");
  EXPECT_EQ(ContainerLogPath("/d", "ml", "web-0", "server", true), "/d/pods/ml_web-0/server.previous.log");
}

}  // namespace
}  // namespace mf::local
