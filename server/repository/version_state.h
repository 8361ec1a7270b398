// The lifecycle of one model version, as TF Serving reports it (ModelVersionStatus.State):
// START -> LOADING -> AVAILABLE -> UNLOADING -> END. A failed load ends in END with an error.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"

namespace mf::server {

// Values are TF Serving's proto enum numbers, so they go on the wire unchanged.
enum class VersionState : int {
  kUnknown = 0,
  kStart = 10,
  kLoading = 20,
  kAvailable = 30,
  kUnloading = 40,
  kEnd = 50,
};

// "START", "LOADING", ... as in TF Serving's REST status JSON.
std::string_view VersionStateName(VersionState state);

// One row of GetModelStatus: the version, where it is in its lifecycle, and its last error
// (OK unless the last load failed).
struct VersionStatus {
  int64_t version = 0;
  VersionState state = VersionState::kUnknown;
  Status status;
};

}  // namespace mf::server
