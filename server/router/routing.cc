#include "server/router/routing.h"

#include <numeric>

namespace mf::router {
namespace {

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// The index whose range in the cumulative `weights` holds `point` in [0, 1); -1 when all are 0.
int Locate(std::span<const int> weights, double point) {
  const int total = std::accumulate(weights.begin(), weights.end(), 0);
  if (total <= 0) return -1;
  const double scaled = point * total;
  int cumulative = 0;
  int last_positive = -1;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0) continue;
    cumulative += weights[i];
    last_positive = static_cast<int>(i);
    if (scaled < cumulative) return last_positive;
  }
  return last_positive;  // point rounding up to exactly 1.0
}

}  // namespace

uint64_t StableHash(std::string_view key, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL ^ Mix(seed);
  for (unsigned char c : key) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return Mix(h);
}

double UnitInterval(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

int PickVersionByPoint(std::span<const int> weights, std::span<const int> ready, double point, double fallback) {
  int chosen = Locate(weights, point);
  if (chosen >= 0 && ready[chosen] > 0) return chosen;
  std::vector<int> ready_weights(weights.size(), 0);
  std::vector<int> ready_evenly(weights.size(), 0);
  bool any_ready = false;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (ready[i] <= 0) continue;
    any_ready = true;
    ready_weights[i] = weights[i];
    ready_evenly[i] = 1;
  }
  if (!any_ready) return -1;
  int again = Locate(ready_weights, fallback);
  return again >= 0 ? again : Locate(ready_evenly, fallback);
}

std::optional<std::string_view> FindCookie(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    size_t end = header.find(';');
    std::string_view pair = header.substr(0, end);
    header = end == std::string_view::npos ? std::string_view() : header.substr(end + 1);
    while (!pair.empty() && (pair.front() == ' ' || pair.front() == '\t')) pair.remove_prefix(1);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos || pair.substr(0, eq) != name) continue;
    std::string_view value = pair.substr(eq + 1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    return value;
  }
  return std::nullopt;
}

std::string_view PickReasonName(PickReason reason) {
  switch (reason) {
    case PickReason::kRoute:
      return "route";
    case PickReason::kSticky:
      return "sticky";
    case PickReason::kWeighted:
      return "weighted";
  }
  return "weighted";
}

VersionPick PickVersion(const RouterConfig& config, std::span<const int> ready, const HeaderLookup& header,
                        uint64_t random1, uint64_t random2) {
  for (const HeaderRoute& route : config.routes) {
    std::optional<std::string_view> value = header(route.header);
    if (value && *value == route.value) {
      int version = config.VersionIndex(route.version);
      return {ready[version] > 0 ? version : -1, PickReason::kRoute};
    }
  }
  std::vector<int> weights;
  weights.reserve(config.versions.size());
  for (const VersionConfig& v : config.versions) weights.push_back(v.weight);

  std::optional<std::string_view> key;
  if (config.sticky.source == StickyBy::Source::kHeader) {
    key = header(config.sticky.name);
  } else if (config.sticky.source == StickyBy::Source::kCookie) {
    if (std::optional<std::string_view> cookies = header("cookie")) key = FindCookie(*cookies, config.sticky.name);
  }
  if (key && !key->empty()) {
    double point = UnitInterval(StableHash(*key, 0));
    double fallback = UnitInterval(StableHash(*key, 1));
    return {PickVersionByPoint(weights, ready, point, fallback), PickReason::kSticky};
  }
  return {PickVersionByPoint(weights, ready, UnitInterval(random1), UnitInterval(random2)), PickReason::kWeighted};
}

int PickEndpoint(std::span<const EndpointLoad> loads, uint64_t random) {
  int available = 0;
  for (const EndpointLoad& load : loads) available += load.available ? 1 : 0;
  if (available == 0) return -1;
  // The n-th available candidate, for n drawn from the random bits.
  auto nth = [&](uint64_t n) {
    for (size_t i = 0; i < loads.size(); ++i) {
      if (loads[i].available && n-- == 0) return static_cast<int>(i);
    }
    return -1;
  };
  const uint64_t count = static_cast<uint64_t>(available);
  int first = nth(random % count);
  if (available == 1) return first;
  // A second distinct candidate: an offset in [1, count) from the first's rank.
  uint64_t rank = random % count;
  uint64_t offset = 1 + (random / count) % (count - 1);
  int second = nth((rank + offset) % count);
  return loads[second].outstanding < loads[first].outstanding ? second : first;
}

std::string NoReadyEndpointMessage(const RouterConfig& config, std::span<const int> ready, std::span<const int> total) {
  std::string versions;
  for (size_t i = 0; i < config.versions.size(); ++i) {
    versions += (i == 0 ? "" : ", ") + config.versions[i].name + " " + std::to_string(ready[i]) + "/" +
                std::to_string(total[i]) + " ready";
  }
  const std::string model = config.model.empty() ? "(unnamed)" : config.model;
  return "no ready endpoint for model " + model + " (versions: " + versions + ")";
}

}  // namespace mf::router
