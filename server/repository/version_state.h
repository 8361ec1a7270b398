// The lifecycle of one model version, as TF Serving reports it (ModelVersionStatus.State):
// START -> LOADING -> AVAILABLE -> UNLOADING -> END; a failed load ends in END with an error.
// The repository's own vocabulary: the wire codecs (server/codec/model_info.h) write these
// values, the repository depends on no codec.
#pragma once

#include <cstdint>

#include "common/status.h"

namespace mf::server {

// The values are TF Serving's ModelVersionStatus.State proto enum numbers.
enum class VersionState : int {
  kUnknown = 0,
  kStart = 10,
  kLoading = 20,
  kAvailable = 30,
  kUnloading = 40,
  kEnd = 50,
};

// One row of GetModelStatus: a version, its state and its last error (OK unless a load failed).
struct VersionStatus {
  int64_t version = 0;
  VersionState state = VersionState::kUnknown;
  Status status;
};

}  // namespace mf::server
