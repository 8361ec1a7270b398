// The router's configuration: what the operator writes into the ConfigMap `<md>-router` (key
// `router.yaml`) or what a user hands to --config. Parsed and validated once into a plain value;
// everything downstream (snapshot building, routing) may assume the invariants below hold:
//  - at least one version; names unique, non-empty, [A-Za-z0-9._-]{1,63};
//  - weights are integers in [0, 100] that sum to exactly 100;
//  - every route and the mirror name an existing version; header names are lowercase;
//  - static endpoints are "host:port" with a port in [1, 65535].
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mf::router {

struct VersionConfig {
  std::string name;
  std::string service;  // in-cluster: EndpointSlices labelled kubernetes.io/service-name=<service>
  int weight = 0;
  std::vector<std::string> endpoints;       // static mode: REST "host:port"
  std::vector<std::string> grpc_endpoints;  // static mode: gRPC "host:port"
  friend bool operator==(const VersionConfig&, const VersionConfig&) = default;
};

// A request whose header `header` (lowercase) equals `value` goes to `version`.
struct HeaderRoute {
  std::string header;
  std::string value;
  std::string version;
  friend bool operator==(const HeaderRoute&, const HeaderRoute&) = default;
};

// Where the key that keeps a user on one version comes from.
struct StickyBy {
  enum class Source { kNone, kHeader, kCookie };
  Source source = Source::kNone;
  std::string name;  // header names lowercase; cookie names as given (they are case-sensitive)
  friend bool operator==(const StickyBy&, const StickyBy&) = default;
};

struct MirrorConfig {
  std::string version;
  int percent = 0;  // [0, 100]
  friend bool operator==(const MirrorConfig&, const MirrorConfig&) = default;
};

struct RouterConfig {
  std::string model;
  std::vector<VersionConfig> versions;  // in the order given: the order of the weight ranges
  std::vector<HeaderRoute> routes;      // first match wins
  StickyBy sticky;
  std::optional<MirrorConfig> mirror;
  friend bool operator==(const RouterConfig&, const RouterConfig&) = default;

  // Index of the version called `name`, or -1.
  int VersionIndex(std::string_view name) const;
};

// Parses YAML (or JSON, which is YAML) text. Errors are INVALID_ARGUMENT
// "<source>:<line>:<column>: <what is wrong>" naming the offending field; unknown keys are
// refused so a typo ("wieght") never silently changes routing.
StatusOr<RouterConfig> ParseRouterConfig(std::string_view text, std::string_view source);

// One line per difference ("weights v1 90 -> 70, v2 10 -> 30", "routes changed", ...), for the
// log line that says what a reload changed; empty when equal.
std::vector<std::string> DescribeConfigChanges(const RouterConfig& before, const RouterConfig& after);

// Splits "host:port" / "[v6]:port"; false when malformed or the port is out of range.
bool SplitHostPort(std::string_view address, std::string* host, int* port);

}  // namespace mf::router
