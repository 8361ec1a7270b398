// tensorflow_model_server flags that have no counterpart here, so TF Serving command lines and
// manifests start unchanged:
//  - ignored: TensorFlow runtime knobs (SavedModel tags, session configs, inter-op pools, XLA,
//    TF Lite, the profiler) and load/unload thread pools (versions load one at a time on one
//    low-priority thread; a version is freed by the last request holding it). Each one set is
//    logged once with the reason.
//  - refused when set to anything but their default: transport security and sockets we do not
//    implement (--ssl_config_file, --use_alts_credentials, --grpc_socket_path). Ignoring them
//    would silently serve in plaintext, or on a TCP port, what was configured otherwise.
// The flags that do map (--tensorflow_session_parallelism, --grpc_max_threads, ...) are in
// server_flags.cc.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/flags.h"
#include "common/status.h"

namespace mf::server {

class TfServingOnlyFlags {
 public:
  void Register(FlagSet& flags);
  // INVALID_ARGUMENT naming a refused flag that is set; otherwise logs each ignored flag set.
  Status Check(const FlagSet& flags) const;

 private:
  // Values parse as the flag's TF type, so a malformed one is still an error; they are read
  // only to refuse the unsupported ones.
  std::map<std::string, bool> bools_;
  std::map<std::string, int64_t> ints_;
  std::map<std::string, std::string> strings_;
};

}  // namespace mf::server
