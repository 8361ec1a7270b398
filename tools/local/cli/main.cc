// modelfleet-local: a single-machine stand-in for a Kubernetes control plane.
//
//   modelfleet-local up [--data-dir D] [--port P] [--kubeconfig PATH] [--workloads=false] [--tls=false]
//
// Serves the Kubernetes API on https://127.0.0.1:PORT (with a CA and serving certificate of its
// own in D/pki) from a store persisted in D, writes a kubeconfig that trusts that CA, runs the
// built-in controllers and the local kubelet, and stops cleanly on SIGINT/SIGTERM. State
// survives restarts, including watch history.
#include <cstdlib>
#include <iostream>

#include "common/flags.h"
#include "common/logging.h"
#include "http/server.h"
#include "tools/local/apiserver/api_server.h"
#include "tools/local/cli/kubeconfig.h"
#include "tools/local/cli/pki.h"
#include "tools/local/controllers/run.h"
#include "tools/local/kubelet/pod_paths.h"
#include "tools/local/store/store.h"

namespace mf::local {
namespace {

std::filesystem::path DefaultDataDir() {
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : ".") / ".modelfleet-local";
}

Status EnsureNamespaces(Store& store) {
  for (const char* name : {"default", "kube-system", "kube-public", "kube-node-lease"}) {
    auto created = store.Create({"", "v1", "namespaces"}, "", {{"metadata", {{"name", name}}}});
    if (!created.ok() && created.status().code() != StatusCode::kAlreadyExists) return created.status();
  }
  return Status::Ok();
}

int Up(int argc, const char* const* argv) {
  FlagSet flags("modelfleet-local up", "Starts a local Kubernetes API server emulation with controllers and a local kubelet.");
  std::string data_dir = DefaultDataDir().string();
  int port = 6443;
  std::string address = "127.0.0.1";
  std::string kubeconfig;
  bool workloads = true;
  std::string image_map;
  std::string log_level = "info";
  int64_t watch_history = 20000;
  bool tls = true;
  flags.Add("data-dir", &data_dir, "where objects, watch history, pod logs and volumes are kept");
  flags.Add("port", &port, "port of the API server (0: any free port)");
  flags.Add("address", &address, "address to listen on (keep it loopback: there is no authentication)");
  flags.Add("kubeconfig", &kubeconfig, "where to write the kubeconfig (default: DATA_DIR/kubeconfig)");
  flags.Add("workloads", &workloads, "run the built-in controllers and the local kubelet");
  flags.Add("image-map", &image_map, "YAML map of container images to local programs, for the local kubelet");
  flags.Add("log-level", &log_level, "debug | info | warning | error");
  flags.Add("tls", &tls, "serve HTTPS with a certificate from the cluster's own CA in DATA_DIR/pki (false: plain HTTP, for debugging)");
  flags.Add("watch-history", &watch_history, "changes kept for watches resuming from a resourceVersion (older: 410 Expired)");
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
  if (watch_history < 1) {
    std::cerr << "--watch-history must be at least 1\n";
    return 2;
  }
  if (kubeconfig.empty()) kubeconfig = (std::filesystem::path(data_dir) / "kubeconfig").string();

  auto store = Store::Open({.data_dir = std::filesystem::path(data_dir) / "store",
                            .history_limit = static_cast<size_t>(watch_history)});
  if (!store.ok()) {
    std::cerr << "cannot open the store in " << data_dir << ": " << store.status().ToString() << "\n";
    return 1;
  }
  ApiServerOptions api_options;
  api_options.pod_log_path = [data_dir](const PodLogRequest& r) {
    return ContainerLogPath(data_dir, r.ns, r.pod, r.container, r.previous);
  };
  auto api = std::make_unique<ApiServer>(store->get(), api_options);
  if (Status s = api->Start(); !s.ok()) {
    std::cerr << "cannot start the API server: " << s.ToString() << "\n";
    return 1;
  }
  if (Status s = EnsureNamespaces(**store); !s.ok()) {
    std::cerr << "cannot create the default namespaces: " << s.ToString() << "\n";
    return 1;
  }
  http::ServerOptions server_options{.address = address, .port = static_cast<uint16_t>(port), .io_threads = 2,
                                     .max_body_bytes = 16 * 1024 * 1024, .server_header = "modelfleet-local"};
  std::string ca_pem;
  if (tls) {
    auto pki = EnsureServingPki(std::filesystem::path(data_dir) / "pki", address);
    if (!pki.ok()) {
      std::cerr << "cannot set up TLS: " << pki.status().message() << "\n";
      return 1;
    }
    ca_pem = pki->ca_certificate_pem;
    server_options.tls_certificate_chain_pem = std::move(pki->certificate_pem);
    server_options.tls_private_key_pem = std::move(pki->private_key_pem);
  }
  http::Server server(std::move(server_options), api->Handler());
  if (Status s = server.Start(); !s.ok()) {
    std::cerr << "cannot listen on " << address << ":" << port << ": " << s.message() << "\n";
    return 1;
  }
  // Clients dial loopback when the server listens on every address; IPv6 hosts need brackets.
  std::string host = address == "0.0.0.0" ? "127.0.0.1" : address == "::" ? "::1" : address;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  const std::string url = (tls ? "https://" : "http://") + host + ":" + std::to_string(server.port());
  if (Status s = WriteKubeconfig(kubeconfig, url, ca_pem); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  std::unique_ptr<LocalWorkloads> running;
  if (workloads) {
    LocalWorkloadsOptions options;
    options.data_dir = data_dir;
    options.image_map_path = image_map;
    options.extra_env = {{"KUBECONFIG", kubeconfig}};
    auto started = StartLocalWorkloads(**store, options);
    if (!started.ok()) {
      std::cerr << "cannot start the controllers and the local kubelet: " << started.status().ToString() << "\n";
      return 1;
    }
    running = std::move(started).value();
  }
  std::cout << "modelfleet-local is up at " << url << " (data in " << data_dir << ")\n"
            << "Use it with kubectl:\n"
            << "  export KUBECONFIG=" << kubeconfig << "\n"
            << "  kubectl get namespaces\n"
            << "Stop it with Ctrl-C; state is kept for the next `modelfleet-local up`.\n"
            << std::flush;
  int signal = http::WaitForTerminationSignal();
  log::Info("shutting down", {{"signal", std::to_string(signal)}});
  server.Drain(std::chrono::seconds(5));
  if (running) running->Stop();
  api.reset();
  return 0;
}

}  // namespace
}  // namespace mf::local

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) != "up") {
    std::cerr << "usage: modelfleet-local up [--data-dir DIR] [--port PORT] [--kubeconfig PATH] [--workloads=false] [--tls=false]\n";
    return 2;
  }
  return mf::local::Up(argc - 1, argv + 1);
}
