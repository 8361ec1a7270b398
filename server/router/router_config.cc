#include "server/router/router_config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <initializer_list>
#include <set>

namespace mf::router {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool IsVersionName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

// RFC 9110 token characters: what a header name (and an HTTP/2 metadata key) may hold.
bool IsHeaderName(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// Reads one document; every error is "<source>:<line>:<column>: <message>" at the wrong node.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  Status Error(const YAML::Mark& mark, const std::string& message) const {
    if (mark.is_null()) return InvalidArgument(source_ + ": " + message);
    return InvalidArgument(source_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1) +
                           ": " + message);
  }
  Status Error(const YAML::Node& at, const std::string& message) const { return Error(at.Mark(), message); }

  StatusOr<RouterConfig> Read(const YAML::Node& root) const {
    if (!root.IsDefined() || root.IsNull()) {
      return Error(YAML::Mark::null_mark(), "empty; expected a map with model, versions, routes, stickyBy, mirror");
    }
    RouterConfig config;
    bool has_versions = false;
    MF_RETURN_IF_ERROR(ForEachField(root, "the router config", {"model", "versions", "routes", "stickyBy", "mirror"},
                                    [&](const std::string& key, const YAML::Node& value) -> Status {
                                      if (key == "model") {
                                        MF_ASSIGN_OR_RETURN(config.model, String(value, "model"));
                                      } else if (key == "versions") {
                                        has_versions = true;
                                        if (!value.IsSequence())
                                          return Error(value, "versions must be a list of {name, service, weight}");
                                        for (const YAML::Node& entry : value) {
                                          MF_ASSIGN_OR_RETURN(VersionConfig version, ReadVersion(entry));
                                          if (config.VersionIndex(version.name) >= 0) {
                                            return Error(entry, "version '" + version.name + "' is listed twice");
                                          }
                                          config.versions.push_back(std::move(version));
                                        }
                                      } else if (key == "routes") {
                                        if (value.IsNull()) return Status::Ok();
                                        if (!value.IsSequence())
                                          return Error(value, "routes must be a list of {header, value, version}");
                                        for (const YAML::Node& entry : value) {
                                          MF_ASSIGN_OR_RETURN(HeaderRoute route, ReadRoute(entry));
                                          config.routes.push_back(std::move(route));
                                        }
                                      } else if (key == "stickyBy") {
                                        if (value.IsNull()) return Status::Ok();
                                        MF_ASSIGN_OR_RETURN(config.sticky, ReadSticky(value));
                                      } else if (key == "mirror") {
                                        if (value.IsNull()) return Status::Ok();
                                        MF_ASSIGN_OR_RETURN(config.mirror, ReadMirror(value));
                                      }
                                      return Status::Ok();
                                    }));
    if (!has_versions || config.versions.empty()) return Error(root, "versions must list at least one version");
    int sum = 0;
    std::string weights;
    for (const VersionConfig& v : config.versions) {
      sum += v.weight;
      weights += (weights.empty() ? "" : " + ") + std::to_string(v.weight) + " (" + v.name + ")";
    }
    if (sum != 100) {
      return Error(root["versions"], "version weights must sum to 100, got " + weights + " = " + std::to_string(sum));
    }
    const YAML::Node routes = root["routes"];
    for (size_t i = 0; i < config.routes.size(); ++i) {
      if (config.VersionIndex(config.routes[i].version) < 0) {
        return Error(routes[i], "route to unknown version '" + config.routes[i].version +
                                    "' (versions: " + VersionNames(config) + ")");
      }
    }
    if (config.mirror && config.VersionIndex(config.mirror->version) < 0) {
      return Error(root["mirror"], "mirror names unknown version '" + config.mirror->version +
                                       "' (versions: " + VersionNames(config) + ")");
    }
    return config;
  }

 private:
  using Visit = std::function<Status(const std::string& key, const YAML::Node& value)>;

  static std::string VersionNames(const RouterConfig& config) {
    std::string names;
    for (const VersionConfig& v : config.versions) names += (names.empty() ? "" : ", ") + v.name;
    return names;
  }

  // Visits each entry of the map `node`; refuses a non-map, a non-scalar key, a key given twice
  // and any key not in `known`.
  Status ForEachField(const YAML::Node& node, const std::string& what, std::initializer_list<std::string_view> known,
                      const Visit& visit) const {
    if (!node.IsMap()) return Error(node, what + " must be a map");
    std::set<std::string> seen;
    for (const auto& field : node) {
      const YAML::Node& key = field.first;
      if (!key.IsScalar()) return Error(key, "a key in " + what + " must be a plain name");
      const std::string& name = key.Scalar();
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        std::string names;
        for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
        return Error(key, "unknown key '" + name + "' in " + what + " (known: " + names + ")");
      }
      if (!seen.insert(name).second) return Error(key, "key '" + name + "' is given twice in " + what);
      MF_RETURN_IF_ERROR(visit(name, field.second));
    }
    return Status::Ok();
  }

  StatusOr<std::string> String(const YAML::Node& node, const std::string& what) const {
    if (!node.IsScalar()) return Error(node, what + " must be a string");
    return node.Scalar();
  }

  StatusOr<int> Integer(const YAML::Node& node, const std::string& what, int min, int max) const {
    if (!node.IsScalar()) return Error(node, what + " must be an integer");
    const std::string& text = node.Scalar();
    int value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
      return Error(node, what + " must be an integer, got '" + text + "'");
    }
    if (value < min || value > max) {
      return Error(node,
                   what + " must be between " + std::to_string(min) + " and " + std::to_string(max) + ", got " + text);
    }
    return value;
  }

  StatusOr<std::vector<std::string>> Addresses(const YAML::Node& node, const std::string& what) const {
    if (!node.IsSequence()) return Error(node, what + " must be a list of \"host:port\"");
    std::vector<std::string> out;
    for (const YAML::Node& entry : node) {
      MF_ASSIGN_OR_RETURN(std::string address, String(entry, "an entry of " + what));
      std::string host;
      int port = 0;
      if (!SplitHostPort(address, &host, &port)) {
        return Error(entry, what + " entry '" + address + "' is not host:port with a port in 1..65535");
      }
      out.push_back(std::move(address));
    }
    return out;
  }

  StatusOr<VersionConfig> ReadVersion(const YAML::Node& node) const {
    VersionConfig version;
    bool has_name = false, has_weight = false;
    MF_RETURN_IF_ERROR(ForEachField(node, "a version", {"name", "service", "weight", "endpoints", "grpcEndpoints"},
                                    [&](const std::string& key, const YAML::Node& value) -> Status {
                                      if (key == "name") {
                                        has_name = true;
                                        MF_ASSIGN_OR_RETURN(version.name, String(value, "name"));
                                        if (!IsVersionName(version.name)) {
                                          return Error(value, "version name '" + version.name +
                                                                  "' must be 1-63 of [A-Za-z0-9._-]");
                                        }
                                      } else if (key == "service") {
                                        MF_ASSIGN_OR_RETURN(version.service, String(value, "service"));
                                      } else if (key == "weight") {
                                        has_weight = true;
                                        MF_ASSIGN_OR_RETURN(version.weight, Integer(value, "weight", 0, 100));
                                      } else if (key == "endpoints") {
                                        MF_ASSIGN_OR_RETURN(version.endpoints, Addresses(value, "endpoints"));
                                      } else if (key == "grpcEndpoints") {
                                        MF_ASSIGN_OR_RETURN(version.grpc_endpoints, Addresses(value, "grpcEndpoints"));
                                      }
                                      return Status::Ok();
                                    }));
    if (!has_name) return Error(node, "a version needs a name");
    if (!has_weight) return Error(node, "version '" + version.name + "' needs a weight (0-100)");
    return version;
  }

  StatusOr<HeaderRoute> ReadRoute(const YAML::Node& node) const {
    HeaderRoute route;
    bool has_header = false, has_value = false, has_version = false;
    MF_RETURN_IF_ERROR(ForEachField(node, "a route", {"header", "value", "version"},
                                    [&](const std::string& key, const YAML::Node& value) -> Status {
                                      if (key == "header") {
                                        has_header = true;
                                        MF_ASSIGN_OR_RETURN(route.header, String(value, "header"));
                                        if (!IsHeaderName(route.header)) {
                                          return Error(
                                              value, "route header '" + route.header + "' is not a valid header name");
                                        }
                                        route.header = Lower(route.header);
                                      } else if (key == "value") {
                                        has_value = true;
                                        MF_ASSIGN_OR_RETURN(route.value, String(value, "value"));
                                      } else if (key == "version") {
                                        has_version = true;
                                        MF_ASSIGN_OR_RETURN(route.version, String(value, "version"));
                                      }
                                      return Status::Ok();
                                    }));
    if (!has_header || !has_value || !has_version) return Error(node, "a route needs header, value and version");
    return route;
  }

  StatusOr<StickyBy> ReadSticky(const YAML::Node& node) const {
    StickyBy sticky;
    MF_RETURN_IF_ERROR(ForEachField(
        node, "stickyBy", {"header", "cookie"}, [&](const std::string& key, const YAML::Node& value) -> Status {
          if (sticky.source != StickyBy::Source::kNone) {
            return Error(value, "stickyBy takes either header or cookie, not both");
          }
          MF_ASSIGN_OR_RETURN(sticky.name, String(value, "stickyBy." + key));
          if (!IsHeaderName(sticky.name)) {
            return Error(value, "stickyBy." + key + " '" + sticky.name + "' is not a valid " + key + " name");
          }
          if (key == "header") {
            sticky.source = StickyBy::Source::kHeader;
            sticky.name = Lower(sticky.name);
          } else {
            sticky.source = StickyBy::Source::kCookie;
          }
          return Status::Ok();
        }));
    if (sticky.source == StickyBy::Source::kNone) return Error(node, "stickyBy needs header or cookie");
    return sticky;
  }

  StatusOr<MirrorConfig> ReadMirror(const YAML::Node& node) const {
    MirrorConfig mirror;
    bool has_version = false, has_percent = false;
    MF_RETURN_IF_ERROR(ForEachField(node, "mirror", {"version", "percent"},
                                    [&](const std::string& key, const YAML::Node& value) -> Status {
                                      if (key == "version") {
                                        has_version = true;
                                        MF_ASSIGN_OR_RETURN(mirror.version, String(value, "mirror.version"));
                                      } else {
                                        has_percent = true;
                                        MF_ASSIGN_OR_RETURN(mirror.percent, Integer(value, "mirror.percent", 0, 100));
                                      }
                                      return Status::Ok();
                                    }));
    if (!has_version || !has_percent) return Error(node, "mirror needs version and percent");
    return mirror;
  }

  std::string source_;
};

}  // namespace

int RouterConfig::VersionIndex(std::string_view name) const {
  for (size_t i = 0; i < versions.size(); ++i) {
    if (versions[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

StatusOr<RouterConfig> ParseRouterConfig(std::string_view text, std::string_view source) {
  Reader reader{std::string(source)};
  try {
    return reader.Read(YAML::Load(std::string(text)));
  } catch (const YAML::Exception& e) {
    return reader.Error(e.mark, "not valid YAML: " + e.msg);
  }
}

std::vector<std::string> DescribeConfigChanges(const RouterConfig& before, const RouterConfig& after) {
  std::vector<std::string> changes;
  if (before.model != after.model) changes.push_back("model '" + before.model + "' -> '" + after.model + "'");
  std::string weights;
  for (const VersionConfig& v : after.versions) {
    int i = before.VersionIndex(v.name);
    if (i < 0) {
      changes.push_back("version " + v.name + " added (weight " + std::to_string(v.weight) + ")");
      continue;
    }
    const VersionConfig& old = before.versions[i];
    if (old.weight != v.weight) {
      weights +=
          (weights.empty() ? "" : ", ") + v.name + " " + std::to_string(old.weight) + " -> " + std::to_string(v.weight);
    }
    if (old.service != v.service) changes.push_back("version " + v.name + " service -> '" + v.service + "'");
    if (old.endpoints != v.endpoints || old.grpc_endpoints != v.grpc_endpoints) {
      changes.push_back("version " + v.name + " static endpoints changed");
    }
  }
  if (!weights.empty()) changes.push_back("weights " + weights);
  for (const VersionConfig& v : before.versions) {
    if (after.VersionIndex(v.name) < 0) changes.push_back("version " + v.name + " removed");
  }
  if (before.routes != after.routes) changes.push_back("routes changed (" + std::to_string(after.routes.size()) + ")");
  if (before.sticky != after.sticky) changes.push_back("stickyBy changed");
  if (before.mirror != after.mirror) {
    changes.push_back(after.mirror
                          ? "mirror -> " + after.mirror->version + " " + std::to_string(after.mirror->percent) + "%"
                          : "mirror off");
  }
  return changes;
}

bool SplitHostPort(std::string_view address, std::string* host, int* port) {
  size_t colon;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    if (close == std::string_view::npos || close + 1 >= address.size() || address[close + 1] != ':') return false;
    *host = std::string(address.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = address.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return false;
    *host = std::string(address.substr(0, colon));
    if (host->find(':') != std::string::npos) return false;  // bare IPv6 needs brackets
  }
  if (host->empty()) return false;
  for (char c : *host) {
    if (c <= ' ' || c == '/' || c == '?' || c == '#' || c == '@' || c == 0x7f) return false;
  }
  std::string_view digits = address.substr(colon + 1);
  if (digits.empty() || digits.size() > 5) return false;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), *port);
  return ec == std::errc() && end == digits.data() + digits.size() && *port >= 1 && *port <= 65535;
}

}  // namespace mf::router
