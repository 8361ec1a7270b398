// The request targets the kubelet API serves, as kube-apiserver builds them (pkg/registry/core/pod
// strategy.go: LogLocation, streamLocation, PortForwardLocation) and the kubelet routes them
// (pkg/kubelet/server/server.go), and their query strings.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mf::local {

// Decoded query parameters in order; a name may repeat (`command` does).
using QueryParams = std::vector<std::pair<std::string, std::string>>;

// application/x-www-form-urlencoded, as Go's url.ParseQuery: '&'-separated, '+' is a space, %XX
// escapes decoded (a malformed escape is kept as written).
QueryParams ParseQuery(std::string_view raw);
std::string PercentDecode(std::string_view text, bool plus_is_space);

std::optional<std::string> QueryValue(const QueryParams& query, std::string_view name);
std::vector<std::string> QueryValues(const QueryParams& query, std::string_view name);

struct KubeletTarget {
  enum class Kind { kNotFound, kHealthz, kContainerLogs, kExec, kAttach, kPortForward };
  Kind kind = Kind::kNotFound;
  std::string ns;
  std::string pod;
  std::string uid;        // optional segment of exec, attach and portForward paths
  std::string container;  // containerLogs, exec, attach
};

// Routes a path (without its query):
//   /healthz
//   /containerLogs/{ns}/{pod}/{container}
//   /exec/{ns}/{pod}/{container}         /exec/{ns}/{pod}/{uid}/{container}
//   /attach/{ns}/{pod}/{container}       /attach/{ns}/{pod}/{uid}/{container}
//   /portForward/{ns}/{pod}              /portForward/{ns}/{pod}/{uid}
// Segments are percent-decoded; anything else (or an empty segment) is kNotFound.
KubeletTarget ParseKubeletTarget(std::string_view path);

}  // namespace mf::local
