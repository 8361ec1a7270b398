#include "server/repository/version_transitions.h"

namespace mf::server {
namespace {

bool IsAvailable(const std::map<int64_t, VersionView>& versions, int64_t v) {
  auto it = versions.find(v);
  return it != versions.end() && it->second.state == VersionState::kAvailable;
}

std::optional<int64_t> NotAspiredAvailable(const std::set<int64_t>& aspired,
                                           const std::map<int64_t, VersionView>& versions) {
  for (const auto& [v, view] : versions) {
    if (view.state == VersionState::kAvailable && aspired.count(v) == 0) return v;
  }
  return std::nullopt;
}

std::optional<int64_t> HighestLoadable(const std::set<int64_t>& aspired,
                                       const std::map<int64_t, VersionView>& versions) {
  for (auto it = aspired.rbegin(); it != aspired.rend(); ++it) {
    auto found = versions.find(*it);
    if (found == versions.end()) continue;
    const VersionView& view = found->second;
    bool not_loaded = view.state == VersionState::kStart || view.state == VersionState::kEnd;
    if (not_loaded && view.load_allowed) return *it;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Transition> NextTransition(const std::set<int64_t>& aspired,
                                         const std::map<int64_t, VersionView>& versions, SwapMode mode) {
  std::optional<int64_t> stale = NotAspiredAvailable(aspired, versions);
  if (mode == SwapMode::kResourcePreserving) {
    if (stale) return Transition{Transition::Kind::kUnload, *stale};
    for (const auto& [v, view] : versions) {
      if (view.state == VersionState::kUnloading && !view.released) return std::nullopt;
    }
  } else if (stale) {
    for (int64_t v : aspired) {
      if (IsAvailable(versions, v)) return Transition{Transition::Kind::kUnload, *stale};
    }
  }
  if (auto v = HighestLoadable(aspired, versions)) return Transition{Transition::Kind::kLoad, *v};
  return std::nullopt;
}

}  // namespace mf::server
