// The decision at the heart of the version manager, as a pure function: given the versions
// the policy wants (aspired) and what is loaded now, what is the next load or unload?
//
// Availability preserving (the default, as TF Serving): load new versions first and unload a
// version that is no longer aspired only once some aspired version is AVAILABLE, so a model
// that was serving keeps serving, even when every new version fails to load.
// Resource preserving: unload versions that are no longer aspired first and load new ones only
// after every unloaded version has been released by the requests still using it, so memory
// never holds two generations at once (at the price of a gap in availability).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "server/repository/version_state.h"

namespace mf::server {

struct VersionView {
  VersionState state = VersionState::kStart;
  // A load may be attempted now: the file is complete (stable across scans) and any failure
  // backoff has expired (or the file changed since the failed attempt).
  bool load_allowed = false;
  // For kUnloading: no request holds the version any more.
  bool released = false;
};

struct Transition {
  enum class Kind { kLoad, kUnload };
  Kind kind;
  int64_t version;
  friend bool operator==(const Transition&, const Transition&) = default;
};

enum class SwapMode { kAvailabilityPreserving, kResourcePreserving };

// Loads go to the highest version first (the one Latest requests want); nullopt when nothing
// is to be done now.
std::optional<Transition> NextTransition(const std::set<int64_t>& aspired,
                                         const std::map<int64_t, VersionView>& versions, SwapMode mode);

}  // namespace mf::server
