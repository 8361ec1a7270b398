// modelfleet-operator: reconciles ModelDeployments into serving fleets and TrainingJobs into
// training clusters. Runs in a pod
// (in-cluster config, leader election across replicas) or outside one with --kubeconfig.
// Serves /metrics, /healthz and /readyz on --metrics-port.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "common/flags.h"
#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "controller/model_deployment_controller.h"
#include "controller/training_job_controller.h"
#include "http/client.h"
#include "http/server.h"
#include "k8s/config.h"
#include "k8s/event_recorder.h"
#include "k8s/http_transport.h"
#include "k8s/leader_election.h"
#include "metrics/metrics.h"

namespace {

struct Flags {
  std::string kubeconfig;
  std::string watch_namespace;
  bool leader_elect = false;
  std::string leader_election_namespace;
  std::string leader_election_id = "modelfleet-operator";
  std::string metrics_address = "0.0.0.0";
  int metrics_port = 8080;
  int workers = 4;
  int resync_seconds = 300;
  int retire_drain_seconds = 5;
  std::string log_level = "info";
  bool log_json = false;
  double api_qps = 50;
  int api_burst = 100;
  mf::op::OperatorSettings settings;
  int training_workers = 2;
  std::string cluster_domain;
};

std::string EnvOr(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

mf::StatusOr<mf::k8s::ClusterConfig> LoadConfig(const Flags& flags) {
  if (flags.kubeconfig.empty()) return mf::k8s::LoadDefaultConfig();
  std::ifstream in(flags.kubeconfig);
  if (!in) return mf::NotFound("cannot read --kubeconfig " + flags.kubeconfig);
  std::stringstream text;
  text << in.rdbuf();
  return mf::k8s::ParseKubeconfig(text.str(), std::filesystem::path(flags.kubeconfig).parent_path());
}

// The pod (or host) name plus a random suffix, as controller-runtime's: a restarted container
// is a new candidate, so it never mistakes the lease its predecessor held for its own.
std::string Identity() {
  std::string name = EnvOr("POD_NAME", "");
  if (name.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    name = host;
  }
  std::random_device rd;
  char suffix[9];
  std::snprintf(suffix, sizeof(suffix), "%08x", rd());
  return name + "_" + suffix;
}

// Marks (or unmarks) this replica's own pod as the leader: the chart's leader Service selects the
// label, so the routers' reports reach the replica that acts on them. Outside a pod: nothing.
void LabelOwnPod(mf::k8s::Client& client, bool leading) {
  const std::string pod = EnvOr("POD_NAME", ""), ns = EnvOr("POD_NAMESPACE", "");
  if (pod.empty() || ns.empty()) return;
  const mf::k8s::Json patch = {
      {"metadata", {{"labels", {{"modelfleet.io/leader", leading ? mf::k8s::Json("true") : mf::k8s::Json()}}}}}};
  auto patched = client.Patch({mf::k8s::resources::Pods(), ns, pod, ""}, mf::k8s::PatchType::kMerge, patch);
  if (!patched.ok()) mf::log::Warning("cannot label the operator's own pod", {{"error", patched.status().message()}});
}

int Run(int argc, char** argv) {
  Flags f;
  mf::FlagSet flags("modelfleet-operator", "Reconciles ModelDeployments into fleets of model-serving pods.");
  flags.Add("kubeconfig", &f.kubeconfig, "kubeconfig file (default: in-cluster config, else $KUBECONFIG)");
  flags.Add("namespace", &f.watch_namespace, "watch only this namespace (default: all)");
  flags.Add("leader_elect", &f.leader_elect, "campaign for a Lease so only one replica acts");
  flags.Add("leader_election_namespace", &f.leader_election_namespace,
            "namespace of the Lease (default: $POD_NAMESPACE)");
  flags.Add("leader_election_id", &f.leader_election_id, "name of the Lease");
  flags.Add("metrics_address", &f.metrics_address, "address of /metrics, /healthz and /readyz");
  flags.Add("metrics_port", &f.metrics_port, "port of /metrics, /healthz and /readyz (0: a free one)");
  flags.Add("workers", &f.workers, "ModelDeployments reconciled in parallel");
  flags.Add("resync_seconds", &f.resync_seconds, "every object is reconciled again this often (with jitter)");
  flags.Add("retire_drain_seconds", &f.retire_drain_seconds,
            "a removed version's pods are deleted this long after its traffic moved");
  flags.Add("log_level", &f.log_level, "debug | info | warning | error");
  flags.Add("log_json", &f.log_json, "write logs as JSON lines");
  flags.Add("api_qps", &f.api_qps, "API requests per second (token bucket)");
  flags.Add("api_burst", &f.api_burst, "API request burst");
  flags.Add("server_image", &f.settings.server_image, "model server image of serving pods");
  flags.Add("sync_image", &f.settings.sync_image, "modelfleet-sync image of serving pods");
  flags.Add("router_image", &f.settings.router_image, "router image");
  flags.Add("report_url", &f.settings.report_url,
            "where routers POST their counters (the chart's leader Service + /v1/reports; \"\": they do not)");
  flags.Add("router_cluster_role", &f.settings.router_cluster_role,
            "ClusterRole bound to each router's ServiceAccount (\"\": none)");
  flags.Add("not_ready_grace_seconds", &f.settings.not_ready_grace_seconds,
            "serving pods answer not-ready this long after SIGTERM before draining");
  flags.Add("termination_grace_seconds", &f.settings.termination_grace_seconds,
            "terminationGracePeriodSeconds of serving and router pods");
  flags.Add("training_workers", &f.training_workers, "TrainingJobs reconciled in parallel");
  flags.Add("cluster_domain", &f.cluster_domain,
            "appended after .svc in training pods' addresses (Kubeflow's CUSTOM_CLUSTER_DOMAIN, e.g. cluster.local)");
  if (auto s = flags.Parse(argc, argv); !s.ok()) {
    std::cerr << "modelfleet-operator: " << s.message() << "\n";
    return 2;
  }
  if (flags.help_requested()) {
    std::cout << flags.Usage();
    return 0;
  }
  mf::log::Level level;
  if (!mf::log::ParseLevel(f.log_level, &level)) {
    std::cerr << "modelfleet-operator: --log_level must be debug, info, warning or error\n";
    return 2;
  }
  if (f.workers < 1 || f.training_workers < 1 || f.resync_seconds < 1 || f.metrics_port < 0 || f.metrics_port > 65535 ||
      f.retire_drain_seconds < 0 || f.settings.not_ready_grace_seconds < 0 ||
      f.settings.termination_grace_seconds <= f.settings.not_ready_grace_seconds) {
    std::cerr << "modelfleet-operator: --workers and --resync_seconds must be positive, --metrics_port a port, and "
                 "--termination_grace_seconds above --not_ready_grace_seconds\n";
    return 2;
  }
  mf::log::SetLevel(level);
  mf::log::SetJson(f.log_json);
  // Before any thread starts: the arenas are chosen as threads first allocate.
  mf::TuneMallocForManySmallObjects(2);
  const std::jthread heap_trimmer = mf::StartHeapTrimmer(std::chrono::seconds(30));

  auto config = LoadConfig(f);
  if (!config.ok()) {
    std::cerr << "modelfleet-operator: " << config.status().message() << "\n";
    return 1;
  }
  auto transport = mf::k8s::HttpTransport::Create(*config);
  if (!transport.ok()) {
    std::cerr << "modelfleet-operator: " << transport.status().message() << "\n";
    return 1;
  }
  mf::k8s::Client client(*transport, *config, {.qps = f.api_qps, .burst = f.api_burst});
  mf::op::OperatorMetrics metrics(*mf::metrics::DefaultRegistry());
  const std::string identity = Identity();

  // /readyz: this replica can do its job — it leads with synced caches, or stands by.
  std::atomic<bool> ready{false};
  mf::http::Router routes;
  routes.Add("GET", "/metrics", mf::http::MetricsHandler());
  routes.Add("GET", "/healthz",
             mf::http::Sync([](const mf::http::Request&) { return mf::http::Response::Text(200, "ok\n"); }));
  routes.Add("GET", "/readyz", mf::http::Sync([&ready](const mf::http::Request&) {
               return ready ? mf::http::Response::Text(200, "ok\n") : mf::http::Response::Text(503, "not ready\n");
             }));
  // The routers push their counters here every second (autoscaling and rollout analysis read them).
  mf::op::RateStore rates;
  routes.Add("POST", "/v1/reports", mf::http::Sync([&rates](const mf::http::Request& request) {
               auto report = mf::op::ParseRouterReport(request.body);
               if (!report.ok()) return mf::http::Response::Text(400, report.status().message() + "\n");
               const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count();
               rates.Add(std::move(*report), now_ms);
               return mf::http::Response::Text(204, "");
             }));
  mf::http::Server admin({.address = f.metrics_address,
                          .port = static_cast<uint16_t>(f.metrics_port),
                          .io_threads = 1,
                          .max_body_bytes = 1 << 20},
                         routes.AsHandler());
  if (auto s = admin.Start(); !s.ok()) {
    std::cerr << "modelfleet-operator: serving metrics on port " << f.metrics_port << ": " << s.message() << "\n";
    return 1;
  }
  mf::log::Info("modelfleet-operator starting", {{"identity", identity},
                                                 {"api_server", config->server},
                                                 {"metrics_port", std::to_string(admin.port())},
                                                 {"leader_elect", f.leader_elect ? "true" : "false"}});

  mf::k8s::EventRecorder events(client, {.component = "modelfleet-operator", .instance = identity});
  // spec.autoscaling.prometheus queries: short timeouts, as a reconcile waits on them.
  mf::http::Client prometheus_client(
      {.connect_timeout = std::chrono::seconds(2), .read_timeout = std::chrono::seconds(5)});
  auto http_get = [&prometheus_client](const std::string& url) -> mf::StatusOr<std::pair<int, std::string>> {
    auto response = prometheus_client.Get(url);
    if (!response.ok()) return response.status();
    return std::make_pair(response->status, std::move(response->body));
  };
  mf::op::ControllerOptions options{.watch_namespace = f.watch_namespace,
                                    .workers = f.workers,
                                    .resync = std::chrono::seconds(f.resync_seconds),
                                    .retire_drain = std::chrono::seconds(f.retire_drain_seconds),
                                    .settings = f.settings,
                                    .rates = &rates,
                                    .http_get = http_get};
  const mf::op::TrainingControllerOptions training_options{.watch_namespace = f.watch_namespace,
                                                           .workers = f.training_workers,
                                                           .resync = std::chrono::seconds(f.resync_seconds),
                                                           .cluster_domain = f.cluster_domain};
  std::atomic<int> exit_code{0};
  // Leads until `stop`: starts the controller, waits, stops it.
  LabelOwnPod(client, false);  // a restarted container may carry its predecessor's label
  auto lead = [&](std::stop_token stop) {
    metrics.SetLeader(true);
    LabelOwnPod(client, true);
    mf::op::ModelDeploymentController controller(client, events, metrics, options);
    mf::op::TrainingJobController training(client, events, metrics, training_options);
    for (auto start : {std::function<mf::Status()>([&] { return controller.Start(); }),
                       std::function<mf::Status()>([&] { return training.Start(); })}) {
      if (auto s = start(); !s.ok()) {
        mf::log::Error("a controller could not start", {{"error", s.message()}});
        exit_code = 1;
        std::raise(SIGTERM);
        return;
      }
    }
    ready = true;
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock lock(mu);
    cv.wait(lock, stop, [] { return false; });
    training.Stop();
    controller.Stop();
    LabelOwnPod(client, false);
    metrics.SetLeader(false);
  };

  std::jthread runner;
  std::unique_ptr<mf::k8s::LeaderElector> elector;
  if (f.leader_elect) {
    mf::k8s::LeaderElectionConfig le{.lease_namespace = f.leader_election_namespace.empty()
                                                            ? EnvOr("POD_NAMESPACE", config->ns)
                                                            : f.leader_election_namespace,
                                     .lease_name = f.leader_election_id,
                                     .identity = identity,
                                     // A dead leader's lease expires after 10 s; a candidate polling every 2 s (+20%
                                     // jitter) takes over within about 13 s of its death.
                                     .lease_duration = std::chrono::seconds(10),
                                     .renew_deadline = std::chrono::seconds(7),
                                     .retry_period = std::chrono::seconds(2),
                                     .on_started_leading = lead,
                                     .on_stopped_leading = [] { mf::log::Info("stopped leading"); },
                                     .on_new_leader =
                                         [&ready, identity](const std::string& leader) {
                                           if (leader != identity) mf::log::Info("standing by", {{"leader", leader}});
                                           ready = true;
                                         }};
    auto created = mf::k8s::LeaderElector::Create(client, le);
    if (!created.ok()) {
      std::cerr << "modelfleet-operator: " << created.status().message() << "\n";
      return 1;
    }
    elector = std::move(*created);
    runner = std::jthread([&](std::stop_token stop) {
      elector->Run(stop);
      if (!stop.stop_requested()) {
        // Leadership lost without being asked to stop: exit so a fresh process campaigns
        // with empty caches, as client-go's controllers do.
        mf::log::Error("leader lease lost; exiting");
        exit_code = 1;
        std::raise(SIGTERM);
      }
    });
  } else {
    runner = std::jthread(lead);
  }
  const int signal = mf::http::WaitForTerminationSignal();
  mf::log::Info("shutting down", {{"signal", std::to_string(signal)}});
  ready = false;
  runner.request_stop();
  runner.join();
  events.Flush();
  admin.Drain(std::chrono::seconds(2));
  return exit_code;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
