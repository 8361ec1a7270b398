// modelfleet-server: serves ONNX model versions from a model repository over TF Serving's REST
// and gRPC APIs and KServe v2, with dynamic batching and Prometheus metrics. A drop-in for
// tensorflow_model_server's command line (see docs/server.md).
//
// Shutdown on SIGTERM/SIGINT: readiness turns false at once (/v2/health/ready, gRPC health),
// after --not_ready_grace_seconds the servers stop accepting and drain in-flight requests for
// up to --drain_seconds, then the process exits 0.
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "common/flags.h"
#include "common/logging.h"
#include "common/malloc_tuning.h"
#include "http/server.h"
#include "modelfleet_version.h"
#include "runtime/tensor.h"
#include "runtime/weight_mappings.h"
#include "server/config/batching_parameters.h"
#include "server/config/monitoring_config.h"
#include "server/config/server_flags.h"
#include "server/config/tf_serving_only_flags.h"
#include "server/grpc/grpc_server.h"
#include "server/main/config_reloader.h"
#include "server/main/heap_policy.h"
#include "server/main/thread_priority.h"
#include "server/repository/model_manager.h"
#include "server/rest/rest_api.h"
#include "server/session/session_loader.h"

namespace mf::server {
namespace {

// Rounded up: a positive duration never becomes 0, which some flags read as "off" or "once".
std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::ceil<std::chrono::milliseconds>(std::chrono::duration<double>(seconds));
}

int Main(int argc, char** argv) {
  TuneMallocForReusedBuffers();                          // before any thread starts
  runtime::KeepLargeBuffersForReuse(size_t{256} << 20);  // what malloc keeps for buffers above 32 MiB
  FlagSet flag_set("modelfleet-server", "Serves ONNX model versions over TF Serving REST/gRPC and KServe v2.");
  flag_set.EnableConfigFile();
  ServerFlags flags;
  RegisterServerFlags(flag_set, &flags);
  TfServingOnlyFlags tf_serving_only;
  tf_serving_only.Register(flag_set);
  if (Status s = flag_set.Parse(argc, argv); !s.ok()) {
    std::cerr << s.message() << "\n\n" << flag_set.Usage();
    return 2;
  }
  if (flag_set.help_requested()) {
    std::cout << flag_set.Usage();
    return 0;
  }
  if (flags.version) {
    std::cout << "ModelFleet model server: " << MODELFLEET_VERSION << "\n";
    return 0;
  }
  log::Level level;
  if (!log::ParseLevel(flags.log_level, &level)) {
    std::cerr << "--log_level must be debug, info, warning or error, got '" << flags.log_level << "'\n";
    return 2;
  }
  log::SetLevel(level);
  log::SetJson(flags.log_json);

  auto fail = [](const Status& status) {
    log::Error("cannot start", {{"error", status.ToString()}});
    return 1;
  };
  if (Status s = tf_serving_only.Check(flag_set); !s.ok()) return fail(s);
  if (flags.rest_api_timeout_in_ms <= 0) {
    return fail(InvalidArgument("--rest_api_timeout_in_ms must be positive"));
  }
  if (flags.file_system_poll_wait_seconds < 0) {
    return fail(InvalidArgument("--file_system_poll_wait_seconds must be >= 0 (0: poll once)"));
  }
  auto models = ModelsFromFlags(flags, flag_set);
  if (!models.ok()) return fail(models.status());

  runtime::SessionOptions session_options;
  session_options.threads = flags.intra_op_threads;
  if (!runtime::PrecisionFromName(flags.precision, &session_options.precision) ||
      session_options.precision == runtime::Precision::kBf16) {
    return fail(InvalidArgument("--precision must be fp32, tf32 or fp16, got '" + flags.precision + "'"));
  }
  if (flag_set.IsSet("backend")) {
    if (flag_set.IsSet("device")) return fail(InvalidArgument("give --device or its older name --backend, not both"));
    runtime::Backend backend;
    if (!runtime::BackendFromName(flags.backend, &backend)) {
      return fail(InvalidArgument("--backend must be cpu or cuda, got '" + flags.backend + "'"));
    }
    flags.device = flags.backend;
  }
  DevicePlacement placement;
  auto device = DeviceChoiceFromName(flags.device, "--device");
  if (!device.ok()) return fail(device.status());
  placement.choice = *device;
  placement.gpu_memory_fraction = flags.gpu_memory_fraction;
  if (Status s = ValidateDevicePlacement(placement); !s.ok()) return fail(s);
  if (Status s = ApplyGpuMemoryFraction(placement); !s.ok()) return fail(s);
  ExportDevicePlacement(placement);

  std::shared_ptr<batching::BatchScheduler> scheduler;
  if (flags.enable_batching) {
    batching::BatchingOptions batching_options;
    if (!flags.batching_parameters_file.empty()) {
      auto loaded = LoadBatchingParametersFile(flags.batching_parameters_file);
      if (!loaded.ok()) return fail(loaded.status());
      batching_options = *loaded;
    }
    scheduler = std::make_shared<batching::BatchScheduler>(batching_options);
  } else if (!flags.batching_parameters_file.empty()) {
    return fail(InvalidArgument("--batching_parameters_file needs --enable_batching"));
  } else if (flags.enable_per_model_batching_parameters) {
    return fail(InvalidArgument("--enable_per_model_batching_parameters needs --enable_batching"));
  }

  MonitoringOptions monitoring;
  if (!flags.monitoring_config_file.empty()) {
    auto loaded = LoadMonitoringConfigFile(flags.monitoring_config_file);
    if (!loaded.ok()) return fail(loaded.status());
    monitoring = *loaded;
  }

  if (flags.grpc_threads < 0) return fail(InvalidArgument("--grpc_threads must be >= 0 (0: one per core)"));
  if (!flags.allow_version_labels_for_unavailable_models) {
    return fail(InvalidArgument(
        "--allow_version_labels_for_unavailable_models=false is not supported: labels may always name a version "
        "that is not loaded yet, and requests through them get NOT_FOUND until it is"));
  }
  auto channel_arguments = ParseGrpcChannelArguments(flags.grpc_channel_arguments);
  if (!channel_arguments.ok()) return fail(channel_arguments.status());
  HeapPolicy heap_policy;
  if (flags.malloc_mmap_threshold_bytes < 0) {
    return fail(InvalidArgument("--malloc_mmap_threshold_bytes must be >= 0"));
  }
  heap_policy.mmap_threshold_bytes = static_cast<size_t>(flags.malloc_mmap_threshold_bytes);
  if (Status s = ApplyHeapPolicy(heap_policy); !s.ok()) return fail(s);

  ManagerOptions manager_options;
  manager_options.memory_released = ReturnFreedHeapToOs;
  if (!(flags.retain_load_memory_seconds >= 0)) {
    return fail(InvalidArgument("--retain_load_memory_seconds must be >= 0"));
  }
  if (flags.retain_load_memory_seconds > 0) {
    // Loads reuse the pages earlier loads and unloads freed instead of faulting in new ones
    // (runtime/weight_mappings.h); given back once loads go quiet.
    runtime::weight_mappings::SetRetention(true);
    manager_options.loads_quiet = [] { runtime::weight_mappings::ReleaseRetained(); };
    manager_options.quiet_after = Millis(flags.retain_load_memory_seconds);
  }
  LoadPriorityOptions priority_options;
  priority_options.nice = flags.load_thread_nice;
  auto created_priority = LoadPriority::Create(priority_options);
  if (!created_priority.ok()) return fail(created_priority.status());
  std::shared_ptr<LoadPriority> load_priority = std::move(created_priority).value();
  log::Info("model load priority", {{"mode", std::string(LoadPriority::ModeName(load_priority->mode()))},
                                    {"nice", std::to_string(flags.load_thread_nice)}});
  manager_options.on_loop_thread_start = [load_priority] { load_priority->LowerCurrentThread(); };
  manager_options.poll_interval = Millis(flags.file_system_poll_wait_seconds);  // 0: poll once
  if (flags.max_num_load_retries < -1) return fail(InvalidArgument("--max_num_load_retries must be >= -1"));
  manager_options.max_load_retries = flags.max_num_load_retries;
  if (flag_set.IsSet("load_retry_interval_micros")) {
    // TF Serving's fixed interval (negative: no wait) instead of our backoff.
    const auto interval = std::chrono::ceil<std::chrono::milliseconds>(
        std::chrono::microseconds(std::max<int64_t>(flags.load_retry_interval_micros, 0)));
    manager_options.retry_initial = manager_options.retry_max = interval;
  }
  // Two scans can follow within a millisecond (start-up, a config change): a file still being
  // written must also have stayed unchanged this long before it is loaded.
  manager_options.min_stable_age = std::chrono::milliseconds(200);
  manager_options.swap_mode =
      flags.resource_preserving_swap ? SwapMode::kResourcePreserving : SwapMode::kAvailabilityPreserving;
  auto manager = std::make_shared<ModelManager>(
      std::make_shared<PrioritizedLoader>(
          std::make_shared<SessionLoader>(
              session_options, scheduler, placement,
              LoadSteps{flags.enable_model_warmup, std::max(flags.num_request_iterations_for_warmup, 1),
                        flags.enable_per_model_batching_parameters}),
          load_priority),
      manager_options);
  if (auto set = manager->SetModels(*models); !set.ok()) return fail(set.status());
  manager->Start();

  std::unique_ptr<ConfigReloader> reloader;
  if (!flags.model_config_file.empty() && flags.model_config_file_poll_wait_seconds > 0) {
    reloader = std::make_unique<ConfigReloader>(
        flags.model_config_file, std::chrono::seconds(flags.model_config_file_poll_wait_seconds), manager);
  }

  rest::RestApiOptions rest_options;
  rest_options.monitoring = monitoring;
  rest_options.timeout = std::chrono::milliseconds(flags.rest_api_timeout_in_ms);
  // One pool for the model runs both front ends start (servables without batching).
  rest_options.run_pool = std::make_shared<RunPool>(0);
  rest_options.cors = flags.rest_api_enable_cors_support;
  rest::RestApi rest_api(manager, rest_options);
  std::unique_ptr<http::Server> rest_server;
  if (flags.rest_api_port > 0) {
    http::ServerOptions http_options;
    http_options.address = flags.rest_api_address;
    http_options.port = static_cast<uint16_t>(flags.rest_api_port);
    http_options.io_threads = flags.rest_api_num_threads;
    http_options.read_timeout = std::chrono::milliseconds(flags.rest_api_timeout_in_ms);
    http_options.metrics_label = "rest";
    if (flags.rest_api_enable_cors_support) http_options.response_headers = rest::CorsHeaders();
    rest_server = std::make_unique<http::Server>(http_options, rest_api.handler());
    if (Status s = rest_server->Start(); !s.ok()) return fail(s.WithContext("REST server"));
  }
  std::unique_ptr<GrpcServer> grpc_server;
  if (flags.port > 0) {
    grpc_server = std::make_unique<GrpcServer>(manager, rest_options.run_pool);
    GrpcServerOptions grpc_options;
    grpc_options.address = flags.grpc_address;
    grpc_options.port = flags.port;
    grpc_options.threads = flags.grpc_threads;
    grpc_options.predict_outputs_as_tensor_content = flags.grpc_predict_tensor_content;
    for (const std::string& key : channel_arguments->ignored) {
      mf::log::Warning("--grpc_channel_arguments: argument not implemented, ignored", {{"key", key}});
    }
    if (channel_arguments->max_receive_message_bytes) {
      grpc_options.max_message_bytes = *channel_arguments->max_receive_message_bytes;
    }
    if (Status s = grpc_server->Start(grpc_options); !s.ok()) {
      return fail(s.WithContext("gRPC server"));
    }
  }
  log::Info("modelfleet-server started", {{"rest_port", std::to_string(rest_server ? rest_server->port() : 0)},
                                          {"grpc_port", std::to_string(grpc_server ? grpc_server->port() : 0)},
                                          {"models", std::to_string(models->size())},
                                          {"batching", flags.enable_batching ? "on" : "off"}});

  int signal = http::WaitForTerminationSignal();
  log::Info("shutting down: not ready, then draining", {{"signal", std::to_string(signal)}});
  // A load in progress (starved or not) must end within the grace period: the manager waits for it.
  load_priority->RaiseNow();
  rest_api.SetShuttingDown();
  if (grpc_server) grpc_server->SetShuttingDown();
  std::this_thread::sleep_for(Millis(flags.not_ready_grace_seconds));
  const auto drain = Millis(flags.drain_seconds);
  bool drained = true;
  if (rest_server) drained = rest_server->Drain(drain) && drained;
  if (grpc_server) grpc_server->Shutdown(drain);
  reloader.reset();
  manager->Stop();
  log::Info("modelfleet-server stopped", {{"drained", drained ? "true" : "false"}});
  return 0;
}

}  // namespace
}  // namespace mf::server

int main(int argc, char** argv) { return mf::server::Main(argc, argv); }
