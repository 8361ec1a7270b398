#include "server/config/server_flags.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "common/logging.h"
#include "server/config/model_server_config.h"

namespace mf::server {

void RegisterServerFlags(FlagSet& f, ServerFlags* o) {
  f.Add("port", &o->port, "gRPC port (TF Serving PredictionService, ModelService, KServe v2, health); 0 disables");
  f.Add("rest_api_port", &o->rest_api_port, "REST port (TF Serving /v1, KServe v2 /v2, /metrics); 0 disables");
  f.Add("grpc_address", &o->grpc_address, "address the gRPC server binds");
  f.Add("rest_api_address", &o->rest_api_address, "address the REST server binds");
  f.Add("model_name", &o->model_name, "name of the single model to serve (default $MODEL_NAME or 'model')");
  f.Add("model_base_path", &o->model_base_path,
        "directory holding <version>/model.onnx of the single model (default $MODEL_BASE_PATH/$MODEL_NAME)");
  f.Add("model_config_file", &o->model_config_file,
        "ModelServerConfig in protobuf text format naming every model (instead of --model_name/--model_base_path)");
  f.Add("model_config_file_poll_wait_seconds", &o->model_config_file_poll_wait_seconds,
        "re-read --model_config_file this often (0: read once)");
  f.Add("file_system_poll_wait_seconds", &o->file_system_poll_wait_seconds,
        "how often model base paths are polled for new versions; 0: poll once, as TF Serving (scanned "
        "until every model serves a version, then again only after a config change)");
  f.Add("enable_batching", &o->enable_batching, "batch concurrent requests to each model version");
  f.Add("batching_parameters_file", &o->batching_parameters_file,
        "BatchingParameters in protobuf text format (max_batch_size, batch_timeout_micros, ...)");
  f.Add("monitoring_config_file", &o->monitoring_config_file,
        "MonitoringConfig in protobuf text format (prometheus_config { enable: true path: ... })");
  f.Add("rest_api_timeout_in_ms", &o->rest_api_timeout_in_ms, "time allowed to receive one REST request");
  f.Add("rest_api_num_threads", &o->rest_api_num_threads, "REST io threads (0: one per core)");
  f.Add("enable_model_warmup", &o->enable_model_warmup,
        "replay each version's TF Serving warm-up requests (<version>/assets.extra/tf_serving_warmup_requests, "
        "a TFRecord file of PredictionLog) before it takes traffic; a failing one fails the load");
  f.Add("num_request_iterations_for_warmup", &o->num_request_iterations_for_warmup,
        "times each warm-up request is run (used when > 0)");
  f.Add("load_retry_interval_micros", &o->load_retry_interval_micros,
        "when given, failed loads are retried at this fixed interval (negative: at once) instead of with "
        "exponential backoff from 1 s to 60 s");
  f.Add("version", &o->version, "print the server's version and exit");
  f.Add("enable_per_model_batching_parameters", &o->enable_per_model_batching_parameters,
        "with --enable_batching, a version directory's batching_params.pbtxt replaces --batching_parameters_file "
        "for that version (all but num_batch_threads: the batch threads are shared)");
  f.Add("resource_preserving_swap", &o->resource_preserving_swap,
        "unload the old version before loading the new one (no memory doubling, brief unavailability)");
  f.Add("grpc_threads", &o->grpc_threads,
        "gRPC completion-queue threads, each running one unbatched model call at a time (0: one per core)");
  f.Add("load_thread_nice", &o->load_thread_nice,
        "priority of model loads, 0..19: above 0, SCHED_IDLE, raised to the server's nice value while a load gets "
        "under a quarter of a core (needs CAP_SYS_NICE or RLIMIT_NICE; without, loads run at this nice value); 0: "
        "the same priority as requests");
  f.Add("max_num_load_retries", &o->max_num_load_retries,
        "retries of a failed model load (with backoff) before giving up until its file changes; -1: no limit "
        "(TF Serving's default is 5)");
  f.Add("allow_version_labels_for_unavailable_models", &o->allow_version_labels_for_unavailable_models,
        "accepted for TF Serving command lines: labels may always name a version that is not loaded yet "
        "(it is served once available); false is refused");
  f.Add("rest_api_enable_cors_support", &o->rest_api_enable_cors_support,
        "answer browsers from any origin: Access-Control-Allow-Origin: * on every REST response, "
        "OPTIONS preflights answered 204 (as tensorflow_model_server's flag)");
  f.Add("grpc_predict_tensor_content", &o->grpc_predict_tensor_content,
        "gRPC Predict answers carry outputs as tensor_content bytes instead of TF Serving's typed "
        "*_val fields (float_val...); compact, and tf.make_ndarray reads either");
  f.Add("grpc_channel_arguments", &o->grpc_channel_arguments,
        "TF Serving's comma-separated gRPC server arguments; grpc.max_receive_message_length=N raises "
        "(or lowers) the 64 MiB request message limit, other keys are ignored with a warning");
  f.Add("retain_load_memory_seconds", &o->retain_load_memory_seconds,
        "keep the weight memory that loads and unloads free for the next load to reuse, until no load "
        "or unload has finished for this long (0: give it back at once)");
  f.Add("malloc_mmap_threshold_bytes", &o->malloc_mmap_threshold_bytes,
        "heap blocks this large get their own mapping, returned on free (0: glibc's adaptive default)");
  f.Add("device", &o->device, "where models run: auto (the GPU when one is visible, else the CPU) | cpu | cuda");
  f.Add("backend", &o->backend, "older name of --device (cpu | cuda)");
  f.Add("precision", &o->precision,
        "fp32 | tf32 | fp16: what models on a GPU compute in (fp16: float16 on the device, float32 at the API; "
        "the CPU always computes in float32)");
  f.Add("gpu_memory_fraction", &o->gpu_memory_fraction,
        "share of each GPU's memory the server may use, (0, 1]; 0: no limit");
  f.Add("intra_op_threads", &o->intra_op_threads, "CPU threads per model run (0: one per core)");
  // tensorflow_model_server's names for the same two settings, so its command lines carry over.
  f.Add("tensorflow_intra_op_parallelism", &o->intra_op_threads, "TF Serving's name for --intra_op_threads");
  f.Add("tensorflow_session_parallelism", &o->intra_op_threads,
        "TF Serving's session-wide thread count: --intra_op_threads here (a request's operators run in order)");
  f.Add("grpc_max_threads", &o->grpc_threads, "TF Serving's name for --grpc_threads");
  f.Add("per_process_gpu_memory_fraction", &o->gpu_memory_fraction, "TF Serving's name for --gpu_memory_fraction");
  f.Add("drain_seconds", &o->drain_seconds, "on SIGTERM, time allowed for in-flight requests");
  f.Add("not_ready_grace_seconds", &o->not_ready_grace_seconds,
        "on SIGTERM, time to answer not-ready before draining (lets load balancers notice)");
  f.Add("log_level", &o->log_level, "debug | info | warning | error");
  f.Add("log_json", &o->log_json, "write logs as JSON lines");
}

StatusOr<GrpcChannelArguments> ParseGrpcChannelArguments(const std::string& text) {
  GrpcChannelArguments out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    at = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--grpc_channel_arguments: '" + item + "' is not key=value");
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key != "grpc.max_receive_message_length") {
      out.ignored.push_back(key);
      continue;
    }
    constexpr int64_t kLargest = (int64_t{1} << 31) - 1;  // protobuf parses messages below 2 GiB
    char* parsed_end = nullptr;
    errno = 0;
    const long long n = std::strtoll(value.c_str(), &parsed_end, 10);
    if (value.empty() || *parsed_end != '\0' || errno != 0 || n == 0 || n < -1) {
      return InvalidArgument(
          "--grpc_channel_arguments: grpc.max_receive_message_length must be a positive byte "
          "count or -1, got '" +
          value + "'");
    }
    out.max_receive_message_bytes = static_cast<size_t>(n == -1 ? kLargest : std::min<long long>(n, kLargest));
  }
  return out;
}

StatusOr<std::vector<ModelConfig>> ModelsFromFlags(ServerFlags& flags, const FlagSet& set) {
  if (!flags.model_config_file.empty()) {
    // As tensorflow_model_server: the config file wins. The official image's entrypoint always
    // passes --model_name and --model_base_path, and `docker run IMAGE --model_config_file=...`
    // must still work.
    if (!flags.model_base_path.empty() || set.IsSet("model_name")) {
      mf::log::Warning("--model_config_file names the models; --model_name and --model_base_path are ignored",
                       {{"model_config_file", flags.model_config_file}});
    }
    return LoadModelServerConfigFile(flags.model_config_file);
  }
  if (flags.model_name.empty()) {
    const char* env = std::getenv("MODEL_NAME");
    flags.model_name = env != nullptr && *env != '\0' ? env : "model";
  }
  if (flags.model_base_path.empty()) {
    const char* env = std::getenv("MODEL_BASE_PATH");
    if (env == nullptr || *env == '\0') {
      return InvalidArgument(
          "no model to serve: give --model_base_path (and --model_name), "
          "--model_config_file, or set MODEL_BASE_PATH");
    }
    flags.model_base_path = std::string(env) + "/" + flags.model_name;
  }
  ModelConfig config;
  config.name = flags.model_name;
  config.base_path = flags.model_base_path;
  MF_RETURN_IF_ERROR(ValidateModelConfig(config));
  return std::vector<ModelConfig>{config};
}

}  // namespace mf::server
