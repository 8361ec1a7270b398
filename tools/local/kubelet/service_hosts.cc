#include "tools/local/kubelet/service_hosts.h"

#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace mf::local {

std::string BuildHostsFile(std::string_view ns, const std::vector<Json>& endpoints,
                           const std::map<std::string, std::string>& service_vips) {
  std::map<std::string, std::string> name_to_ip;  // first writer wins; sorted output
  auto add_service = [&](const std::string& svc, const std::string& svc_ns, const std::string& ip) {
    name_to_ip.emplace(svc + "." + svc_ns + ".svc.cluster.local", ip);
    name_to_ip.emplace(svc + "." + svc_ns + ".svc", ip);
    name_to_ip.emplace(svc + "." + svc_ns, ip);
    if (svc_ns == ns) name_to_ip.emplace(svc, ip);
  };
  for (const auto& [key, vip] : service_vips) {
    size_t slash = key.find('/');
    if (slash != std::string::npos) add_service(key.substr(slash + 1), key.substr(0, slash), vip);
  }
  for (const Json& ep : endpoints) {
    const std::string svc = NameOf(ep), svc_ns = NamespaceOf(ep);
    std::set<std::string> ready_ips;
    const Json subsets = ep.value("subsets", Json::array());
    if (!subsets.is_array()) continue;
    for (const Json& subset : subsets) {
      const Json addresses = subset.value("addresses", Json::array());
      if (!addresses.is_array()) continue;
      for (const Json& a : addresses) {
        std::string ip = StringAt(a, {"ip"});
        if (ip.empty()) continue;
        ready_ips.insert(ip);
        std::string host = StringAt(a, {"hostname"});
        if (!host.empty()) {
          std::string fqdn = host + "." + svc + "." + svc_ns + ".svc";
          name_to_ip.emplace(fqdn, ip);
          name_to_ip.emplace(fqdn + ".cluster.local", ip);
        }
      }
    }
    if (!ready_ips.empty()) add_service(svc, svc_ns, *ready_ips.begin());  // no-op when proxied
  }
  std::ostringstream out;
  out << "# Written by the modelfleet-local kubelet for namespace " << ns << "; do not edit.\n";
  for (const auto& [name, ip] : name_to_ip) out << ip << ' ' << name << '\n';
  return out.str();
}

Status WriteFileIfChanged(const std::filesystem::path& path, const std::string& text) {
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::stringstream current;
      current << in.rdbuf();
      if (current.str() == text) return Status::Ok();
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return Internal("cannot create " + path.parent_path().string() + ": " + ec.message());
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush()) return Internal("cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal("cannot replace " + path.string() + ": " + ec.message());
  return Status::Ok();
}

std::string PythonResolverSource() {
  return R"PY(# Written by the modelfleet-local kubelet: resolve Service names from MODELFLEET_HOSTS_FILE
# before asking the system resolver, so pods can reach each other by Kubernetes DNS names.
import os as _os
import socket as _socket

_PATH = _os.environ.get("MODELFLEET_HOSTS_FILE", "")
_cache = {"mtime": None, "hosts": {}}


def _hosts():
    try:
        mtime = _os.stat(_PATH).st_mtime_ns
    except OSError:
        return {}
    if mtime != _cache["mtime"]:
        hosts = {}
        with open(_PATH, encoding="utf-8") as f:
            for line in f:
                fields = line.split("#", 1)[0].split()
                for name in fields[1:]:
                    hosts.setdefault(name.lower().rstrip("."), fields[0])
        _cache.update(mtime=mtime, hosts=hosts)
    return _cache["hosts"]


def _lookup(host):
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str) or not _PATH:
        return None
    return _hosts().get(host.lower().rstrip("."))


_getaddrinfo = _socket.getaddrinfo
_gethostbyname = _socket.gethostbyname
_gethostbyname_ex = _socket.gethostbyname_ex


def getaddrinfo(host, *args, **kwargs):
    ip = _lookup(host)
    return _getaddrinfo(ip if ip else host, *args, **kwargs)


def gethostbyname(host):
    ip = _lookup(host)
    return ip if ip else _gethostbyname(host)


def gethostbyname_ex(host):
    ip = _lookup(host)
    return (host, [], [ip]) if ip else _gethostbyname_ex(host)


_socket.getaddrinfo = getaddrinfo
_socket.gethostbyname = gethostbyname
_socket.gethostbyname_ex = gethostbyname_ex
)PY";
}

}  // namespace mf::local
