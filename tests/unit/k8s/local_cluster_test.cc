// The client library against the real local control plane (tools/local, modelfleet-local):
// the binary is started from the test with its own data directory and free ports, killed to
// force watch drops, and started on another port meanwhile to write enough history for the
// informer's resourceVersion to be compacted away (410). Skipped, with a message, when the
// binary is not built. Every connection is HTTPS, trusting the CA the server put in its kubeconfig.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "k8s/api_error.h"
#include "k8s/event_recorder.h"
#include "k8s/http_transport.h"
#include "k8s/informer.h"
#include "k8s/leader_election.h"

extern char** environ;

namespace mf::k8s {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string LocalBinary() {
  if (const char* env = std::getenv("MODELFLEET_LOCAL_BINARY")) return env;
  return MODELFLEET_LOCAL_BINARY;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

// Changes the server keeps for resuming watches (`up --watch-history`): small, so the 410 test
// compacts an informer's resourceVersion away with a few dozen writes instead of 20001.
constexpr int kWatchHistory = 50;

// One modelfleet-local process over a data directory that outlives restarts.
class LocalCluster {
 public:
  LocalCluster() {
    std::string pattern = (fs::temp_directory_path() / "k8s-local-test-XXXXXX").string();
    dir_ = mkdtemp(pattern.data());
  }
  ~LocalCluster() {
    Stop(SIGTERM);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // Starts the binary on `port` and waits (up to 30 s) until it answers.
  Status Start(int port) {
    const std::string binary = LocalBinary();
    const std::string port_flag = "--port=" + std::to_string(port);
    const std::string data_flag = "--data-dir=" + dir_.string();
    const std::string log = (dir_ / "modelfleet-local.log").string();
    const std::string history_flag = "--watch-history=" + std::to_string(kWatchHistory);
    std::vector<const char*> argv = {
        binary.c_str(),        "up",   data_flag.c_str(), port_flag.c_str(), "--workloads=false",
        "--log-level=warning", history_flag.c_str(), nullptr};
    std::error_code ec;
    fs::remove(kubeconfig(), ec);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc =
        posix_spawn(&pid_, binary.c_str(), &actions, nullptr, const_cast<char* const*>(argv.data()), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return Internal("cannot start " + binary + ": " + std::strerror(rc));
    port_ = port;
    // The server writes its kubeconfig (https, with its CA's data) once it listens; Start()
    // removed the previous one, so the probe connects the way every client does.
    std::unique_ptr<Client> probe;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (!probe && fs::exists(kubeconfig())) {
        std::ifstream in(kubeconfig());
        std::stringstream text;
        text << in.rdbuf();
        auto config = ParseKubeconfig(text.str(), dir_);
        if (!config.ok()) return config.status();
        if (config->server != url()) return Internal("the kubeconfig names " + config->server + ", not " + url());
        auto client = NewClient(*config, ClientOptions{.qps = 0, .max_retries = 0, .request_timeout = 1000ms});
        if (!client.ok()) return client.status();
        probe = std::move(*client);
      }
      if (probe && probe->Call("GET", "/api", "", "").ok()) return Status::Ok();
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return Internal("modelfleet-local exited at start; see " + log);
      }
      std::this_thread::sleep_for(50ms);
    }
    return DeadlineExceeded("modelfleet-local did not answer within 30 s; see " + log);
  }

  void Stop(int signal) {
    if (pid_ <= 0) return;
    kill(pid_, signal);
    int status;
    for (int i = 0; i < 200 && waitpid(pid_, &status, WNOHANG) != pid_; ++i) std::this_thread::sleep_for(50ms);
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    pid_ = -1;
  }

  std::string url() const { return "https://127.0.0.1:" + std::to_string(port_); }
  fs::path kubeconfig() const { return dir_ / "kubeconfig"; }
  const fs::path& dir() const { return dir_; }

 private:
  fs::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(LocalBinary())) {
      GTEST_SKIP() << "modelfleet-local is not built (" << LocalBinary()
                   << "); build the target modelfleet-local to run these tests";
    }
    port_ = FreePort();
    ASSERT_TRUE(cluster_.Start(port_).ok());
    // Connect the way a user outside the cluster would: through the kubeconfig it wrote.
    std::ifstream in(cluster_.kubeconfig());
    std::stringstream text;
    text << in.rdbuf();
    auto config = ParseKubeconfig(text.str(), cluster_.dir());
    ASSERT_TRUE(config.ok()) << config.status().ToString();
    config_ = *config;
    auto client = NewClient(config_, ClientOptions{.qps = 0, .backoff_base = 20ms, .backoff_cap = 500ms});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }

  Json ConfigMap(const std::string& name, const std::string& value, bool labelled = true) {
    Json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", name}, {"namespace", "default"}}},
               {"data", {{"v", value}}}};
    if (labelled) cm["metadata"]["labels"] = {{"suite", "k8s-client"}};
    return cm;
  }
  // Writes `value` into configmap `name` (creating it), returning the new resourceVersion.
  std::string Write(Client& client, const std::string& name, const std::string& value, bool labelled = true) {
    const ResourceRef ref{resources::ConfigMaps(), "default", name, ""};
    auto r = client.Apply(ref, ConfigMap(name, value, labelled), "k8s-client-test");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? ResourceVersion(*r) : "";
  }

  int port_ = 0;
  LocalCluster cluster_;
  ClusterConfig config_;
  std::unique_ptr<Client> client_;
};

TEST_F(LocalClusterTest, RequestsConflictsAndEvents) {
  const ResourceRef ref{resources::ConfigMaps(), "default", "settings", ""};
  auto created = client_->Create({resources::ConfigMaps(), "default", "", ""}, ConfigMap("settings", "0"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  EXPECT_TRUE(IsAlreadyExists(
      client_->Create({resources::ConfigMaps(), "default", "", ""}, ConfigMap("settings", "0")).status()));

  // A stale update is a real 409 from the API server, and RetryOnConflict rides it out.
  Json stale = *created;
  stale["data"]["v"] = "stale";
  ASSERT_TRUE(client_->Patch(ref, PatchType::kMerge, {{"data", {{"other", "x"}}}}).ok());
  EXPECT_TRUE(IsConflict(client_->Update(ref, stale).status()));
  int attempts = 0;
  Status s = RetryOnConflict([&]() -> Status {
    MF_ASSIGN_OR_RETURN(Json cm, client_->Get(ref));
    if (++attempts == 1) {
      EXPECT_TRUE(client_->Patch(ref, PatchType::kMerge, {{"data", {{"racer", "1"}}}}).ok());
    }
    cm["data"]["v"] = "mine";
    return client_->Update(ref, cm).status();
  });
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(attempts, 2);
  auto got = client_->Get(ref);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["data"], (Json{{"v", "mine"}, {"other", "x"}, {"racer", "1"}}));

  auto patched = client_->Patch(ref, PatchType::kJson, Json::array({{{"op", "remove"}, {"path", "/data/racer"}}}));
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_FALSE((*patched)["data"].contains("racer"));

  {
    EventRecorder recorder(*client_, {.component = "k8s-client-test"});
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(recorder.Record(*got, EventType::kNormal, "Tested", "hello").ok());
    recorder.Flush();
  }
  auto events = client_->List({resources::Events(), "default", "", ""});
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  int found = 0;
  for (const Json& e : (*events)["items"]) {
    if (e.value("reason", "") == "Tested") {
      ++found;
      EXPECT_EQ(e["count"], 3);
      EXPECT_EQ(e["involvedObject"]["name"], "settings");
    }
  }
  EXPECT_EQ(found, 1);

  ASSERT_TRUE(client_->Delete(ref).ok());
  EXPECT_TRUE(IsNotFound(client_->Get(ref).status()));
}

TEST_F(LocalClusterTest, InformerSeesEveryChangeOnceInOrderAcrossDropAndGone) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> seen;
  const auto record = [&](std::string e) {
    std::lock_guard lock(mu);
    seen.push_back(std::move(e));
    cv.notify_all();
  };
  const auto wait_for = [&](size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 30s, [&] { return seen.size() >= n; });
  };
  const auto name_rv = [](const ObjectPtr& o) {
    return (*o)["metadata"]["name"].get<std::string>() + "@" + ResourceVersion(*o);
  };
  InformerOptions options;
  options.collection = {resources::ConfigMaps(), "default", "", ""};
  options.label_selector = "suite=k8s-client";
  options.error_backoff_base = 50ms;
  options.error_backoff_cap = 500ms;
  Informer informer(*client_, options);
  informer.AddEventHandlers({
      .on_add = [&](const ObjectPtr& o) { record("add " + name_rv(o)); },
      .on_update = [&](const ObjectPtr& o,
                       const ObjectPtr& n) { record("update " + name_rv(o) + "->" + ResourceVersion(*n)); },
      .on_delete = [&](const ObjectPtr& o) { record("delete " + (*o)["metadata"]["name"].get<std::string>()); },
  });
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(30s));

  std::vector<std::string> expected;
  const std::string a1 = Write(*client_, "a", "1");
  expected.push_back("add a@" + a1);
  const std::string a2 = Write(*client_, "a", "2");
  expected.push_back("update a@" + a1 + "->" + a2);
  const std::string b1 = Write(*client_, "b", "1");
  expected.push_back("add b@" + b1);
  ASSERT_TRUE(wait_for(expected.size()));

  // Forced watch drop: the API server process is killed and comes back on the same port.
  cluster_.Stop(SIGKILL);
  ASSERT_TRUE(cluster_.Start(port_).ok());
  const std::string a3 = Write(*client_, "a", "3");
  expected.push_back("update a@" + a2 + "->" + a3);
  ASSERT_TRUE(client_->Delete({resources::ConfigMaps(), "default", "b", ""}).ok());
  expected.push_back("delete b");
  ASSERT_TRUE(wait_for(expected.size()));
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(seen, expected);
  }
  EXPECT_EQ(informer.stats().lists, 1);  // resumed from its resourceVersion

  // 410: while the informer cannot reach it, the server (on another port) records more
  // changes than its watch history keeps, so the informer's resourceVersion is compacted away.
  cluster_.Stop(SIGKILL);
  const int other_port = FreePort();
  ASSERT_TRUE(cluster_.Start(other_port).ok());
  ClusterConfig other = config_;
  other.server = cluster_.url();
  auto writer = NewClient(other, ClientOptions{.qps = 0});
  ASSERT_TRUE(writer.ok());
  const std::string a4 = Write(**writer, "a", "4");
  const std::string c1 = Write(**writer, "c", "1");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i <= kWatchHistory; ++i) {
    if (Write(**writer, "filler", std::to_string(i), /*labelled=*/false).empty()) break;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "wrote " << kWatchHistory + 1 << " changes in " << seconds << " s\n";
  cluster_.Stop(SIGKILL);
  ASSERT_TRUE(cluster_.Start(port_).ok());
  // a changed once since the informer last saw it (collapsed), c is new; nothing else repeats.
  const size_t before = expected.size();
  ASSERT_TRUE(wait_for(before + 2));
  std::this_thread::sleep_for(200ms);
  std::vector<std::string> after;
  {
    std::lock_guard lock(mu);
    EXPECT_EQ(std::vector<std::string>(seen.begin(), seen.begin() + before), expected);
    after.assign(seen.begin() + before, seen.end());
  }
  std::sort(after.begin(), after.end());
  EXPECT_EQ(after, (std::vector<std::string>{"add c@" + c1, "update a@" + a3 + "->" + a4}));
  EXPECT_EQ(informer.stats().lists, 2);  // the 410 forced exactly one relist

  // And it keeps watching from the relist.
  const std::string a5 = Write(*client_, "a", "5");
  ASSERT_TRUE(wait_for(before + 3));
  std::lock_guard lock(mu);
  EXPECT_EQ(seen.back(), "update a@" + a4 + "->" + a5);
}

TEST_F(LocalClusterTest, LeaderElectionHandsOverWithinTheLeaseDuration) {
  constexpr auto kLease = 2000ms, kRenew = 1500ms, kRetry = 200ms;
  struct Candidate {
    std::unique_ptr<LeaderElector> elector;
    std::jthread thread;
  };
  const auto start_candidate = [&](const std::string& id, bool release) {
    LeaderElectionConfig config;
    config.lease_namespace = "default";
    config.lease_name = "k8s-client-test";
    config.identity = id;
    config.lease_duration = kLease;
    config.renew_deadline = kRenew;
    config.retry_period = kRetry;
    config.release_on_cancel = release;
    config.on_started_leading = [](std::stop_token stop) {
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      cv.wait(lock, stop, [] { return false; });
    };
    config.on_stopped_leading = [] {};
    auto elector = LeaderElector::Create(*client_, config);
    EXPECT_TRUE(elector.ok()) << elector.status().ToString();
    auto c = std::make_unique<Candidate>();
    c->elector = std::move(*elector);
    c->thread = std::jthread([e = c->elector.get()](std::stop_token stop) { e->Run(stop); });
    return c;
  };
  const auto eventually = [](auto pred, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!pred() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
    return pred();
  };
  auto a = start_candidate("a", /*release=*/false);
  ASSERT_TRUE(eventually([&] { return a->elector->IsLeader(); }, 10s));
  auto b = start_candidate("b", true);
  std::this_thread::sleep_for(3 * kRetry);
  EXPECT_FALSE(b->elector->IsLeader());

  const auto killed = std::chrono::steady_clock::now();
  a->thread.request_stop();  // "killed": stops renewing, never releases
  a->thread.join();
  ASSERT_TRUE(eventually([&] { return b->elector->IsLeader(); }, 10s));
  const auto handover = std::chrono::steady_clock::now() - killed;
  EXPECT_LE(handover, kLease + 3 * kRetry);
  EXPECT_GE(handover, kLease - 3 * kRetry);
  auto lease = client_->Get({resources::Leases(), "default", "k8s-client-test", ""});
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  EXPECT_EQ((*lease)["spec"]["holderIdentity"], "b");
  EXPECT_EQ((*lease)["spec"]["leaseTransitions"], 1);
}

}  // namespace
}  // namespace mf::k8s
