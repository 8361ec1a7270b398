// The client library (src/k8s) against the real control plane of `modelfleet-local up`:
// kube-apiserver v1.37, etcd, kube-controller-manager and kube-scheduler built from their Go
// modules into build/go/bin, plus our node agent. The test starts the binary itself, with a data
// directory of its own and a free port, and talks to it over HTTPS as the admin of the kubeconfig
// it writes (client certificate, the cluster's CA), or as a ServiceAccount with a token kubeconfig
// from `modelfleet-local kubeconfig`.
//
// Two clusters, one after the other:
//  - LocalClusterTest: one cluster for the suite, default settings (the watch cache on, so the
//    server sends BOOKMARKs: every minute, and 2 s before a watch's timeoutSeconds, which is the
//    one the tests use so they stay bounded). Its last test kills `up` and starts it again on the
//    same data directory and port.
//  - LocalClusterCompactionTest: --watch-cache=false --etcd-compaction-interval=2s, so a watch
//    from an old resourceVersion gets 410 Gone within seconds (with the watch cache, a 410 needs
//    more history than a test can write quickly, or a restart).
// Skipped, with a message, when modelfleet-local or build/go/bin/kube-apiserver is not built.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
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
using SteadyClock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// Where things are.

std::string LocalBinary() {
  if (const char* env = std::getenv("MODELFLEET_LOCAL_BINARY")) return env;
  return MODELFLEET_LOCAL_BINARY;
}

// BUILD/tools/local/modelfleet-local -> BUILD/go/bin, where scripts/build-go-tools.sh puts the
// control plane (and where `up` looks for it).
fs::path GoBinDir() { return fs::path(LocalBinary()).parent_path().parent_path().parent_path() / "go" / "bin"; }

// From the build (not __FILE__: ccache's base-dir rewriting makes that relative to the build tree).
fs::path CrdDir() {
  if (const char* env = std::getenv("MODELFLEET_SOURCE_DIR")) return fs::path(env) / "crds";
  return MODELFLEET_CRD_DIR;
}

// Why the tests cannot run here, or "".
std::string SkipReason() {
  if (!fs::exists(LocalBinary())) {
    return "modelfleet-local is not built (" + LocalBinary() + "); build the target modelfleet-local";
  }
  if (!fs::exists(GoBinDir() / "kube-apiserver")) {
    return "the control plane is not built (" + (GoBinDir() / "kube-apiserver").string() +
           " is missing); run scripts/build-go-tools.sh";
  }
  return "";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Tail(const fs::path& path, size_t bytes = 3000) {
  const std::string text = ReadFile(path);
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout, std::chrono::milliseconds poll = 50ms) {
  const auto deadline = SteadyClock::now() + timeout;
  while (!pred()) {
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

double SecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// resourceVersions are opaque to clients, but etcd's are revisions; the tests compare them to
// tell "the informer moved on" from "it stayed".
uint64_t Revision(const std::string& rv) {
  uint64_t out = 0;
  std::from_chars(rv.data(), rv.data() + rv.size(), out);
  return out;
}

// The resourceVersion query parameter of a request target, or "".
std::string QueryResourceVersion(const std::string& target) {
  for (const char* key : {"?resourceVersion=", "&resourceVersion="}) {
    size_t at = target.find(key);
    if (at == std::string::npos) continue;
    at += std::strlen(key);
    return target.substr(at, target.find('&', at) - at);
  }
  return "";
}

// YAML (the CRD manifests) to JSON: quoted scalars stay strings, plain ones are typed as YAML 1.2's
// core schema types them.
Json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      Json out = Json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      Json out = Json::array();
      for (const auto& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      if (node.Tag() == "!") return s;
      if (s == "true" || s == "True") return true;
      if (s == "false" || s == "False") return false;
      if (s == "null" || s == "~") return nullptr;
      int64_t i = 0;
      if (auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), i);
          ec == std::errc() && end == s.data() + s.size()) {
        return i;
      }
      double d = 0;
      if (auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
          ec == std::errc() && end == s.data() + s.size() && !s.empty()) {
        return d;
      }
      return s;
    }
    default:
      return nullptr;
  }
}

// Runs a program to completion (bounded); returns its exit code, or -1.
int RunProgram(const std::vector<std::string>& args, const fs::path& log, std::chrono::seconds timeout) {
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, const_cast<char* const*>(argv.data()), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  const auto deadline = SteadyClock::now() + timeout;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (SteadyClock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(20ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// ---------------------------------------------------------------------------------------------
// A transport in front of HttpTransport that records request targets (so a test sees which
// resourceVersion an informer watches from) and can partition the client from the server: the
// open watch streams are cut, like a dropped connection, and new requests fail as unreachable.

class TapTransport : public Transport {
 public:
  explicit TapTransport(std::shared_ptr<Transport> inner) : inner_(std::move(inner)) {}

  StatusOr<HttpResponse> Send(const HttpRequest& request) override {
    Record(request);
    if (partitioned_.load()) return Unavailable("connection refused (partitioned by the test)");
    return inner_->Send(request);
  }

  StatusOr<HttpResponse> Stream(const HttpRequest& request, const ChunkHandler& on_chunk,
                                std::stop_token stop) override {
    const std::optional<size_t> watch = Record(request);
    std::string pending;  // bytes after the last newline of the watch stream
    const ChunkHandler tapped = [&](std::string_view chunk) {
      if (watch) NoteBookmarks(*watch, chunk, &pending);
      return on_chunk(chunk);
    };
    std::stop_source cut;
    int id;
    {
      std::lock_guard lock(mu_);
      if (partitioned_.load()) return Unavailable("connection refused (partitioned by the test)");
      id = next_id_++;
      open_[id] = &cut;
    }
    std::stop_callback forward(stop, [&cut] { cut.request_stop(); });
    StatusOr<HttpResponse> response = inner_->Stream(request, tapped, cut.get_token());
    bool was_cut;
    {
      std::lock_guard lock(mu_);
      open_.erase(id);
      was_cut = cut_ids_.erase(id) > 0;
    }
    if (was_cut && !stop.stop_requested()) return Unavailable("connection reset (partitioned by the test)");
    return response;
  }

  void Partition(bool on) {
    std::lock_guard lock(mu_);
    partitioned_ = on;
    if (!on) return;
    for (auto& [id, source] : open_) {
      cut_ids_.insert(id);
      source->request_stop();
    }
  }

  // GET targets with watch=true, in order.
  std::vector<std::string> WatchTargets() const {
    std::lock_guard lock(mu_);
    return watches_;
  }

  // The resourceVersions of the BOOKMARK events each watch (by index into WatchTargets) received.
  std::map<size_t, std::vector<std::string>> Bookmarks() const {
    std::lock_guard lock(mu_);
    return bookmarks_;
  }

 private:
  std::optional<size_t> Record(const HttpRequest& request) {
    if (request.target.find("watch=true") == std::string::npos) return std::nullopt;
    std::lock_guard lock(mu_);
    watches_.push_back(request.target);
    return watches_.size() - 1;
  }

  void NoteBookmarks(size_t watch, std::string_view chunk, std::string* pending) {
    pending->append(chunk);
    size_t start = 0;
    for (size_t nl; (nl = pending->find('\n', start)) != std::string::npos; start = nl + 1) {
      const Json event = Json::parse(std::string_view(*pending).substr(start, nl - start), nullptr, false);
      if (!event.is_object() || event.value("type", "") != "BOOKMARK") continue;
      std::lock_guard lock(mu_);
      bookmarks_[watch].push_back(ResourceVersion(event.value("object", Json::object())));
    }
    pending->erase(0, start);
  }

  const std::shared_ptr<Transport> inner_;
  mutable std::mutex mu_;
  std::atomic<bool> partitioned_{false};
  int next_id_ = 0;
  std::map<int, std::stop_source*> open_;
  std::set<int> cut_ids_;
  std::vector<std::string> watches_;
  std::map<size_t, std::vector<std::string>> bookmarks_;
};

// ---------------------------------------------------------------------------------------------
// One `modelfleet-local up` over a data directory that outlives restarts of the process.

class LocalCluster {
 public:
  explicit LocalCluster(std::string apiserver_flags) : apiserver_flags_(std::move(apiserver_flags)) {
    std::string pattern = (fs::temp_directory_path() / "k8s-local-test-XXXXXX").string();
    root_ = mkdtemp(pattern.data());
  }
  ~LocalCluster() {
    Stop();
    if (!std::getenv("MODELFLEET_KEEP_TEST_DIR")) {
      std::error_code ec;
      fs::remove_all(root_, ec);
    }
  }
  LocalCluster(const LocalCluster&) = delete;
  LocalCluster& operator=(const LocalCluster&) = delete;

  // Starts `up` (port 0: a free one; afterwards pass port() to come back on the same address) and
  // waits until it has written the admin kubeconfig, which it does once kube-apiserver is ready
  // and the node is Ready.
  Status Start(int port) {
    const auto started = SteadyClock::now();
    std::error_code ec;
    fs::remove(kubeconfig(), ec);
    std::vector<std::string> args = {LocalBinary(),
                                     "up",
                                     "--data-dir=" + data_dir().string(),
                                     "--port=" + std::to_string(port),
                                     "--kubeconfig=" + kubeconfig().string(),
                                     "--log-level=warning"};
    if (!apiserver_flags_.empty()) args.push_back("--apiserver-flags=" + apiserver_flags_);
    std::vector<const char*> argv;
    for (const auto& a : args) argv.push_back(a.c_str());
    argv.push_back(nullptr);
    const std::string log_path = log().string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, const_cast<char* const*>(argv.data()), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) return Internal("cannot start " + LocalBinary() + ": " + std::strerror(rc));

    const auto deadline = started + 120s;
    while (SteadyClock::now() < deadline) {
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return Internal("modelfleet-local exited at start:\n" + Tail(log()));
      }
      if (fs::exists(kubeconfig())) {
        auto config = ParseKubeconfig(ReadFile(kubeconfig()), root_);
        if (config.ok() && !config->server.empty()) {
          config_ = *config;
          port_ = std::stoi(config_.server.substr(config_.server.rfind(':') + 1));
          if (port != 0 && port_ != port) return Internal("came back on port " + std::to_string(port_));
          std::cout << "[cluster] up at " << config_.server << " after " << SecondsSince(started) << " s"
                    << (apiserver_flags_.empty() ? "" : " (--apiserver-flags " + apiserver_flags_ + ")") << "\n";
          return Status::Ok();
        }
      }
      std::this_thread::sleep_for(100ms);
    }
    Stop();
    return DeadlineExceeded("modelfleet-local did not write its kubeconfig within 120 s:\n" + Tail(log()));
  }

  // SIGKILL of `up` itself: every component dies with it (parent-death signal). Returns once
  // none is left, so a restart never meets the previous etcd on the same data directory.
  void Kill() { Terminate(SIGKILL, 10s); }
  // Ctrl-C: `up` stops the pods and the components.
  void Stop() { Terminate(SIGTERM, 60s); }

  StatusOr<std::unique_ptr<Client>> AdminClient(ClientOptions options = {}) const {
    options.qps = 0;
    return NewClient(config_, options);
  }

  const ClusterConfig& config() const { return config_; }
  int port() const { return port_; }
  fs::path data_dir() const { return root_ / "data"; }
  fs::path kubeconfig() const { return data_dir() / "kubeconfig"; }
  fs::path log() const { return root_ / "up.log"; }
  const fs::path& root() const { return root_; }

  // Diagnostics for a failed assertion.
  std::string Logs() const {
    return "--- up.log\n" + Tail(log()) + "\n--- kube-apiserver.log\n" +
           Tail(data_dir() / "logs" / "kube-apiserver.log");
  }

 private:
  void Terminate(int signal, std::chrono::seconds grace) {
    if (pid_ <= 0) return;
    kill(pid_, signal);
    int status;
    const auto deadline = SteadyClock::now() + grace;
    while (waitpid(pid_, &status, WNOHANG) != pid_) {
      if (SteadyClock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    pid_ = -1;
    // The components run in process groups of their own; wait for the parent-death signal to
    // have taken them (their command lines name the data directory).
    Eventually([&] { return ProcessesUsingDataDir() == 0; }, 15s);
  }

  int ProcessesUsingDataDir() const {
    const std::string needle = data_dir().string();
    int n = 0;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator("/proc", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit) || std::stoi(name) == getpid()) continue;
      std::string cmdline = ReadFile(entry.path() / "cmdline");
      std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
      if (cmdline.find(needle) != std::string::npos) ++n;
    }
    return n;
  }

  const std::string apiserver_flags_;
  fs::path root_;
  pid_t pid_ = -1;
  int port_ = 0;
  ClusterConfig config_;
};

// ---------------------------------------------------------------------------------------------
// Helpers shared by both suites.

const GroupVersionResource kCrds{"apiextensions.k8s.io", "v1", "customresourcedefinitions", false};
const GroupVersionResource kRoles{"rbac.authorization.k8s.io", "v1", "roles", true};
const GroupVersionResource kRoleBindings{"rbac.authorization.k8s.io", "v1", "rolebindings", true};

Json ConfigMap(const std::string& ns, const std::string& name, const std::string& value, bool labelled = true) {
  Json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", name}, {"namespace", ns}}},
             {"data", {{"v", value}}}};
  if (labelled) cm["metadata"]["labels"] = {{"suite", "k8s-client"}};
  return cm;
}

// Writes `value` into configmap ns/name (creating it) with server-side apply; the new resourceVersion.
std::string Write(Client& client, const std::string& ns, const std::string& name, const std::string& value,
                  bool labelled = true) {
  auto r =
      client.Apply({resources::ConfigMaps(), ns, name, ""}, ConfigMap(ns, name, value, labelled), "k8s-client-test");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? ResourceVersion(*r) : "";
}

Status CreateNamespace(Client& client, const std::string& name) {
  auto r = client.Create({resources::Namespaces(), "", "", ""},
                         {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}});
  return r.ok() || IsAlreadyExists(r.status()) ? Status::Ok() : r.status();
}

// Informer notifications as strings ("add a@12", "update a@12->13", "delete b@14"), in order.
class Recorder {
 public:
  EventHandlers Handlers() {
    return {
        .on_add = [this](const ObjectPtr& o) { Push("add " + NameRv(*o)); },
        .on_update = [this](const ObjectPtr& o,
                            const ObjectPtr& n) { Push("update " + NameRv(*o) + "->" + ResourceVersion(*n)); },
        .on_delete = [this](const ObjectPtr& o) { Push("delete " + NameRv(*o)); },
    };
  }
  bool WaitFor(size_t n, std::chrono::milliseconds timeout = 30s) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return seen_.size() >= n; });
  }
  std::vector<std::string> Seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }

 private:
  static std::string NameRv(const Json& o) { return StringAt(MetadataOf(o), "name") + "@" + ResourceVersion(o); }
  void Push(std::string e) {
    std::lock_guard lock(mu_);
    seen_.push_back(std::move(e));
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> seen_;
};

// ---------------------------------------------------------------------------------------------
// Suite 1: one cluster with default settings for every test that needs no other.

class LocalClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    skip_ = SkipReason();
    if (!skip_.empty()) return;
    cluster_ = new LocalCluster("");
    started_ = cluster_->Start(0);
  }
  static void TearDownTestSuite() {
    if (!cluster_) return;
    const auto stopping = SteadyClock::now();
    delete cluster_;
    cluster_ = nullptr;
    std::cout << "[cluster] stopped in " << SecondsSince(stopping) << " s\n";
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(started_.ok()) << started_.ToString();
    auto client = cluster_->AdminClient({.backoff_base = 20ms, .backoff_cap = 500ms});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }
  void TearDown() override {
    if (HasFailure() && cluster_) std::cout << cluster_->Logs() << "\n";
  }

  // A namespace of the test's own, so tests never see each other's objects.
  std::string Namespace(const std::string& name) {
    Status s = CreateNamespace(*client_, name);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return name;
  }

  // Suites run one after the other (gtest keeps a suite's tests together), so the derived suite
  // reuses these slots for its own cluster.
  static inline std::string skip_;
  static inline LocalCluster* cluster_ = nullptr;
  static inline Status started_;
  std::unique_ptr<Client> client_;
};

TEST_F(LocalClusterTest, CrudPagingAndConflictsRetried) {
  const std::string ns = Namespace("t-crud");
  const ResourceRef collection{resources::ConfigMaps(), ns, "", ""};
  const ResourceRef ref{resources::ConfigMaps(), ns, "settings", ""};
  auto created = client_->Create(collection, ConfigMap(ns, "settings", "0"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  Status exists = client_->Create(collection, ConfigMap(ns, "settings", "0")).status();
  EXPECT_TRUE(IsAlreadyExists(exists)) << exists.ToString();
  EXPECT_NE(exists.message().find("AlreadyExists: configmaps \"settings\" already exists (HTTP 409)"),
            std::string::npos)
      << exists.message();

  // A stale update is the real server's 409 ...
  Json stale = *created;
  stale["data"]["v"] = "stale";
  ASSERT_TRUE(client_->Patch(ref, PatchType::kMerge, {{"data", {{"other", "x"}}}}).ok());
  Status conflict = client_->Update(ref, stale).status();
  EXPECT_TRUE(IsConflict(conflict)) << conflict.ToString();
  EXPECT_NE(conflict.message().find("Conflict: Operation cannot be fulfilled on configmaps \"settings\": the object "
                                    "has been modified; please apply your changes to the latest version"),
            std::string::npos)
      << conflict.message();
  // ... and RetryOnConflict rides it out: the first attempt loses to a racing writer.
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
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["data"], (Json{{"v", "mine"}, {"other", "x"}, {"racer", "1"}}));

  auto patched = client_->Patch(ref, PatchType::kJson, Json::array({{{"op", "remove"}, {"path", "/data/racer"}}}));
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_FALSE((*patched)["data"].contains("racer"));
  auto strategic = client_->Patch(ref, PatchType::kStrategicMerge, {{"metadata", {{"labels", {{"tier", "gold"}}}}}});
  ASSERT_TRUE(strategic.ok()) << strategic.status().ToString();
  EXPECT_EQ((*strategic)["metadata"]["labels"], (Json{{"suite", "k8s-client"}, {"tier", "gold"}}));

  // Paging: limit=2 over 6 objects follows the continue tokens into one list.
  for (int i = 0; i < 5; ++i) ASSERT_FALSE(Write(*client_, ns, "page-" + std::to_string(i), "x").empty());
  auto paged = client_->List(collection, {.label_selector = "suite=k8s-client", .limit = 2});
  ASSERT_TRUE(paged.ok()) << paged.status().ToString();
  EXPECT_EQ((*paged)["items"].size(), 6u);
  EXPECT_FALSE((*paged)["metadata"].contains("continue"));
  EXPECT_FALSE(ResourceVersion(*paged).empty());

  // Delete guarded by a UID that is not the object's: the server refuses (409), nothing deleted.
  Status guarded = client_->Delete(ref, "00000000-0000-0000-0000-000000000000");
  EXPECT_TRUE(IsConflict(guarded)) << guarded.ToString();
  EXPECT_NE(guarded.message().find("Conflict: Operation cannot be fulfilled on ConfigMap \"settings\": the UID in "
                                   "the precondition (00000000-0000-0000-0000-000000000000) does not match"),
            std::string::npos)
      << guarded.message();
  ASSERT_TRUE(client_->Delete(ref, StringAt((*got)["metadata"], "uid")).ok());
  EXPECT_TRUE(IsNotFound(client_->Get(ref).status()));
  Status again = client_->Delete(ref);
  EXPECT_TRUE(IsNotFound(again)) << again.ToString();
  EXPECT_NE(again.message().find("NotFound: configmaps \"settings\" not found (HTTP 404)"), std::string::npos)
      << again.message();
}

TEST_F(LocalClusterTest, ServerSideApplyWithFieldManagers) {
  const std::string ns = Namespace("t-apply");
  const ResourceRef ref{resources::ConfigMaps(), ns, "shared", ""};
  const auto owners = [](const Json& object) {
    std::map<std::string, std::string> out;  // manager -> operation
    for (const Json& f : object["metadata"]["managedFields"]) out[f.value("manager", "")] = f.value("operation", "");
    return out;
  };
  auto first = client_->Apply(ref,
                              {{"apiVersion", "v1"},
                               {"kind", "ConfigMap"},
                               {"metadata", {{"name", "shared"}}},
                               {"data", {{"k", "one"}, {"mine", "1"}}}},
                              "manager-one", /*force=*/false);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ((owners(*first)), (std::map<std::string, std::string>{{"manager-one", "Apply"}}));

  // Another manager setting the same field to another value, without force: the real 409.
  Json theirs = {{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata", {{"name", "shared"}}},
                 {"data", {{"k", "two"}, {"theirs", "2"}}}};
  Status conflict = client_->Apply(ref, theirs, "manager-two", /*force=*/false).status();
  EXPECT_TRUE(IsConflict(conflict)) << conflict.ToString();
  EXPECT_NE(conflict.message().find("Conflict: Apply failed with 1 conflict: conflict with \"manager-one\": .data.k "
                                    "(HTTP 409)"),
            std::string::npos)
      << conflict.message();
  auto unchanged = client_->Get(ref);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_EQ((*unchanged)["data"], (Json{{"k", "one"}, {"mine", "1"}}));

  // The same value is no conflict: the field becomes co-owned.
  Json agreeing = theirs;
  agreeing["data"]["k"] = "one";
  auto shared = client_->Apply(ref, agreeing, "manager-two", /*force=*/false);
  ASSERT_TRUE(shared.ok()) << shared.status().ToString();
  EXPECT_EQ((*shared)["data"], (Json{{"k", "one"}, {"mine", "1"}, {"theirs", "2"}}));

  // With force the second manager takes the field over.
  auto forced = client_->Apply(ref, theirs, "manager-two", /*force=*/true);
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ((*forced)["data"], (Json{{"k", "two"}, {"mine", "1"}, {"theirs", "2"}}));
  for (const Json& f : (*forced)["metadata"]["managedFields"]) {
    const bool owns_k =
        f.contains("fieldsV1") && f["fieldsV1"].contains("f:data") && f["fieldsV1"]["f:data"].contains("f:k");
    EXPECT_EQ(owns_k, f["manager"] == "manager-two") << f.dump();
  }
  // A manager that drops a field from its configuration gives it up: the field goes away.
  auto dropped = client_->Apply(
      ref, {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", "shared"}}}, {"data", {{"k", "one"}}}},
      "manager-one", /*force=*/true);
  ASSERT_TRUE(dropped.ok()) << dropped.status().ToString();
  EXPECT_EQ((*dropped)["data"], (Json{{"k", "one"}, {"theirs", "2"}}));
}

// The CRDs as shipped in crds/, by name.
std::map<std::string, Json> ShippedCrds() {
  std::map<std::string, Json> out;
  for (const auto& entry : fs::directory_iterator(CrdDir())) {
    if (entry.path().extension() != ".yaml") continue;
    for (const YAML::Node& doc : YAML::LoadAllFromFile(entry.path().string())) {
      if (!doc.IsMap()) continue;
      Json crd = YamlToJson(doc);
      const std::string name = crd["metadata"]["name"].get<std::string>();
      out[name] = std::move(crd);
    }
  }
  return out;
}

bool Established(Client& client, const std::string& name) {
  auto crd = client.Get({kCrds, "", name, ""});
  if (!crd.ok()) return false;
  for (const Json& c : crd->value("status", Json::object()).value("conditions", Json::array())) {
    if (c.value("type", "") == "Established" && c.value("status", "") == "True") return true;
  }
  return false;
}

TEST_F(LocalClusterTest, ShippedCrdsAreAcceptedByTheServer) {
  const std::map<std::string, Json> crds = ShippedCrds();
  ASSERT_EQ(crds.size(), 2u) << "CRDs in " << CrdDir();
  for (const auto& [name, crd] : crds) {
    // The real server checks what an emulation never did, e.g. the estimated cost of CEL rules.
    auto r = client_->Apply({kCrds, "", name, ""}, crd, "k8s-client-test");
    EXPECT_TRUE(r.ok()) << name << " as shipped in crds/: " << r.status().ToString();
    if (r.ok()) {
      EXPECT_TRUE(Eventually([&] { return Established(*client_, name); }, 30s)) << name;
    }
  }
}

TEST_F(LocalClusterTest, StatusAndScaleSubresourcesOfACrd) {
  // ModelDeployment from crds/, applied with our client: /status, and /scale over .spec.replicas,
  // .status.replicas and .status.selector; TrainingJob has /status only.
  std::map<std::string, Json> crds = ShippedCrds();
  for (const char* name : {"modeldeployments.modelfleet.io", "trainingjobs.modelfleet.io"}) {
    ASSERT_TRUE(crds.count(name)) << name << " is not in " << CrdDir();
    auto r = client_->Apply({kCrds, "", name, ""}, crds[name], "k8s-client-test");
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    ASSERT_TRUE(Eventually([&] { return Established(*client_, name); }, 30s)) << name;
  }

  const std::string ns = Namespace("t-crd");
  const ResourceRef ref{resources::ModelDeployments(), ns, "iris", ""};
  const Json md = {
      {"apiVersion", "modelfleet.io/v1alpha1"},
      {"kind", "ModelDeployment"},
      {"metadata", {{"name", "iris"}, {"namespace", ns}}},
      {"spec", {{"replicas", 2}, {"versions", {{{"name", "v1"}, {"storageUri", "file:///models/iris"}}}}}}};
  // The resource is served a moment after Established; creating is the check.
  StatusOr<Json> created = NotFound("not tried");
  ASSERT_TRUE(Eventually(
      [&] {
        created = client_->Create({resources::ModelDeployments(), ns, "", ""}, md);
        return !IsNotFound(created.status());
      },
      30s, 200ms));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const int64_t generation = (*created)["metadata"]["generation"];
  // The schema's validation runs on the real server: a bad storageUri is 422 -> InvalidArgument.
  Json invalid = md;
  invalid["metadata"]["name"] = "bad";
  invalid["spec"]["versions"][0]["storageUri"] = "ftp://nope";
  Status rejected = client_->Create({resources::ModelDeployments(), ns, "", ""}, invalid).status();
  EXPECT_EQ(rejected.code(), StatusCode::kInvalidArgument) << rejected.ToString();
  EXPECT_NE(rejected.message().find("Invalid: "), std::string::npos) << rejected.message();
  EXPECT_NE(rejected.message().find("(HTTP 422)"), std::string::npos) << rejected.message();

  // With the status subresource, the main resource ignores status ...
  Json with_status = *created;
  with_status["status"] = {{"replicas", 9}};
  auto ignored = client_->Update(ref, with_status);
  ASSERT_TRUE(ignored.ok()) << ignored.status().ToString();
  EXPECT_FALSE(ignored->contains("status")) << ignored->dump();
  // ... and /status writes status only, without a new generation.
  Json status_update = *ignored;
  status_update["spec"]["replicas"] = 7;  // ignored by /status
  status_update["status"] = {{"replicas", 2}, {"selector", "app=iris"}, {"readySummary", "0/2"}};
  auto status = client_->Update({resources::ModelDeployments(), ns, "iris", "status"}, status_update);
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  EXPECT_EQ((*status)["status"]["readySummary"], "0/2");
  EXPECT_EQ((*status)["spec"]["replicas"], 2);
  EXPECT_EQ((*status)["metadata"]["generation"], generation);
  auto status_patch = client_->Patch({resources::ModelDeployments(), ns, "iris", "status"}, PatchType::kMerge,
                                     {{"status", {{"readySummary", "2/2"}}}});
  ASSERT_TRUE(status_patch.ok()) << status_patch.status().ToString();
  EXPECT_EQ((*status_patch)["status"]["readySummary"], "2/2");
  EXPECT_EQ((*status_patch)["status"]["replicas"], 2);

  // /scale: an autoscaling/v1 Scale over .spec.replicas, .status.replicas and .status.selector.
  const ResourceRef scale_ref{resources::ModelDeployments(), ns, "iris", "scale"};
  auto scale = client_->Get(scale_ref);
  ASSERT_TRUE(scale.ok()) << scale.status().ToString();
  EXPECT_EQ((*scale)["kind"], "Scale");
  EXPECT_EQ((*scale)["apiVersion"], "autoscaling/v1");
  EXPECT_EQ((*scale)["spec"]["replicas"], 2);
  EXPECT_EQ((*scale)["status"]["replicas"], 2);
  EXPECT_EQ((*scale)["status"]["selector"], "app=iris");
  Json scaled = *scale;
  scaled["spec"]["replicas"] = 5;
  auto put = client_->Update(scale_ref, scaled);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ((*put)["spec"]["replicas"], 5);
  Status stale = client_->Update(scale_ref, scaled).status();  // the same resourceVersion again
  EXPECT_TRUE(IsConflict(stale)) << stale.ToString();
  auto patched = client_->Patch(scale_ref, PatchType::kMerge, {{"spec", {{"replicas", 3}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  auto after = client_->Get(ref);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)["spec"]["replicas"], 3);
  EXPECT_GT((*after)["metadata"]["generation"].get<int64_t>(), generation);
  Status negative = client_->Patch(scale_ref, PatchType::kMerge, {{"spec", {{"replicas", -1}}}}).status();
  EXPECT_EQ(negative.code(), StatusCode::kInvalidArgument) << negative.ToString();

  // TrainingJob has /status but no /scale: 404.
  Status no_scale = client_->Get({resources::TrainingJobs(), ns, "any", "scale"}).status();
  EXPECT_TRUE(IsNotFound(no_scale)) << no_scale.ToString();
}

TEST_F(LocalClusterTest, DeploymentScaleStatusAndStrategicMerge) {
  const std::string ns = Namespace("t-deploy");
  // Paused, so the deployment controller keeps its status but creates no ReplicaSet or pods.
  const Json deployment = {{"apiVersion", "apps/v1"},
                           {"kind", "Deployment"},
                           {"metadata", {{"name", "web"}, {"namespace", ns}}},
                           {"spec",
                            {{"replicas", 1},
                             {"paused", true},
                             {"selector", {{"matchLabels", {{"app", "web"}}}}},
                             {"template",
                              {{"metadata", {{"labels", {{"app", "web"}}}}},
                               {"spec",
                                {{"containers",
                                  {{{"name", "main"},
                                    {"image", "example.invalid/web:1"},
                                    {"command", {"sleep", "3600"}},
                                    {"env", {{{"name", "A"}, {"value", "1"}}}}}}}}}}}}}};
  auto created = client_->Create({resources::Deployments(), ns, "", ""}, deployment);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  const ResourceRef ref{resources::Deployments(), ns, "web", ""};

  // A strategic merge patch merges the containers list by name (a merge patch would replace it).
  auto patched = client_->Patch(
      ref, PatchType::kStrategicMerge,
      {{"spec",
        {{"template",
          {{"spec", {{"containers", {{{"name", "main"}, {"env", {{{"name", "B"}, {"value", "2"}}}}}}}}}}}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  const Json& container = (*patched)["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(container["image"], "example.invalid/web:1");
  EXPECT_EQ(container["env"].size(), 2u) << container.dump();

  const ResourceRef scale_ref{resources::Deployments(), ns, "web", "scale"};
  auto scale = client_->Get(scale_ref);
  ASSERT_TRUE(scale.ok()) << scale.status().ToString();
  EXPECT_EQ((*scale)["kind"], "Scale");
  EXPECT_EQ((*scale)["spec"]["replicas"], 1);
  EXPECT_EQ((*scale)["status"]["selector"], "app=web");
  Json scaled = *scale;
  scaled["spec"]["replicas"] = 3;
  auto put = client_->Update(scale_ref, scaled);
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  auto got = client_->Get(ref);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["spec"]["replicas"], 3);
  auto scale_patch = client_->Patch(scale_ref, PatchType::kMerge, {{"spec", {{"replicas", 0}}}});
  ASSERT_TRUE(scale_patch.ok()) << scale_patch.status().ToString();
  got = client_->Get(ref);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)["spec"]["replicas"], 0);

  // The deployment controller (kube-controller-manager) writes /status; we read it there.
  const ResourceRef status_ref{resources::Deployments(), ns, "web", "status"};
  StatusOr<Json> status = NotFound("not read");
  ASSERT_TRUE(Eventually(
      [&] {
        status = client_->Get(status_ref);
        return status.ok() && (*status)["status"].value("observedGeneration", int64_t{0}) ==
                                  (*status)["metadata"]["generation"].get<int64_t>();
      },
      30s, 100ms))
      << (status.ok() ? status->dump() : status.status().ToString());
  bool paused_condition = false;
  for (const Json& c : (*status)["status"].value("conditions", Json::array())) {
    if (c.value("type", "") == "Progressing" && c.value("reason", "") == "DeploymentPaused") paused_condition = true;
  }
  EXPECT_TRUE(paused_condition) << (*status)["status"].dump();
  // A status write of our own through /status (what an operator does for its CRDs) is accepted too.
  Json mine = *status;
  mine["status"]["observedGeneration"] = (*status)["metadata"]["generation"];
  auto written = client_->Update(status_ref, mine);
  EXPECT_TRUE(written.ok() || IsConflict(written.status())) << written.status().ToString();
}

TEST_F(LocalClusterTest, WatchDecodesEventsAndBookmarks) {
  const std::string ns = Namespace("t-watch");
  const ResourceRef collection{resources::ConfigMaps(), ns, "", ""};
  auto list = client_->List(collection);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  const std::string from = ResourceVersion(*list);

  struct Watched {
    std::vector<WatchEvent> events;
    Status result;
    double seconds = 0;
  };
  // Two watches at once over the same 5 s window: with and without allowWatchBookmarks. The
  // server ends both at timeoutSeconds; the bookmark comes 2 s before that.
  const auto watch = [&](bool bookmarks, Watched* out) {
    return std::jthread([&, bookmarks, out](std::stop_token stop) {
      const auto start = SteadyClock::now();
      out->result = client_->Watch(
          collection,
          {.label_selector = "suite=k8s-client",  // not kube-root-ca.crt, which a controller adds
           .resource_version = from,
           .allow_bookmarks = bookmarks,
           .timeout = 5s},
          [out](WatchEvent&& e) {
            out->events.push_back(std::move(e));
            return true;
          },
          stop);
      out->seconds = SecondsSince(start);
    });
  };
  Watched with, without;
  {
    std::jthread a = watch(true, &with), b = watch(false, &without);
    const std::string r1 = Write(*client_, ns, "w", "1");
    const std::string r2 = Write(*client_, ns, "w", "2");
    ASSERT_TRUE(client_->Delete({resources::ConfigMaps(), ns, "w", ""}).ok());
    // Bounded: the server ends the watches after 5 s; stop them ourselves at 20 s.
    std::jthread watchdog([&](std::stop_token stop) {
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      if (!cv.wait_for(lock, stop, 20s, [] { return false; }) && !stop.stop_requested()) {
        a.request_stop();
        b.request_stop();
      }
    });
    a.join();
    b.join();
    watchdog.request_stop();

    for (Watched* w : {&with, &without}) {
      EXPECT_TRUE(w->result.ok()) << w->result.ToString();
      EXPECT_LT(w->seconds, 15) << "the server did not end the watch at timeoutSeconds";
      std::vector<std::string> changes;
      for (const WatchEvent& e : w->events) {
        if (e.type == WatchEventType::kBookmark) continue;
        const std::string type = e.type == WatchEventType::kAdded      ? "ADDED"
                                 : e.type == WatchEventType::kModified ? "MODIFIED"
                                 : e.type == WatchEventType::kDeleted  ? "DELETED"
                                                                       : "?";
        changes.push_back(type + " " + StringAt(MetadataOf(e.object), "name") + " " + e.object["data"].value("v", ""));
        if (e.type == WatchEventType::kAdded) {
          EXPECT_EQ(ResourceVersion(e.object), r1);
        }
        if (e.type == WatchEventType::kModified) {
          EXPECT_EQ(ResourceVersion(e.object), r2);
        }
        if (e.type == WatchEventType::kDeleted) {
          EXPECT_GT(Revision(ResourceVersion(e.object)), Revision(r2));
        }
      }
      EXPECT_EQ(changes, (std::vector<std::string>{"ADDED w 1", "MODIFIED w 2", "DELETED w 2"}));
    }
  }
  // Bookmarks: only when asked for; a bare object of the watched kind carrying a resourceVersion
  // at least as new as every change delivered before it.
  const auto count_bookmarks = [](const std::vector<WatchEvent>& events) {
    int bookmarks = 0;
    uint64_t last_change = 0;
    for (const WatchEvent& e : events) {
      if (e.type != WatchEventType::kBookmark) {
        last_change = Revision(ResourceVersion(e.object));
        continue;
      }
      ++bookmarks;
      EXPECT_EQ(e.object["kind"], "ConfigMap") << e.object.dump();
      EXPECT_GE(Revision(ResourceVersion(e.object)), last_change) << e.object.dump();
      EXPECT_FALSE(MetadataOf(e.object).contains("name")) << e.object.dump();
    }
    return bookmarks;
  };
  int bookmarks = count_bookmarks(with.events);
  // The server's bookmark is best effort: its watch cache sends it from a one-second ticker in the
  // last 2 s before timeoutSeconds, which a busy CI machine can let pass. Up to two more 5 s watches
  // from the same version (bounded: 10 s more at most) before calling it missing.
  for (int retry = 0; bookmarks == 0 && retry < 2; ++retry) {
    Watched again;
    watch(true, &again).join();
    EXPECT_TRUE(again.result.ok()) << again.result.ToString();
    bookmarks = count_bookmarks(again.events);
    std::cout << "[watch] no bookmark in the first 5 s watch; retry " << retry + 1 << ": " << bookmarks << "\n";
  }
  EXPECT_GE(bookmarks, 1);
  for (const WatchEvent& e : without.events) EXPECT_NE(e.type, WatchEventType::kBookmark) << e.object.dump();
  std::cout << "[watch] " << bookmarks << " bookmark(s) in a " << with.seconds << " s watch\n";
}

TEST_F(LocalClusterTest, InformerKeepsTheResourceVersionOfBookmarks) {
  const std::string ns = Namespace("t-bookmark");
  auto tap = std::make_shared<TapTransport>(*HttpTransport::Create(cluster_->config()));
  Client tapped(tap, cluster_->config(), {.qps = 0});
  Recorder recorder;
  // watch_timeout 4 s: each watch ends after 4 s with a bookmark 2 s before that.
  Informer informer(tapped, {.collection = {resources::ConfigMaps(), ns, "", ""},
                             .label_selector = "suite=k8s-client",
                             .watch_timeout = 4s,
                             .error_backoff_base = 50ms,
                             .error_backoff_cap = 500ms});
  informer.AddEventHandlers(recorder.Handlers());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(30s));
  ASSERT_TRUE(Eventually([&] { return !tap->WatchTargets().empty(); }, 10s));
  const std::string listed = QueryResourceVersion(tap->WatchTargets().front());

  // Changes the informer does not select move the server's resourceVersion on; only bookmarks can
  // tell the informer about them.
  const std::string unrelated = Write(*client_, ns, "unrelated", "1", /*labelled=*/false);
  ASSERT_GT(Revision(unrelated), Revision(listed));
  const auto start = SteadyClock::now();
  std::string resumed_from;
  // The server sends its bookmark from a one-second ticker in the last 2 s of each 4 s watch, best
  // effort. Give it about seven watches.
  const bool resumed = Eventually(
      [&] {
        for (const std::string& target : tap->WatchTargets()) {
          if (Revision(QueryResourceVersion(target)) >= Revision(unrelated))
            resumed_from = QueryResourceVersion(target);
        }
        return !resumed_from.empty();
      },
      30s);
  // The informer's contract, whatever the server chose to send: each watch starts from the newest
  // bookmark the one before it delivered, or later.
  const std::vector<std::string> targets = tap->WatchTargets();
  const auto bookmarks = tap->Bookmarks();
  const std::string history =
      testing::PrintToString(targets) + "; bookmarks by watch: " + testing::PrintToString(bookmarks);
  bool server_moved_on = false;
  for (const auto& [watch, versions] : bookmarks) {
    server_moved_on |= std::any_of(versions.begin(), versions.end(),
                                   [&](const std::string& v) { return Revision(v) >= Revision(unrelated); });
    if (watch + 1 < targets.size()) {
      EXPECT_GE(Revision(QueryResourceVersion(targets[watch + 1])), Revision(versions.back())) << history;
    }
  }
  if (resumed) {
    std::cout << "[bookmark] the informer re-watched from " << resumed_from << " (listed at " << listed
              << ", unrelated write at " << unrelated << ") after " << SecondsSince(start) << " s\n";
  } else {
    EXPECT_FALSE(server_moved_on) << "the server sent a bookmark past the unrelated write; the informer ignored it: "
                                  << history;
  }
  EXPECT_NE(targets.front().find("allowWatchBookmarks=true"), std::string::npos);
  EXPECT_EQ(informer.stats().lists, 1);
  EXPECT_TRUE(recorder.Seen().empty()) << testing::PrintToString(recorder.Seen());

  // And it still delivers what it selects, once.
  const std::string a1 = Write(*client_, ns, "a", "1");
  ASSERT_TRUE(recorder.WaitFor(1));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(recorder.Seen(), (std::vector<std::string>{"add a@" + a1}));
  EXPECT_EQ(informer.store().Size(), 1u);
  // Two CI runs (kube-apiserver v1.37.2) saw 4 and then 8 watches in a row without a bookmark
  // newer than the list, where every run here gets one in the first watch: the server owes none.
  // InformerTest.BookmarkAdvancesTheResumePoint covers the informer's side on a scripted server.
  if (!resumed) {
    GTEST_SKIP() << "kube-apiserver sent no bookmark past the unrelated write in 30 s: " << history;
  }
}

TEST_F(LocalClusterTest, LeaderElectionOnARealLease) {
  const std::string ns = Namespace("t-lease");
  constexpr auto kLease = 2000ms, kRenew = 1500ms, kRetry = 250ms;
  struct Candidate {
    std::unique_ptr<LeaderElector> elector;
    std::jthread thread;
    std::atomic<int> started{0}, stopped{0};
  };
  const auto start_candidate = [&](const std::string& id, bool release) {
    auto c = std::make_unique<Candidate>();
    LeaderElectionConfig config;
    config.lease_namespace = ns;
    config.lease_name = "k8s-client-test";
    config.identity = id;
    config.lease_duration = kLease;
    config.renew_deadline = kRenew;
    config.retry_period = kRetry;
    config.release_on_cancel = release;
    config.on_started_leading = [c = c.get()](std::stop_token stop) {
      ++c->started;
      std::mutex m;
      std::condition_variable_any cv;
      std::unique_lock lock(m);
      cv.wait(lock, stop, [] { return false; });
    };
    config.on_stopped_leading = [c = c.get()] { ++c->stopped; };
    auto elector = LeaderElector::Create(*client_, config);
    EXPECT_TRUE(elector.ok()) << elector.status().ToString();
    c->elector = std::move(*elector);
    c->thread = std::jthread([e = c->elector.get()](std::stop_token stop) { e->Run(stop); });
    return c;
  };
  const auto lease = [&] {
    auto l = client_->Get({resources::Leases(), ns, "k8s-client-test", ""});
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    return l.ok() ? (*l)["spec"] : Json::object();
  };

  auto a = start_candidate("a", /*release=*/false);
  ASSERT_TRUE(Eventually([&] { return a->elector->IsLeader(); }, 10s));
  auto b = start_candidate("b", /*release=*/true);
  std::this_thread::sleep_for(4 * kRetry);
  EXPECT_FALSE(b->elector->IsLeader());
  EXPECT_EQ(b->elector->Leader(), "a");
  Json spec = lease();
  EXPECT_EQ(spec["holderIdentity"], "a");
  EXPECT_EQ(spec["leaseDurationSeconds"], 2);
  EXPECT_EQ(spec["leaseTransitions"], 0);

  // a "crashes": it stops renewing and never releases, so b waits out the lease duration.
  const auto killed = SteadyClock::now();
  a->thread.request_stop();
  a->thread.join();
  ASSERT_TRUE(Eventually([&] { return b->elector->IsLeader(); }, 15s, 10ms));
  const auto handover = SteadyClock::now() - killed;
  std::cout << "[lease] takeover after an unreleased lease: " << std::chrono::duration<double>(handover).count()
            << " s (lease " << kLease.count() << " ms)\n";
  EXPECT_GE(handover, kLease - 2 * kRetry);
  EXPECT_LE(handover, kLease + 8 * kRetry);
  spec = lease();
  EXPECT_EQ(spec["holderIdentity"], "b");
  EXPECT_EQ(spec["leaseTransitions"], 1);
  EXPECT_EQ(a->started, 1);
  EXPECT_EQ(a->stopped, 1);

  // b stops cleanly and releases the lease: c need not wait for it to expire.
  auto c = start_candidate("c", /*release=*/true);
  std::this_thread::sleep_for(2 * kRetry);
  EXPECT_FALSE(c->elector->IsLeader());
  const auto released = SteadyClock::now();
  b->thread.request_stop();
  b->thread.join();
  ASSERT_TRUE(Eventually([&] { return c->elector->IsLeader(); }, 15s, 10ms));
  const auto release_handover = SteadyClock::now() - released;
  std::cout << "[lease] takeover after a released lease: " << std::chrono::duration<double>(release_handover).count()
            << " s\n";
  EXPECT_LT(release_handover, kLease);
  spec = lease();
  EXPECT_EQ(spec["holderIdentity"], "c");
  EXPECT_EQ(spec["leaseTransitions"], 2);
  EXPECT_EQ(b->stopped, 1);
  c->thread.request_stop();
  c->thread.join();
  EXPECT_EQ(lease()["holderIdentity"], "");  // released again
}

TEST_F(LocalClusterTest, EventRecorderWritesEventsTheServerAccepts) {
  const std::string ns = Namespace("t-events");
  auto subject = client_->Create({resources::ConfigMaps(), ns, "", ""}, ConfigMap(ns, "subject", "1"));
  ASSERT_TRUE(subject.ok()) << subject.status().ToString();
  auto node = client_->Get({resources::Nodes(), "", "local", ""});  // cluster-scoped: events go to "default"
  ASSERT_TRUE(node.ok()) << node.status().ToString();
  {
    EventRecorder recorder(*client_, {.component = "k8s-client-test", .instance = "test-host"});
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(recorder.Record(*subject, EventType::kNormal, "Tested", "hello").ok());
    ASSERT_TRUE(recorder.Record(*subject, EventType::kWarning, "Broken", std::string(2000, 'x')).ok());
    ASSERT_TRUE(recorder.Record(*node, EventType::kNormal, "NodeTested", "node event from " + ns).ok());
    recorder.Flush();
  }
  auto events = client_->List({resources::Events(), ns, "", ""}, {.field_selector = "involvedObject.name=subject"});
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  std::map<std::string, Json> by_reason;
  for (const Json& e : (*events)["items"]) by_reason[e.value("reason", "")] = e;
  ASSERT_EQ(by_reason.size(), 2u) << events->dump();
  Json& tested = by_reason["Tested"];
  EXPECT_EQ(tested["count"], 3);
  EXPECT_EQ(tested["type"], "Normal");
  EXPECT_EQ(tested["message"], "hello");
  EXPECT_EQ(tested["involvedObject"]["kind"], "ConfigMap");
  EXPECT_EQ(tested["involvedObject"]["namespace"], ns);
  EXPECT_EQ(tested["involvedObject"]["uid"], (*subject)["metadata"]["uid"]);
  EXPECT_EQ(tested["source"]["component"], "k8s-client-test");
  EXPECT_EQ(tested["reportingComponent"], "k8s-client-test");
  EXPECT_EQ(tested["reportingInstance"], "test-host");
  EXPECT_FALSE(tested.value("firstTimestamp", "").empty());
  EXPECT_FALSE(tested.value("lastTimestamp", "").empty());
  EXPECT_EQ(by_reason["Broken"]["type"], "Warning");
  EXPECT_EQ(by_reason["Broken"]["count"], 1);
  EXPECT_EQ(by_reason["Broken"]["message"].get<std::string>().size(), 1024u);

  auto node_events = client_->List({resources::Events(), "default", "", ""}, {.field_selector = "reason=NodeTested"});
  ASSERT_TRUE(node_events.ok()) << node_events.status().ToString();
  bool found = false;
  for (const Json& e : (*node_events)["items"]) {
    if (e.value("message", "") != "node event from " + ns) continue;
    found = true;
    EXPECT_EQ(e["involvedObject"]["kind"], "Node");
    EXPECT_FALSE(e["involvedObject"].contains("namespace"));
  }
  EXPECT_TRUE(found) << node_events->dump();
}

TEST_F(LocalClusterTest, ServiceAccountIsLimitedByItsRbac) {
  const std::string ns = Namespace("t-rbac");
  ASSERT_TRUE(client_
                  ->Create({resources::ServiceAccounts(), ns, "", ""},
                           {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "operator"}}}})
                  .ok());
  ASSERT_TRUE(client_->Create({resources::ConfigMaps(), ns, "", ""}, ConfigMap(ns, "existing", "1")).ok());
  const fs::path sa_kubeconfig = cluster_->root() / "operator.kubeconfig";
  const int rc = RunProgram({LocalBinary(), "kubeconfig", "--data-dir=" + cluster_->data_dir().string(),
                             "--service-account=" + ns + "/operator", "--output=" + sa_kubeconfig.string()},
                            cluster_->root() / "kubeconfig-command.log", 30s);
  ASSERT_EQ(rc, 0) << ReadFile(cluster_->root() / "kubeconfig-command.log");
  auto config = ParseKubeconfig(ReadFile(sa_kubeconfig), sa_kubeconfig.parent_path());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_TRUE(config->token != nullptr);
  EXPECT_TRUE(config->client_cert_pem.empty() && config->client_cert_file.empty());
  auto operator_client = NewClient(*config, {.qps = 0, .max_retries = 0});
  ASSERT_TRUE(operator_client.ok()) << operator_client.status().ToString();
  Client& sa = **operator_client;
  const ResourceRef collection{resources::ConfigMaps(), ns, "", ""};

  // No Role yet: 403 Forbidden, mapped to PermissionDenied with the server's reason and message.
  Status denied = sa.List(collection).status();
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied) << denied.ToString();
  EXPECT_NE(denied.message().find("Forbidden: configmaps is forbidden: User \"system:serviceaccount:" + ns +
                                  ":operator\" cannot list resource \"configmaps\" in API group \"\" in the "
                                  "namespace \"" +
                                  ns + "\" (HTTP 403)"),
            std::string::npos)
      << denied.message();
  Status watch_denied = sa.Watch(collection, {.timeout = 2s}, [](WatchEvent&&) { return true; });
  EXPECT_EQ(watch_denied.code(), StatusCode::kPermissionDenied) << watch_denied.ToString();
  Status lease_denied = sa.Get({resources::Leases(), ns, "x", ""}).status();
  EXPECT_EQ(lease_denied.code(), StatusCode::kPermissionDenied) << lease_denied.ToString();
  // A token the server does not know is 401, Unauthenticated.
  ClusterConfig bogus = *config;
  bogus.token = std::make_shared<StaticTokenSource>("not-a-token");
  auto stranger = NewClient(bogus, {.qps = 0, .max_retries = 0});
  ASSERT_TRUE(stranger.ok());
  Status unauthenticated = (*stranger)->List(collection).status();
  EXPECT_EQ(unauthenticated.code(), StatusCode::kUnauthenticated) << unauthenticated.ToString();
  EXPECT_NE(unauthenticated.message().find("(HTTP 401)"), std::string::npos) << unauthenticated.message();

  // A Role that allows reading configmaps, bound to the ServiceAccount.
  const auto role = [&](Json verbs) {
    return Json{{"apiVersion", "rbac.authorization.k8s.io/v1"},
                {"kind", "Role"},
                {"metadata", {{"name", "configmap-reader"}, {"namespace", ns}}},
                {"rules", {{{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"verbs", verbs}}}}};
  };
  ASSERT_TRUE(
      client_->Apply({kRoles, ns, "configmap-reader", ""}, role({"get", "list", "watch"}), "k8s-client-test").ok());
  ASSERT_TRUE(
      client_
          ->Apply(
              {kRoleBindings, ns, "operator-reads", ""},
              {{"apiVersion", "rbac.authorization.k8s.io/v1"},
               {"kind", "RoleBinding"},
               {"metadata", {{"name", "operator-reads"}, {"namespace", ns}}},
               {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", "configmap-reader"}}},
               {"subjects", {{{"kind", "ServiceAccount"}, {"name", "operator"}, {"namespace", ns}}}}},
              "k8s-client-test")
          .ok());
  // The RBAC authorizer reads Roles through its own informer: allowed within moments.
  StatusOr<Json> listed = Status(StatusCode::kUnknown, "not tried");
  ASSERT_TRUE(Eventually(
      [&] {
        listed = sa.List(collection);
        return listed.ok();
      },
      10s))
      << listed.status().ToString();
  bool existing = false;
  for (const Json& item : (*listed)["items"]) existing |= StringAt(MetadataOf(item), "name") == "existing";
  EXPECT_TRUE(existing) << listed->dump();
  EXPECT_TRUE(sa.Get({resources::ConfigMaps(), ns, "existing", ""}).ok());
  Status missing = sa.Get({resources::ConfigMaps(), ns, "missing", ""}).status();
  EXPECT_TRUE(IsNotFound(missing)) << missing.ToString();
  // Reading is not writing.
  Status create_denied = sa.Create(collection, ConfigMap(ns, "written", "1")).status();
  EXPECT_EQ(create_denied.code(), StatusCode::kPermissionDenied) << create_denied.ToString();
  EXPECT_NE(create_denied.message().find("cannot create resource \"configmaps\""), std::string::npos)
      << create_denied.message();

  ASSERT_TRUE(
      client_->Apply({kRoles, ns, "configmap-reader", ""}, role({"get", "list", "watch", "create"}), "k8s-client-test")
          .ok());
  StatusOr<Json> created = Status(StatusCode::kUnknown, "not tried");
  ASSERT_TRUE(Eventually(
      [&] {
        created = sa.Create(collection, ConfigMap(ns, "written", "1"));
        return created.ok();
      },
      10s))
      << created.status().ToString();
  // Still no other verb.
  Status delete_denied = sa.Delete({resources::ConfigMaps(), ns, "written", ""});
  EXPECT_EQ(delete_denied.code(), StatusCode::kPermissionDenied) << delete_denied.ToString();
}

// Last in its suite (it restarts the suite's cluster, which comes back on the same address with
// the same credentials, so tests after it would not notice).
TEST_F(LocalClusterTest, InformerResumesAcrossARestartOfTheWholeCluster) {
  const std::string ns = Namespace("t-restart");
  Recorder recorder;
  Informer informer(*client_, {.collection = {resources::ConfigMaps(), ns, "", ""},
                               .label_selector = "suite=k8s-client",
                               .error_backoff_base = 50ms,
                               .error_backoff_cap = 500ms});
  informer.AddEventHandlers(recorder.Handlers());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(30s));
  std::vector<std::string> expected;
  const std::string x1 = Write(*client_, ns, "x", "1");
  expected.push_back("add x@" + x1);
  const std::string y1 = Write(*client_, ns, "y", "1");
  expected.push_back("add y@" + y1);
  ASSERT_TRUE(recorder.WaitFor(expected.size()));
  auto before = client_->Get({resources::ConfigMaps(), ns, "x", ""});
  ASSERT_TRUE(before.ok());

  // Kill `up` (and with it etcd, kube-apiserver and the rest) and start it again on the same data
  // directory and port.
  const auto down = SteadyClock::now();
  cluster_->Kill();
  Status restarted = cluster_->Start(cluster_->port());
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  std::cout << "[restart] down and up again in " << SecondsSince(down) << " s\n";

  // The objects persisted in etcd.
  auto after = client_->Get({resources::ConfigMaps(), ns, "x", ""});
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ((*after)["metadata"]["uid"], (*before)["metadata"]["uid"]);
  EXPECT_EQ(ResourceVersion(*after), x1);
  EXPECT_EQ((*after)["data"]["v"], "1");

  // The informer reconnects by itself: a change made now arrives once (through the resumed watch,
  // or a relist if its resourceVersion was compacted meanwhile), and later ones in order.
  const std::string x2 = Write(*client_, ns, "x", "2");
  expected.push_back("update x@" + x1 + "->" + x2);
  ASSERT_TRUE(recorder.WaitFor(expected.size(), 60s)) << testing::PrintToString(recorder.Seen());
  ASSERT_TRUE(client_->Delete({resources::ConfigMaps(), ns, "y", ""}).ok());
  expected.push_back("delete y@");  // the DELETED event's resourceVersion is the deletion's
  const std::string z1 = Write(*client_, ns, "z", "1");
  expected.push_back("add z@" + z1);
  ASSERT_TRUE(recorder.WaitFor(expected.size()));
  std::this_thread::sleep_for(300ms);
  std::vector<std::string> seen = recorder.Seen();
  ASSERT_EQ(seen.size(), expected.size()) << testing::PrintToString(seen);
  EXPECT_TRUE(seen[3].starts_with("delete y@")) << seen[3];
  seen[3] = "delete y@";
  EXPECT_EQ(seen, expected);
  std::cout << "[restart] informer lists: " << informer.stats().lists << ", watches: " << informer.stats().watches
            << "\n";
  EXPECT_LE(informer.stats().lists, 2);
}

// ---------------------------------------------------------------------------------------------
// Suite 2: a cluster whose watches come straight from etcd (no watch cache) and whose etcd is
// compacted every 2 s, so a resourceVersion a client holds is gone within seconds.

class LocalClusterCompactionTest : public LocalClusterTest {
 protected:
  static void SetUpTestSuite() {
    skip_ = SkipReason();
    if (!skip_.empty()) return;
    cluster_ = new LocalCluster("--watch-cache=false --etcd-compaction-interval=2s");
    started_ = cluster_->Start(0);
  }
  static void TearDownTestSuite() { LocalClusterTest::TearDownTestSuite(); }
};

TEST_F(LocalClusterCompactionTest, InformerRelistsAfterGoneWithEveryChangeOnceInOrder) {
  const std::string ns = Namespace("t-gone");
  auto tap = std::make_shared<TapTransport>(*HttpTransport::Create(cluster_->config()));
  Client tapped(tap, cluster_->config(), {.qps = 0, .max_retries = 0});
  Recorder recorder;
  Informer informer(tapped, {.collection = {resources::ConfigMaps(), ns, "", ""},
                             .label_selector = "suite=k8s-client",
                             .error_backoff_base = 50ms,
                             .error_backoff_cap = 300ms});
  informer.AddEventHandlers(recorder.Handlers());
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(30s));

  std::vector<std::string> expected;
  const std::string a1 = Write(*client_, ns, "a", "1");
  expected.push_back("add a@" + a1);
  const std::string a2 = Write(*client_, ns, "a", "2");
  expected.push_back("update a@" + a1 + "->" + a2);
  const std::string b1 = Write(*client_, ns, "b", "1");
  expected.push_back("add b@" + b1);
  ASSERT_TRUE(recorder.WaitFor(expected.size()));
  const int64_t lists_before = informer.stats().lists;

  // Partition: the informer's watch is cut and it cannot reconnect. Meanwhile a changes, c is
  // created, b deleted, and compaction passes the informer's resourceVersion.
  tap->Partition(true);
  const std::string a3 = Write(*client_, ns, "a", "3");
  const std::string c1 = Write(*client_, ns, "c", "1");
  ASSERT_TRUE(client_->Delete({resources::ConfigMaps(), ns, "b", ""}).ok());
  ASSERT_TRUE(Eventually([&] { return tap->WatchTargets().size() >= 3; }, 10s));  // it keeps trying
  const std::string held = QueryResourceVersion(tap->WatchTargets().back());
  EXPECT_EQ(held, b1) << "the informer resumes from the last change it saw";
  const auto partitioned = SteadyClock::now();
  Status gone;
  ASSERT_TRUE(Eventually(
      [&] {
        gone = client_->Watch({resources::ConfigMaps(), ns, "", ""}, {.resource_version = held, .timeout = 1s},
                              [](WatchEvent&&) { return false; });
        return IsGone(gone);
      },
      40s, 250ms))
      << "resourceVersion " << held << " was not compacted: " << gone.ToString();
  std::cout << "[gone] resourceVersion " << held << " compacted " << SecondsSince(partitioned)
            << " s after the partition: " << gone.message() << "\n";
  EXPECT_NE(gone.message().find("Expired: The resourceVersion for the provided watch is too old. (HTTP 410)"),
            std::string::npos)
      << gone.message();
  EXPECT_EQ(recorder.Seen(), expected);

  // Healed: the informer's watch from `held` gets 410, it relists once, and the relist, diffed
  // against its cache, announces exactly what changed meanwhile: a (collapsed to its latest
  // state), c, and b's deletion with the last state it knew.
  const size_t before = expected.size();
  tap->Partition(false);
  ASSERT_TRUE(recorder.WaitFor(before + 3)) << testing::PrintToString(recorder.Seen());
  std::this_thread::sleep_for(300ms);  // nothing more may come
  const std::vector<std::string> seen = recorder.Seen();
  ASSERT_EQ(seen.size(), before + 3) << testing::PrintToString(seen);
  EXPECT_EQ(std::vector<std::string>(seen.begin(), seen.begin() + before), expected);
  std::vector<std::string> after(seen.begin() + before, seen.end());
  std::sort(after.begin(), after.end());
  EXPECT_EQ(after, (std::vector<std::string>{"add c@" + c1, "delete b@" + b1, "update a@" + a2 + "->" + a3}));
  EXPECT_EQ(informer.stats().lists, lists_before + 1);  // the 410 forced exactly one relist
  EXPECT_EQ(informer.store().Size(), 2u);

  // And it watches on from the relist's resourceVersion.
  const std::string a4 = Write(*client_, ns, "a", "4");
  ASSERT_TRUE(recorder.WaitFor(before + 4));
  EXPECT_EQ(recorder.Seen().back(), "update a@" + a3 + "->" + a4);
  EXPECT_EQ(informer.stats().lists, lists_before + 1);
}

}  // namespace
}  // namespace mf::k8s
