// modelfleet-router: the L7 load balancer in front of a ModelDeployment's versions. Splits REST
// and gRPC traffic by header routes, sticky hashing and weights, retries, mirrors and ejects failing
// endpoints, and exports per-version metrics (docs/router.md).
//
//   modelfleet-router --config=router.yaml                # static: endpoints in the file
//   modelfleet-router --configmap=ml/mnist-router         # in a cluster: ConfigMap + EndpointSlices
//
// Shutdown on SIGTERM/SIGINT: /readyz turns 503 at once while the proxy goes on serving for
// --not-ready-grace-seconds (so the Service stops sending here before anything is refused), then
// it drains in-flight requests for up to --drain-seconds and the process exits 0.
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

#include "common/flags.h"
#include "common/logging.h"
#include "http/server.h"
#include "http2/server.h"
#include "k8s/config.h"
#include "k8s/http_transport.h"
#include "server/router/config_watcher.h"
#include "server/router/grpc_proxy.h"
#include "server/router/report_pusher.h"
#include "server/router/rest_proxy.h"

namespace mf::router {
namespace {

struct RouterFlags {
  std::string config;
  std::string configmap;
  std::string kubeconfig;
  std::string address = "0.0.0.0";
  std::string report_url;
  std::string report_name;
  int rest_port = 8501;
  int grpc_port = 8500;
  int admin_port = 8081;
  std::string log_level = "info";
  bool log_json = false;
  int upstream_timeout_ms = 30'000;
  int connect_timeout_ms = 5'000;
  int io_threads = 0;
  int upstream_threads = 0;
  int eject_after_failures = 5;
  int eject_seconds = 30;
  int max_requests_per_endpoint = 0;
  int drain_seconds = 10;
  int not_ready_grace_seconds = 0;
};

StatusOr<k8s::ClusterConfig> LoadClusterConfig(const std::string& kubeconfig) {
  if (kubeconfig.empty()) return k8s::LoadDefaultConfig();
  std::ifstream in(kubeconfig);
  if (!in) return NotFound("cannot read --kubeconfig " + kubeconfig);
  std::stringstream text;
  text << in.rdbuf();
  return k8s::ParseKubeconfig(text.str(), std::filesystem::path(kubeconfig).parent_path());
}

int Main(int argc, char** argv) {
  FlagSet flag_set(
      "modelfleet-router",
      "Routes REST and gRPC traffic between a ModelDeployment's versions by header, sticky key and weight.");
  RouterFlags f;
  flag_set.Add("config", &f.config, "static mode: a router.yaml file, re-read when it changes");
  flag_set.Add("configmap", &f.configmap, "cluster mode: NAMESPACE/NAME of the ConfigMap holding router.yaml");
  flag_set.Add("kubeconfig", &f.kubeconfig, "cluster mode: kubeconfig file (default: in-cluster or $KUBECONFIG)");
  flag_set.Add("report-url", &f.report_url,
               "POST per-version counters here every second (the operator's /v1/reports; \"\": no reports)");
  flag_set.Add("report-name", &f.report_name, "NAMESPACE/NAME of the ModelDeployment the reports are about");
  flag_set.Add("address", &f.address,
               "address every port listens on (the operator passes the pod IP: a node agent without "
               "per-pod network namespaces runs many pods side by side)");
  flag_set.Add("rest-port", &f.rest_port, "REST (HTTP/1.1) proxy port");
  flag_set.Add("grpc-port", &f.grpc_port, "gRPC (HTTP/2) proxy port; 0 turns it off");
  flag_set.Add("admin-port", &f.admin_port, "port of /metrics, /healthz and /readyz");
  flag_set.Add("log-level", &f.log_level, "debug, info, warning or error");
  flag_set.Add("log-json", &f.log_json, "log JSON lines");
  flag_set.Add("upstream-timeout-ms", &f.upstream_timeout_ms, "deadline of one proxied request (504 after it)");
  flag_set.Add("connect-timeout-ms", &f.connect_timeout_ms, "deadline to connect to an upstream endpoint");
  flag_set.Add("io-threads", &f.io_threads, "threads serving clients (0: one per core)");
  flag_set.Add("upstream-threads", &f.upstream_threads, "threads talking to upstreams (0: one per core)");
  flag_set.Add("eject-after-failures", &f.eject_after_failures,
               "consecutive failures (connect, reset, timeout, 5xx) that eject an endpoint; 0: never");
  flag_set.Add("eject-seconds", &f.eject_seconds, "how long an ejected endpoint gets no traffic");
  flag_set.Add("max-requests-per-endpoint", &f.max_requests_per_endpoint,
               "requests in flight to one endpoint before it takes no more (503 when all are full); 0: no limit");
  flag_set.Add("drain-seconds", &f.drain_seconds, "on SIGTERM, how long in-flight requests may finish");
  flag_set.Add("not-ready-grace-seconds", &f.not_ready_grace_seconds,
               "on SIGTERM, how long the router answers not-ready but still serves before draining");
  if (Status s = flag_set.Parse(argc, argv); !s.ok()) {
    std::cerr << s.message() << "\n\n" << flag_set.Usage();
    return 2;
  }
  if (flag_set.help_requested()) {
    std::cout << flag_set.Usage();
    return 0;
  }
  log::Level level;
  if (!log::ParseLevel(f.log_level, &level)) {
    std::cerr << "--log-level must be debug, info, warning or error, got '" << f.log_level << "'\n";
    return 2;
  }
  log::SetLevel(level);
  log::SetJson(f.log_json);
  auto fail = [](const Status& status) {
    log::Error("cannot start", {{"error", status.ToString()}});
    return 1;
  };
  if (f.config.empty() == f.configmap.empty()) {
    return fail(InvalidArgument("give exactly one of --config=FILE (static) or --configmap=NAMESPACE/NAME"));
  }
  for (auto [name, port] :
       {std::pair{"--rest-port", f.rest_port}, {"--grpc-port", f.grpc_port}, {"--admin-port", f.admin_port}}) {
    if (port < 0 || port > 65535) return fail(InvalidArgument(std::string(name) + " must be in 0..65535"));
  }
  if (f.drain_seconds < 0 || f.not_ready_grace_seconds < 0) {
    return fail(InvalidArgument("--drain-seconds and --not-ready-grace-seconds must not be negative"));
  }
  if (f.upstream_timeout_ms <= 0 || f.connect_timeout_ms <= 0) {
    return fail(InvalidArgument("--upstream-timeout-ms and --connect-timeout-ms must be positive"));
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  SnapshotStore snapshots;
  SnapshotPublisher publisher(snapshots, /*cluster_mode=*/!f.configmap.empty());
  std::unique_ptr<FileConfigWatcher> file_watcher;
  std::unique_ptr<k8s::Client> kube;
  std::unique_ptr<ClusterWatcher> cluster_watcher;
  if (!f.config.empty()) {
    file_watcher = std::make_unique<FileConfigWatcher>(f.config, publisher);
    if (Status s = file_watcher->Start(); !s.ok()) return fail(s);
  } else {
    size_t slash = f.configmap.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == f.configmap.size()) {
      return fail(InvalidArgument("--configmap must be NAMESPACE/NAME, got '" + f.configmap + "'"));
    }
    auto cluster = LoadClusterConfig(f.kubeconfig);
    if (!cluster.ok()) return fail(cluster.status());
    auto client = k8s::NewClient(*cluster);
    if (!client.ok()) return fail(client.status());
    kube = std::move(client).value();
    cluster_watcher =
        std::make_unique<ClusterWatcher>(*kube, f.configmap.substr(0, slash), f.configmap.substr(slash + 1), publisher);
    if (Status s = cluster_watcher->Start(); !s.ok()) return fail(s);
  }

  HttpUpstream upstream({.io_threads = f.upstream_threads > 0 ? f.upstream_threads : cores,
                         .connect_timeout = std::chrono::milliseconds(f.connect_timeout_ms)});
  const ProxyOptions proxy_options{
      .upstream_timeout = std::chrono::milliseconds(f.upstream_timeout_ms),
      .outlier = {.consecutive_failures = f.eject_after_failures, .ejection = std::chrono::seconds(f.eject_seconds)},
      .max_requests_per_endpoint = f.max_requests_per_endpoint};
  RestProxy rest(snapshots, upstream, proxy_options);
  GrpcUpstream grpc_upstream({.io_threads = f.upstream_threads > 0 ? f.upstream_threads : cores,
                              .connect_timeout = std::chrono::milliseconds(f.connect_timeout_ms)});
  GrpcProxy grpc(snapshots, grpc_upstream, proxy_options);
  const int io_threads = f.io_threads > 0 ? f.io_threads : cores;
  http::Server rest_server({.address = f.address,
                            .port = static_cast<uint16_t>(f.rest_port),
                            .io_threads = io_threads,
                            .server_header = "modelfleet-router"},
                           [&rest](http::Request request, http::Responder responder) {
                             rest.Handle(std::move(request), std::move(responder));
                           });

  std::unique_ptr<http2::Server> grpc_server;
  if (f.grpc_port > 0) {
    grpc_server = std::make_unique<http2::Server>(
        http2::ServerOptions{
            .address = f.address, .port = static_cast<uint16_t>(f.grpc_port), .io_threads = io_threads},
        [&grpc](http2::Request request, std::shared_ptr<http2::ResponseStream> stream) {
          grpc.Handle(std::move(request), std::move(stream));
        });
  }

  std::atomic<bool> draining{false};
  http::Router admin;
  admin.Add("GET", "/metrics", http::MetricsHandler());
  admin.Add("GET", "/healthz", http::Sync([](const http::Request&) { return http::Response::Text(200, "ok\n"); }));
  admin.Add("GET", "/readyz", http::Sync([&](const http::Request&) {
              if (draining) return http::Response::Text(503, "draining\n");
              if (!publisher.ready()) return http::Response::Text(503, "no valid router config loaded yet\n");
              return http::Response::Text(200, "ok\n");
            }));
  http::Server admin_server({.address = f.address, .port = static_cast<uint16_t>(f.admin_port), .io_threads = 1},
                            admin.AsHandler());

  if (Status s = admin_server.Start(); !s.ok()) return fail(s.WithContext("admin port"));
  if (Status s = rest_server.Start(); !s.ok()) return fail(s.WithContext("REST port"));
  if (grpc_server) {
    if (Status s = grpc_server->Start(); !s.ok()) return fail(s.WithContext("gRPC port"));
  }
  log::Info("modelfleet-router serving",
            {{"rest_port", std::to_string(rest_server.port())},
             {"grpc_port", grpc_server ? std::to_string(grpc_server->port()) : "off"},
             {"admin_port", std::to_string(admin_server.port())},
             {"source", f.config.empty() ? "configmap " + f.configmap : "file " + f.config}});

  std::unique_ptr<ReportPusher> reports;
  if (!f.report_url.empty()) {
    // The pod name tells the operator which router a report is from (a restart is a new series).
    const char* pod = std::getenv("POD_NAME");
    reports = std::make_unique<ReportPusher>(f.report_url, f.report_name, pod && *pod ? pod : "router");
  }
  int signal = http::WaitForTerminationSignal();
  log::Info("shutting down: not ready, then draining",
            {{"signal", std::to_string(signal)}, {"grace_seconds", std::to_string(f.not_ready_grace_seconds)}});
  draining = true;
  std::this_thread::sleep_for(std::chrono::seconds(f.not_ready_grace_seconds));
  std::thread grpc_drain([&] {
    if (grpc_server) grpc_server->Drain(std::chrono::seconds(f.drain_seconds));
  });
  rest_server.Drain(std::chrono::seconds(f.drain_seconds));
  grpc_drain.join();
  if (file_watcher) file_watcher->Stop();
  if (cluster_watcher) cluster_watcher->Stop();
  upstream.Stop();
  grpc_upstream.Stop();
  admin_server.Stop();
  return 0;
}

}  // namespace
}  // namespace mf::router

int main(int argc, char** argv) { return mf::router::Main(argc, argv); }
