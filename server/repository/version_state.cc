#include "server/repository/version_state.h"

namespace mf::server {

std::string_view VersionStateName(VersionState state) {
  switch (state) {
    case VersionState::kUnknown: return "UNKNOWN";
    case VersionState::kStart: return "START";
    case VersionState::kLoading: return "LOADING";
    case VersionState::kAvailable: return "AVAILABLE";
    case VersionState::kUnloading: return "UNLOADING";
    case VersionState::kEnd: return "END";
  }
  return "UNKNOWN";
}

}  // namespace mf::server
