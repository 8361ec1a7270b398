// modelfleet-server's command line: tensorflow_model_server's flags (same names, same
// defaults, MODEL_NAME / MODEL_BASE_PATH from the environment as in the official image) plus
// ModelFleet's own, and the model list they describe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/flags.h"
#include "common/status.h"
#include "server/repository/model_config.h"

namespace mf::server {

struct ServerFlags {
  int port = 8500;           // gRPC; 0 disables
  int rest_api_port = 8501;  // REST; 0 disables
  std::string grpc_address = "0.0.0.0";
  std::string rest_api_address = "0.0.0.0";
  std::string model_name;
  std::string model_base_path;
  std::string model_config_file;
  int model_config_file_poll_wait_seconds = 0;
  double file_system_poll_wait_seconds = 1;
  bool enable_batching = false;
  std::string batching_parameters_file;
  std::string monitoring_config_file;
  int rest_api_timeout_in_ms = 30000;
  int rest_api_num_threads = 0;
  // ModelFleet's own.
  bool resource_preserving_swap = false;
  bool enable_model_warmup = true;
  int num_request_iterations_for_warmup = 0;        // > 0: each warm-up request runs this often
  int64_t load_retry_interval_micros = 60'000'000;  // when set: a fixed retry interval
  bool enable_per_model_batching_parameters = false;
  bool version = false;
  int grpc_threads = 0;
  int64_t malloc_mmap_threshold_bytes = 0;
  int load_thread_nice = 10;
  double retain_load_memory_seconds = 2;
  bool grpc_predict_tensor_content = false;
  bool rest_api_enable_cors_support = false;
  bool allow_version_labels_for_unavailable_models = true;
  int max_num_load_retries = -1;
  std::string grpc_channel_arguments;
  std::string device = "auto";
  std::string precision = "fp32";  // fp32 | tf32 | fp16: what the GPU may compute in
  std::string backend;             // the older name of --device (cpu | cuda)
  double gpu_memory_fraction = 0;
  int intra_op_threads = 0;
  double drain_seconds = 10;
  double not_ready_grace_seconds = 0;
  std::string log_level = "info";
  bool log_json = false;
};

void RegisterServerFlags(FlagSet& flags, ServerFlags* out);

// What --grpc_channel_arguments (TF Serving's "key=value,key=value" list of gRPC server
// arguments) sets here: grpc.max_receive_message_length (-1: the largest message protobuf can
// parse, 2 GiB - 1). Other keys are reported in `ignored` (grpc.max_send_message_length: answers
// have no size limit; keepalive and connection-age keys: not implemented).
struct GrpcChannelArguments {
  std::optional<size_t> max_receive_message_bytes;
  std::vector<std::string> ignored;
};
StatusOr<GrpcChannelArguments> ParseGrpcChannelArguments(const std::string& text);

// Fills model_name / model_base_path from MODEL_NAME / MODEL_BASE_PATH (the official image's
// convention: base path $MODEL_BASE_PATH/$MODEL_NAME) when neither the flags nor a config file
// name a model, then builds the model list. INVALID_ARGUMENT when there is no model to serve or
// both a config file and --model_base_path are given.
StatusOr<std::vector<ModelConfig>> ModelsFromFlags(ServerFlags& flags, const FlagSet& set);

}  // namespace mf::server
