#include "server/config/tf_serving_only_flags.h"

#include "common/logging.h"

namespace mf::server {
namespace {

enum class Kind { kBool, kInt, kString };

struct IgnoredFlag {
  const char* name;
  Kind kind;
  const char* why;
};

constexpr IgnoredFlag kIgnored[] = {
    {"saved_model_tags", Kind::kString, "ONNX models have no SavedModel tags"},
    {"tensorflow_session_config_file", Kind::kString,
     "a TensorFlow session ConfigProto has no meaning for ONNX models"},
    {"tensorflow_inter_op_parallelism", Kind::kInt,
     "a request's operators run in order; its parallelism is --intra_op_threads"},
    {"platform_config_file", Kind::kString, "the ONNX runtime is the only platform"},
    {"thread_pool_factory_config_file", Kind::kString, "TensorFlow thread pool factories do not apply"},
    {"remove_unused_fields_from_bundle_metagraph", Kind::kBool, "there is no MetaGraphDef"},
    {"prefer_tflite_model", Kind::kBool, "model.onnx is what is served"},
    {"num_tflite_pools", Kind::kInt, "there is no TF Lite interpreter"},
    {"num_tflite_interpreters_per_pool", Kind::kInt, "there is no TF Lite interpreter"},
    {"xla_cpu_compilation_enabled", Kind::kBool, "there is no XLA"},
    {"enable_profiler", Kind::kBool, "the TensorFlow profiler service is not served"},
    {"enable_signature_method_name_check", Kind::kBool, "ONNX models have a predict signature only"},
    {"num_load_threads", Kind::kInt,
     "versions load one at a time on one low-priority thread, so loads do not take cores from requests"},
    {"num_unload_threads", Kind::kInt, "a version is freed by the last request that holds it"},
    // TF's flag empties its filesystems' in-process caches (GCS, S3 blocks); the kernel's page
    // cache is not one of them, and neither is anything here.
    {"flush_filesystem_caches", Kind::kBool,
     "model files are read straight from the filesystem: no file cache "
     "is kept in the process"},
};

}  // namespace

void TfServingOnlyFlags::Register(FlagSet& flags) {
  for (const IgnoredFlag& flag : kIgnored) {
    const std::string help = std::string("TF Serving's; ignored here: ") + flag.why;
    switch (flag.kind) {
      case Kind::kBool:
        flags.Add(flag.name, &bools_[flag.name], help);
        break;
      case Kind::kInt:
        flags.Add(flag.name, &ints_[flag.name], help);
        break;
      case Kind::kString:
        flags.Add(flag.name, &strings_[flag.name], help);
        break;
    }
  }
  flags.Add("ssl_config_file", &strings_["ssl_config_file"],
            "TF Serving's TLS for gRPC: not implemented, refused when set (terminate TLS in front of the pod)");
  flags.Add("use_alts_credentials", &bools_["use_alts_credentials"],
            "TF Serving's Google ALTS for gRPC: not implemented, refused when true");
  flags.Add("grpc_socket_path", &strings_["grpc_socket_path"],
            "TF Serving's UNIX socket for gRPC: not implemented, refused when set (gRPC listens on --port)");
}

Status TfServingOnlyFlags::Check(const FlagSet& flags) const {
  if (!strings_.at("ssl_config_file").empty()) {
    return InvalidArgument(
        "--ssl_config_file: TLS on the gRPC port is not implemented; serving in plaintext instead "
        "would ignore your config. Terminate TLS in front of the server (a service mesh or "
        "ingress), or remove the flag");
  }
  if (bools_.at("use_alts_credentials")) {
    return InvalidArgument("--use_alts_credentials: ALTS is not implemented; remove the flag to serve in plaintext");
  }
  if (!strings_.at("grpc_socket_path").empty()) {
    return InvalidArgument("--grpc_socket_path: gRPC on a UNIX socket is not implemented; gRPC listens on --port");
  }
  for (const IgnoredFlag& flag : kIgnored) {
    if (flags.IsSet(flag.name)) {
      log::Warning("TF Serving flag ignored", {{"flag", std::string("--") + flag.name}, {"why", flag.why}});
    }
  }
  return Status::Ok();
}

}  // namespace mf::server
