// A userspace Service proxy, as kube-proxy's original "userspace" mode: each proxied Service gets
// a listener on its cluster IP (local inside the cluster's network namespace, network.h) for
// every TCP port it declares, and each accepted connection is spliced to one of its ready
// endpoints (round robin, trying the next one when a connect fails). The same proxy serves the
// host-side forwards (the API server, LoadBalancer Services) on listeners the caller opens.
// So "<service>:<port>" behaves as in a cluster: the Service port maps to the targetPort and
// load spreads over the ready pods. Headless Services (clusterIP None) are not proxied: their
// names resolve straight to pod IPs (service_hosts.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tools/local/kubelet/object_fields.h"

namespace mf::local {

struct Backend {
  std::string ip;
  uint16_t port = 0;
  friend bool operator==(const Backend&, const Backend&) = default;
};

struct ProxiedPort {
  uint16_t port = 0;              // the Service port clients connect to
  std::vector<Backend> backends;  // ready endpoints, in a stable order
};

struct ProxiedService {
  std::string key;  // "ns/name"
  std::string vip;
  std::vector<ProxiedPort> ports;
};

// The proxied view of Services and their Endpoints: which services get a VIP (from `vips`, a
// "ns/name" -> address map the caller keeps stable) and which backends each port has.
std::vector<ProxiedService> PlanServiceProxy(const std::vector<Json>& services, const std::vector<Json>& endpoints,
                                             const std::map<std::string, std::string>& vips);

// Whether a Service is proxied (has a selector or endpoints, is not headless, and has TCP ports).
bool IsProxiedService(const Json& service);

// A listening TCP socket for ip:port; the proxy owns the descriptor it returns.
using ListenerOpener = std::function<StatusOr<int>(const std::string& ip, uint16_t port)>;
// Binds and listens in this process's network namespace.
StatusOr<int> OpenLocalListener(const std::string& ip, uint16_t port);

class ServiceProxy {
 public:
  explicit ServiceProxy(ListenerOpener open = OpenLocalListener);
  ~ServiceProxy();  // closes every listener and connection
  ServiceProxy(const ServiceProxy&) = delete;
  ServiceProxy& operator=(const ServiceProxy&) = delete;

  // Opens, updates and closes listeners to match `services`. Returns the listeners that could not
  // be opened ("vip:port: reason"), which are retried on the next call.
  std::vector<std::string> Apply(const std::vector<ProxiedService>& services);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mf::local
