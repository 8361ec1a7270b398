// The router's decisions, as pure functions of the configuration, what is ready, the request's
// keys and random numbers handed in by the caller: which version serves a request and which
// endpoint of it. No I/O, no clocks, no global state, so they are tested table-driven.
//
// Version choice, in order: the first header route that matches; then, with stickyBy and a
// key present, the key's hash as a point in the weight space; otherwise a random point.
// The weight space is [0, 100) cut into the versions' cumulative ranges in config order. A point
// that lands on a version with no ready endpoint is placed again (with a second, independent
// hash or random number) into the ranges of the ready versions only, so a version that loses its
// endpoints has its share spread over the others in proportion to their weights, and sticky
// users of the other versions do not move. Raising one version's weight by n points moves only
// the keys whose point falls in the moved range: n% of them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/router/router_config.h"

namespace mf::router {

// FNV-1a with a splitmix64 finaliser: the same on every router replica and every build (unlike
// std::hash), so all replicas send one user to the same version.
uint64_t StableHash(std::string_view key, uint64_t seed = 0);

// A uniform double in [0, 1) from 64 random (or hashed) bits.
double UnitInterval(uint64_t bits);

// The version whose cumulative weight range holds `point` (in [0, 1), scaled to the weight
// space). When that version has no ready endpoint, `fallback` (in [0, 1)) picks among the ready
// versions by their weights, or evenly when all of them have weight 0 (serving a zero-weight
// version beats failing the request). -1 when no version is ready.
int PickVersionByPoint(std::span<const int> weights, std::span<const int> ready, double point, double fallback);

// Looks up a request header or gRPC metadata key (lowercase name); nullopt when absent.
using HeaderLookup = std::function<std::optional<std::string_view>(std::string_view lowercase_name)>;

// The value of cookie `name` in a Cookie header ("a=1; b=2"), or nullopt.
std::optional<std::string_view> FindCookie(std::string_view cookie_header, std::string_view name);

enum class PickReason { kRoute, kSticky, kWeighted };
std::string_view PickReasonName(PickReason reason);

struct VersionPick {
  int version = -1;  // -1: none (see reason: a route to a version without ready endpoints, or none ready)
  PickReason reason = PickReason::kWeighted;
};

// Chooses the version for one request. `ready[i]` is the number of ready endpoints of version i;
// `random1`/`random2` are independent random 64-bit numbers. A matching route whose version has
// no ready endpoint gives {-1, kRoute}: the request asked for that version explicitly, and
// silently serving another one would corrupt an A/B experiment.
VersionPick PickVersion(const RouterConfig& config, std::span<const int> ready, const HeaderLookup& header,
                        uint64_t random1, uint64_t random2);

// What picking an endpoint needs to know about each candidate.
struct EndpointLoad {
  int outstanding = 0;    // requests in flight to it from this router
  bool available = true;  // false: excluded (ejected, or already failed this request)
};

// Power of two choices: two distinct random available candidates, the one with fewer requests
// in flight (ties: the first drawn). -1 when none is available.
int PickEndpoint(std::span<const EndpointLoad> loads, uint64_t random);

// The 503 message when nothing can serve: "no ready endpoint for model m (versions: v1 0/2 ready,
// v2 0/0 ready)".
std::string NoReadyEndpointMessage(const RouterConfig& config, std::span<const int> ready, std::span<const int> total);

}  // namespace mf::router
