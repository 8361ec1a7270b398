// modelfleet-local: a real Kubernetes control plane on one machine.
//
//   modelfleet-local up [--data-dir D] [--port P] [--kubeconfig PATH] [--image-map F]
//                       [--extended-resources nvidia.com/gpu=4] [--simulate-pods] [--log-level L]
//   modelfleet-local kubeconfig --service-account NS/NAME [--data-dir D] [--output PATH]
//   modelfleet-local node-agent ...   (started by `up`)
//
// `up` runs etcd, kube-apiserver, kube-controller-manager and kube-scheduler (built from their
// Go modules) and our node agent inside a network namespace of the cluster's own (network.h),
// supervises them (supervisor.h), forwards https://127.0.0.1:P on the host to the API server, and
// writes the admin's kubeconfig once the node is Ready. State lives in D and survives restarts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "common/flags.h"
#include "common/logging.h"
#include "http/server.h"
#include "k8s/http_transport.h"
#include "tools/local/cluster/components.h"
#include "tools/local/cluster/host_sockets.h"
#include "tools/local/cluster/kubeconfig.h"
#include "tools/local/cluster/network.h"
#include "tools/local/cluster/pki.h"
#include "tools/local/cluster/supervisor.h"
#include "tools/local/kubelet/gpu_devices.h"
#include "tools/local/kubelet/kubelet.h"
#include "tools/local/kubelet/pod_paths.h"
#include "tools/local/kubelet/process.h"
#include "tools/local/kubelet/service_proxy.h"
#include "tools/local/kubelet/simulated_pods.h"

namespace mf::local {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

fs::path DefaultDataDir() {
  const char* home = std::getenv("HOME");
  return fs::path(home && *home ? home : ".") / ".modelfleet-local";
}

// build/go/bin next to build/tools/local/modelfleet-local, unless MODELFLEET_GO_BIN says otherwise.
fs::path DefaultGoBinDir(const fs::path& self) {
  if (const char* env = std::getenv("MODELFLEET_GO_BIN"); env && *env) return env;
  return self.parent_path().parent_path().parent_path() / "go" / "bin";
}

const std::string kInClusterApi = std::string("https://") + kNodeIp + ":" + std::to_string(kApiServerPort);

// `bulk`: API rate limits for writing the status of thousands of simulated pods.
StatusOr<std::unique_ptr<k8s::Client>> ClientFor(const fs::path& kubeconfig, bool bulk = false) {
  MF_ASSIGN_OR_RETURN(std::string text, ReadTextFile(kubeconfig));
  MF_ASSIGN_OR_RETURN(k8s::ClusterConfig config, k8s::ParseKubeconfig(text, kubeconfig.parent_path()));
  k8s::ClientOptions options;
  if (bulk) {
    options.qps = 500;
    options.burst = 1000;
  }
  options.max_retries = 0;  // callers poll
  options.request_timeout = 5s;
  options.user_agent = "modelfleet-local";
  return k8s::NewClient(config, options);
}

Status WriteComponentKubeconfigs(const fs::path& data_dir, const ClusterPki& pki) {
  for (const char* name : {"kube-controller-manager", "kube-scheduler", "node"}) {
    MF_ASSIGN_OR_RETURN(std::string cert, ReadTextFile(pki.Certificate(name)));
    MF_ASSIGN_OR_RETURN(std::string key, ReadTextFile(pki.Key(name)));
    MF_RETURN_IF_ERROR(WriteKubeconfig(
        ComponentKubeconfig(data_dir, name), kInClusterApi, pki.ca_pem,
        {.name = name, .client_certificate_pem = cert, .client_key_pem = key, .token = "", .ns = "default"}));
  }
  MF_ASSIGN_OR_RETURN(std::string cert, ReadTextFile(pki.Certificate("admin")));
  MF_ASSIGN_OR_RETURN(std::string key, ReadTextFile(pki.Key("admin")));
  return WriteKubeconfig(
      ComponentKubeconfig(data_dir, "admin"), kInClusterApi, pki.ca_pem,
      {.name = "admin", .client_certificate_pem = cert, .client_key_pem = key, .token = "", .ns = "default"});
}

// Polls `check` every 200 ms until it succeeds or `timeout` passes; the last error explains why.
Status WaitFor(const std::string& what, std::chrono::seconds timeout, const std::function<Status()>& check) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Status last = Status::Ok();
  while (true) {
    last = check();
    if (last.ok()) return last;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(200ms);
  }
  return DeadlineExceeded(what + " not ready after " + std::to_string(timeout.count()) + " s: " + last.message());
}

Status TcpReachable(const std::string& ip, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  close(fd);
  return rc == 0 ? Status::Ok() : Unavailable(ip + ":" + std::to_string(port) + " refuses connections");
}

bool NodeReady(const k8s::Json& node) {
  for (const auto& c : node.value("status", k8s::Json::object()).value("conditions", k8s::Json::array())) {
    if (c.value("type", "") == "Ready" && c.value("status", "") == "True") return true;
  }
  return false;
}

// What the node agent needs beyond a kubelet's rights: kube-proxy's (it proxies Services) and
// writing LoadBalancer Services' status (it plays the cloud's load balancer, as `minikube tunnel`).
Status Bootstrap(k8s::Client& admin, const std::string& node_name) {
  const k8s::Json node_user = k8s::Json::array(
      {{{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "User"}, {"name", "system:node:" + node_name}}});
  k8s::GroupVersionResource cluster_roles{"rbac.authorization.k8s.io", "v1", "clusterroles", false};
  k8s::Json role = {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "ClusterRole"},
      {"metadata", {{"name", "modelfleet-local:load-balancer"}}},
      {"rules",
       k8s::Json::array(
           {{{"apiGroups", {""}}, {"resources", {"services/status"}}, {"verbs", {"get", "patch", "update"}}}})}};
  MF_RETURN_IF_ERROR(
      admin.Apply({cluster_roles, "", "modelfleet-local:load-balancer"}, role, "modelfleet-local").status());
  for (const auto& [binding, role_name] :
       {std::pair<std::string, std::string>{"modelfleet-local:node-proxier", "system:node-proxier"},
        {"modelfleet-local:load-balancer", "modelfleet-local:load-balancer"}}) {
    k8s::Json object = {
        {"apiVersion", "rbac.authorization.k8s.io/v1"},
        {"kind", "ClusterRoleBinding"},
        {"metadata", {{"name", binding}}},
        {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "ClusterRole"}, {"name", role_name}}},
        {"subjects", node_user}};
    MF_RETURN_IF_ERROR(
        admin.Apply({k8s::resources::ClusterRoleBindings(), "", binding}, object, "modelfleet-local").status());
  }
  return Status::Ok();
}

constexpr int kFakeGpus = 4;
constexpr char kSimulatePodsHelp[] =
    "do not run pods: report every pod bound to the node Running and Ready at once, and delete deleted ones at "
    "once, as kwok does (benchmarks with thousands of pods)";
constexpr char kExtendedResourcesHelp[] =
    "the node's extended resources, NAME=COUNT,... (nvidia.com/gpu, unless given: the machine's GPUs from "
    "nvidia-smi -L or /dev/nvidia*, or 4 when it has none)";

std::map<std::string, int64_t> ParseResources(const std::string& text, Status* error) {
  std::map<std::string, int64_t> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(',', start);
    std::string item = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    if (item.empty()) continue;
    size_t eq = item.rfind('=');
    char* rest = nullptr;
    long long count = eq == std::string::npos ? -1 : std::strtoll(item.c_str() + eq + 1, &rest, 10);
    if (eq == std::string::npos || eq == 0 || count < 0 || (rest && *rest)) {
      *error = InvalidArgument("--extended-resources: \"" + item + "\" is not NAME=COUNT (e.g. nvidia.com/gpu=4)");
      return {};
    }
    out[item.substr(0, eq)] = count;
  }
  return out;
}

int Up(int argc, const char* const* argv) {
  FlagSet flags("modelfleet-local up", "Starts a Kubernetes control plane and a node on this machine.");
  std::string data_dir = DefaultDataDir().string();
  int port = 6443;
  std::string kubeconfig;
  std::string image_map;
  std::string extended_resources;  // the node agent finds nvidia.com/gpu unless it is given here
  std::string log_level = "info";
  std::string apiserver_flags;
  bool simulate_pods = false;
  flags.Add("apiserver-flags", &apiserver_flags, "extra kube-apiserver flags, separated by spaces");
  flags.Add("simulate-pods", &simulate_pods, kSimulatePodsHelp);
  flags.Add("data-dir", &data_dir, "where etcd's data, TLS material, logs, pod logs and volumes are kept");
  flags.Add("port", &port, "host port of the API server on 127.0.0.1 (0: any free port)");
  flags.Add("kubeconfig", &kubeconfig, "where to write the admin's kubeconfig (default: DATA_DIR/kubeconfig)");
  flags.Add("image-map", &image_map, "YAML map of container images to local programs, for the node agent");
  flags.Add("extended-resources", &extended_resources, kExtendedResourcesHelp);
  flags.Add("log-level", &log_level, "debug | info | warning | error");
  if (Status s = flags.Parse(argc, argv); !s.ok()) {
    std::cerr << s.message() << "\n\n" << flags.Usage();
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  log::Level level;
  if (!log::ParseLevel(log_level, &level)) {
    std::cerr << "--log-level must be debug, info, warning or error, not \"" << log_level << "\"\n";
    return 2;
  }
  log::SetLevel(level);
  if (port < 0 || port > 65535) {
    std::cerr << "--port must be between 0 and 65535\n";
    return 2;
  }
  Status parse_error = Status::Ok();
  auto resources = ParseResources(extended_resources, &parse_error);
  if (!parse_error.ok()) {
    std::cerr << parse_error.message() << "\n";
    return 2;
  }
  std::error_code ec;
  const fs::path data = fs::absolute(data_dir);
  fs::create_directories(data / "logs", ec);
  if (kubeconfig.empty()) kubeconfig = (data / "kubeconfig").string();
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  ControlPlaneLayout layout{.data_dir = data,
                            .go_bin_dir = DefaultGoBinDir(self),
                            .self_binary = self,
                            .node_name = "local",
                            .pki = {},
                            .image_map = image_map,
                            .extended_resources = resources,
                            .log_level = log_level,
                            .simulate_pods = simulate_pods};
  std::istringstream extra(apiserver_flags);
  for (std::string flag; extra >> flag;) layout.apiserver_flags.push_back(flag);
  auto fail = [](const std::string& what, const Status& s) {
    std::cerr << "modelfleet-local: " << what << ": " << s.message() << "\n";
    return 1;
  };
  auto pki = EnsureClusterPki(data / "pki", layout.node_name);
  if (!pki.ok()) return fail("cannot set up TLS", pki.status());
  layout.pki = *pki;
  if (Status s = WriteComponentKubeconfigs(data, *pki); !s.ok()) return fail("cannot write kubeconfigs", s);
  {
    std::ofstream policy(AuditPolicyPath(data), std::ios::trunc);
    policy << AuditPolicyYaml();
  }

  // Still single-threaded: fork the host-side broker, then leave the host's network.
  auto broker = StartHostSocketBroker(HostBrokerSocket(data));
  if (!broker.ok()) return fail("cannot start the host socket broker", broker.status());
  if (Status s = EnterClusterNetwork(); !s.ok()) return fail("cannot create the cluster network", s);
  auto api_listener = OpenHostListener(HostBrokerSocket(data), "127.0.0.1", static_cast<uint16_t>(port));
  if (!api_listener.ok()) return fail("cannot listen for the API server", api_listener.status());
  sockaddr_in bound{};
  socklen_t bound_len = sizeof bound;
  getsockname(*api_listener, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  const uint16_t host_port = ntohs(bound.sin_port);

  Supervisor supervisor;
  std::vector<ComponentSpec> components = ControlPlaneComponents(layout);
  auto start = [&](size_t i) { return supervisor.Start(components[i]); };
  std::cout << "modelfleet-local: starting etcd" << std::endl;
  if (Status s = start(0); !s.ok()) return fail("cannot start etcd", s);
  if (Status s = WaitFor("etcd", 60s, [] { return TcpReachable("127.0.0.1", kEtcdClientPort); }); !s.ok()) {
    return fail("etcd did not start (see " + components[0].log_path.string() + ")", s);
  }
  std::cout << "modelfleet-local: starting kube-apiserver" << std::endl;
  if (Status s = start(1); !s.ok()) return fail("cannot start kube-apiserver", s);
  ServiceProxy forward([&](const std::string&, uint16_t) -> StatusOr<int> { return dup(*api_listener); });
  forward.Apply({{.key = "host/kube-apiserver",
                  .vip = "127.0.0.1",
                  .ports = {{.port = host_port, .backends = {{.ip = kNodeIp, .port = kApiServerPort}}}}}});
  auto admin = ClientFor(ComponentKubeconfig(data, "admin"));
  if (!admin.ok()) return fail("cannot read the admin kubeconfig", admin.status());
  if (Status s = WaitFor("kube-apiserver", 120s, [&] { return (*admin)->Call("GET", "/readyz", "", "").status(); });
      !s.ok()) {
    return fail("kube-apiserver did not become ready (see " + components[1].log_path.string() + ")", s);
  }
  if (Status s = WaitFor("bootstrap RBAC", 30s, [&] { return Bootstrap(**admin, layout.node_name); }); !s.ok()) {
    return fail("cannot bootstrap the cluster", s);
  }
  std::cout << "modelfleet-local: starting kube-controller-manager, kube-scheduler and the node agent" << std::endl;
  for (size_t i = 2; i < components.size(); ++i) {
    if (Status s = start(i); !s.ok()) return fail("cannot start " + components[i].name, s);
  }
  Status node_ready = WaitFor("node " + layout.node_name, 60s, [&]() -> Status {
    auto node = (*admin)->Get({k8s::resources::Nodes(), "", layout.node_name});
    if (!node.ok()) return node.status();
    return NodeReady(*node) ? Status::Ok() : Unavailable("not Ready yet");
  });
  if (!node_ready.ok())
    return fail("the node agent did not register (see " + components.back().log_path.string() + ")", node_ready);

  auto admin_cert = ReadTextFile(pki->Certificate("admin"));
  auto admin_key = ReadTextFile(pki->Key("admin"));
  if (!admin_cert.ok() || !admin_key.ok()) return fail("cannot read the admin certificate", admin_cert.status());
  const std::string url = "https://127.0.0.1:" + std::to_string(host_port);
  // DATA_DIR/kubeconfig always (`modelfleet-local kubeconfig` reads it), --kubeconfig as well;
  // written last, so its presence says the cluster is ready.
  const KubeconfigUser admin_user{.name = "admin",
                                  .client_certificate_pem = *admin_cert,
                                  .client_key_pem = *admin_key,
                                  .token = "",
                                  .ns = "default"};
  for (const fs::path& path : {data / "kubeconfig", fs::absolute(kubeconfig)}) {
    if (Status s = WriteKubeconfig(path, url, pki->ca_pem, admin_user); !s.ok()) {
      return fail("cannot write the kubeconfig", s);
    }
  }
  std::cout << "modelfleet-local is up at " << url << " (data in " << data.string() << ")\n"
            << "Use it with kubectl:\n"
            << "  export KUBECONFIG=" << kubeconfig << "\n"
            << "  kubectl get nodes\n"
            << "Stop it with Ctrl-C; state is kept for the next `modelfleet-local up`.\n"
            << std::flush;
  int signal = http::WaitForTerminationSignal();
  log::Info("shutting down", {{"signal", std::to_string(signal)}});
  supervisor.Stop();
  // The node agent stops its pods; if it could not (it was crash-looping), no container outlives
  // the cluster.
  for (const fs::path& pid_file : AllContainerPidFiles(data)) {
    if (KillStaleProcessGroup(pid_file, 2s))
      log::Warning("stopped a container the node agent left", {{"pid_file", pid_file.string()}});
  }
  return 0;
}

int NodeAgent(int argc, const char* const* argv) {
  FlagSet flags("modelfleet-local node-agent", "The local node: runs pods as processes (started by `up`).");
  std::string data_dir, kubeconfig, image_map, extended_resources, node_name = "local", log_level = "info";
  bool simulate_pods = false;
  flags.Add("data-dir", &data_dir, "the cluster's data directory");
  flags.Add("simulate-pods", &simulate_pods, kSimulatePodsHelp);
  flags.Add("kubeconfig", &kubeconfig, "the node's kubeconfig");
  flags.Add("node-name", &node_name, "the Node's name");
  flags.Add("image-map", &image_map, "YAML map of container images to local programs");
  flags.Add("extended-resources", &extended_resources, kExtendedResourcesHelp);
  flags.Add("log-level", &log_level, "debug | info | warning | error");
  if (Status s = flags.Parse(argc, argv); !s.ok()) {
    std::cerr << s.message() << "\n\n" << flags.Usage();
    return 2;
  }
  log::Level level;
  if (log::ParseLevel(log_level, &level)) log::SetLevel(level);
  Status parse_error = Status::Ok();
  KubeletOptions options;
  options.data_dir = data_dir;
  options.node_name = node_name;
  options.node_ip = kNodeIp;
  options.extended_resources = ParseResources(extended_resources, &parse_error);
  options.simulate_pods = simulate_pods;
  options.host_broker = HostBrokerSocket(data_dir);
  options.pki_dir = fs::path(data_dir) / "pki";
  if (!parse_error.ok()) {
    std::cerr << parse_error.message() << "\n";
    return 2;
  }
  if (simulate_pods && !options.extended_resources.count(kGpuResource)) {
    options.extended_resources[kGpuResource] = kSimulatedNodePods;  // every simulated pod may ask for one
  } else if (!options.extended_resources.count(kGpuResource)) {
    // As NVIDIA's device plugin advertises them; without any, a few that tests can schedule on.
    const int found = DetectGpus(fs::path(data_dir) / "kubelet" / "nvidia-smi-L.txt");
    options.extended_resources[kGpuResource] = found > 0 ? found : kFakeGpus;
    log::Info("GPUs advertised", {{"nvidia.com/gpu", std::to_string(options.extended_resources[kGpuResource])},
                                  {"physical", std::to_string(found)}});
  }
  if (!image_map.empty()) {
    auto images = ImageMap::Load(image_map);
    if (!images.ok()) {
      std::cerr << images.status().message() << "\n";
      return 2;
    }
    options.images = std::move(*images);
  }
  auto client = ClientFor(kubeconfig, simulate_pods);
  if (!client.ok()) {
    std::cerr << "node-agent: " << client.status().message() << "\n";
    return 1;
  }
  Kubelet kubelet(client->get(), std::move(options));
  if (Status s = kubelet.Start(); !s.ok()) {
    std::cerr << "node-agent: " << s.message() << "\n";
    return 1;
  }
  int signal = http::WaitForTerminationSignal();
  log::Info("node agent shutting down", {{"signal", std::to_string(signal)}});
  kubelet.Stop();
  return 0;
}

int ServiceAccountKubeconfig(int argc, const char* const* argv) {
  FlagSet flags(
      "modelfleet-local kubeconfig",
      "Writes a kubeconfig that authenticates as a ServiceAccount (a bound token from the TokenRequest API).");
  std::string data_dir = DefaultDataDir().string(), service_account, output;
  int64_t hours = 24;
  flags.Add("data-dir", &data_dir, "the cluster's data directory (its admin kubeconfig is used)");
  flags.Add("service-account", &service_account, "NAMESPACE/NAME of the ServiceAccount");
  flags.Add("output", &output, "where to write it (default: DATA_DIR/kubeconfigs/sa-NAMESPACE-NAME.kubeconfig)");
  flags.Add("hours", &hours, "how long the token is valid");
  if (Status s = flags.Parse(argc, argv); !s.ok()) {
    std::cerr << s.message() << "\n\n" << flags.Usage();
    return 2;
  }
  size_t slash = service_account.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == service_account.size()) {
    std::cerr << "--service-account must be NAMESPACE/NAME\n";
    return 2;
  }
  const std::string ns = service_account.substr(0, slash), name = service_account.substr(slash + 1);
  const fs::path admin_path = fs::path(data_dir) / "kubeconfig";
  auto admin_text = ReadTextFile(admin_path);
  if (!admin_text.ok()) {
    std::cerr << "cannot read " << admin_path.string() << ": is the cluster up?\n";
    return 1;
  }
  auto config = k8s::ParseKubeconfig(*admin_text, admin_path.parent_path());
  if (!config.ok()) {
    std::cerr << config.status().message() << "\n";
    return 1;
  }
  auto client = k8s::NewClient(*config);
  if (!client.ok()) {
    std::cerr << client.status().message() << "\n";
    return 1;
  }
  k8s::Json request = {{"apiVersion", "authentication.k8s.io/v1"},
                       {"kind", "TokenRequest"},
                       {"spec", {{"expirationSeconds", hours * 3600}}}};
  auto answer = (*client)->Call("POST", "/api/v1/namespaces/" + ns + "/serviceaccounts/" + name + "/token",
                                request.dump(), "application/json");
  if (!answer.ok()) {
    std::cerr << "cannot get a token for " << service_account << ": " << answer.status().message() << "\n";
    return 1;
  }
  auto parsed = k8s::Json::parse(*answer, nullptr, false);
  std::string token = parsed.is_object() ? parsed.value("status", k8s::Json::object()).value("token", "") : "";
  if (token.empty()) {
    std::cerr << "the API server answered no token\n";
    return 1;
  }
  if (output.empty())
    output = (fs::path(data_dir) / "kubeconfigs" / ("sa-" + ns + "-" + name + ".kubeconfig")).string();
  Status written = WriteKubeconfig(output, config->server, config->ca_pem,
                                   {.name = "system:serviceaccount:" + ns + ":" + name,
                                    .client_certificate_pem = "",
                                    .client_key_pem = "",
                                    .token = token,
                                    .ns = ns});
  if (!written.ok()) {
    std::cerr << written.message() << "\n";
    return 1;
  }
  std::cout << output << "\n";
  return 0;
}

}  // namespace
}  // namespace mf::local

int main(int argc, char** argv) {
  const std::string command = argc >= 2 ? argv[1] : "";
  if (command == "up") return mf::local::Up(argc - 1, argv + 1);
  if (command == "node-agent") return mf::local::NodeAgent(argc - 1, argv + 1);
  if (command == "kubeconfig") return mf::local::ServiceAccountKubeconfig(argc - 1, argv + 1);
  std::cerr << "usage:\n"
               "  modelfleet-local up [--data-dir DIR] [--port PORT] [--kubeconfig PATH] [--image-map FILE]\n"
               "                      [--extended-resources nvidia.com/gpu=4] [--simulate-pods]\n"
               "  modelfleet-local kubeconfig --service-account NAMESPACE/NAME [--data-dir DIR] [--output PATH]\n";
  return 2;
}
