// Service DNS for local pods, without a DNS server. The kubelet keeps one /etc/hosts-style file
// per namespace, rebuilt from Endpoints, and points every container at it:
//   - MODELFLEET_HOSTS_FILE=<file>: ModelFleet's own binaries look names up there first;
//   - PYTHONPATH starts with a directory whose sitecustomize.py wraps socket.getaddrinfo,
//     gethostbyname and gethostbyname_ex to consult the same file (so requests, grpcio's Python
//     layer, TF_CONFIG hosts and urllib all resolve), re-reading it when it changes.
// (glibc's HOSTALIASES only rewrites dot-free names to other names, and LD_PRELOAD shims break
// static and setuid programs, so neither is used.) Other programs see the names as unresolvable.
//
// Names written, for each Service <s> in namespace <n>:
//   <s>.<n>.svc.cluster.local, <s>.<n>.svc, <s>.<n>, and bare <s> in <n>'s own file, resolving to
//   the Service's virtual IP when it is proxied (service_proxy.h: ports map to targetPorts, load
//   spreads over ready pods), else (headless) to its first ready address (sorted);
//   <h>.<s>.<n>.svc[.cluster.local] for each address with a hostname (pods with
//   spec.hostname + spec.subdomain = <s>, the StatefulSet pattern). A TrainingJob's pods each have
//   a headless Service of their own, so they resolve as <job>-<type>-<i>.<n>.svc like any Service.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tools/local/kubelet/object_fields.h"

namespace mf::local {

// The file's text for processes in namespace `ns`, from all namespaces' Endpoints and the
// virtual IPs of proxied Services ("ns/name" -> address).
std::string BuildHostsFile(std::string_view ns, const std::vector<Json>& endpoints,
                           const std::map<std::string, std::string>& service_vips = {});

// Writes `text` to `path` atomically (temp file + rename) when it differs from what is there.
Status WriteFileIfChanged(const std::filesystem::path& path, const std::string& text);

// The sitecustomize.py that makes Python resolve through MODELFLEET_HOSTS_FILE.
std::string PythonResolverSource();

}  // namespace mf::local
