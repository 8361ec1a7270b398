// Fuzzes router.yaml (a ConfigMap anyone with edit rights in the namespace can write) and what
// follows from an accepted config: no crash, no UB, no leak; an accepted config holds the
// invariants router_config.h promises, builds a snapshot, and routes a request. The first byte
// picks the fuzzed part: even: the config; odd: the mirror comparison of two bodies.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <string>

#include "server/router/mirror_compare.h"
#include "server/router/routing.h"
#include "server/router/snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mf::router;
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 1) {
    size_t half = text.size() / 2;
    (void)ResponsesAgree(200, std::string_view(text).substr(0, half), 200, std::string_view(text).substr(half));
    return 0;
  }
  auto config = ParseRouterConfig(text, "fuzz.yaml");
  if (!config.ok()) return 0;
  int sum = 0;
  for (const VersionConfig& v : config->versions) {
    if (v.weight < 0 || v.weight > 100) std::abort();
    sum += v.weight;
  }
  if (config->versions.empty() || sum != 100) std::abort();
  for (const HeaderRoute& r : config->routes) {
    if (config->VersionIndex(r.version) < 0) std::abort();
  }
  if (config->mirror && config->VersionIndex(config->mirror->version) < 0) std::abort();
  EndpointRegistry registry;
  auto snapshot = BuildSnapshot(*config, nullptr, 1, registry, nullptr);
  HeaderLookup lookup = [&](std::string_view) -> std::optional<std::string_view> { return text; };
  VersionPick pick = PickVersion(*config, snapshot->rest_ready, lookup, size, size * 31);
  if (pick.version >= static_cast<int>(config->versions.size())) std::abort();
  return 0;
}
