#include "tools/local/controllers/endpoints.h"

#include <map>

namespace mf::local {
namespace {

struct ResolvedPort {
  std::string name;
  int64_t port;
  std::string protocol;
  auto operator<=>(const ResolvedPort&) const = default;
};

// The pod's port for a service port: a number, a named container port, or (unset) the port.
std::optional<int64_t> TargetPortOf(const Json& service_port, const Json& pod) {
  const Json target = service_port.value("targetPort", Json());
  if (target.is_number_integer()) return target.get<int64_t>();
  if (target.is_string()) {
    const std::string name = target.get<std::string>();
    bool numeric = !name.empty() && name.find_first_not_of("0123456789") == std::string::npos;
    if (numeric) return std::stoll(name);
    const Json& spec = ObjectAt(pod, {"spec"});
    if (auto cs = spec.find("containers"); cs != spec.end() && cs->is_array()) {
      for (const Json& c : *cs) {
        if (!c.contains("ports") || !c["ports"].is_array()) continue;
        for (const Json& p : c["ports"]) {
          if (StringAt(p, {"name"}) == name) return IntAt(p, {"containerPort"}, 0);
        }
      }
    }
    return std::nullopt;  // this pod does not expose the named port
  }
  return IntAt(service_port, {"port"}, 0);
}

Json TargetRef(const Json& pod) {
  return {{"kind", "Pod"}, {"namespace", NamespaceOf(pod)}, {"name", NameOf(pod)},
          {"uid", Uid(pod)}};
}

}  // namespace

namespace {

StatusOr<ServiceEndpoints> BuildServiceEndpointsUnchecked(const Json& service, const std::vector<Json>& pods) {
  const Json& spec = ObjectAt(service, {"spec"});
  ServiceEndpoints out;
  const Json selector = spec.value("selector", Json::object());
  if (!selector.is_object() || selector.empty()) return out;
  const Json ports = spec.value("ports", Json::array());
  if (!ports.is_array()) return InvalidArgument("spec.ports must be a list");
  const bool publish_not_ready = spec.value("publishNotReadyAddresses", false);
  const std::string svc_name = NameOf(service);
  const std::string ns = NamespaceOf(service);

  // Group pods by the port mapping they resolve to: each group is one subset / one slice.
  struct Group {
    Json ready = Json::array(), not_ready = Json::array(), slice_endpoints = Json::array();
  };
  std::map<std::vector<ResolvedPort>, Group> groups;
  for (const Json& pod : pods) {
    const std::string ip = StringAt(pod, {"status", "podIP"});
    if (ip.empty() || !MapSelectorMatches(selector, LabelsOf(pod))) continue;
    std::string phase = StringAt(pod, {"status", "phase"});
    if (phase == "Succeeded" || phase == "Failed") continue;
    std::vector<ResolvedPort> resolved;
    for (const Json& p : ports) {
      auto target = TargetPortOf(p, pod);
      if (!target) continue;
      resolved.push_back({StringAt(p, {"name"}), *target, StringAt(p, {"protocol"}, "TCP")});
    }
    const bool terminating = IsBeingDeleted(pod);
    const bool ready = (IsPodReady(pod) || publish_not_ready);
    Json address = {{"ip", ip}, {"targetRef", TargetRef(pod)}};
    if (std::string node = StringAt(pod, {"spec", "nodeName"}); !node.empty()) {
      address["nodeName"] = node;
    }
    std::string hostname = StringAt(pod, {"spec", "hostname"});
    if (!hostname.empty() && StringAt(pod, {"spec", "subdomain"}) == svc_name) {
      address["hostname"] = hostname;
    }
    Group& g = groups[resolved];
    if (!terminating) (ready ? g.ready : g.not_ready).push_back(address);
    Json endpoint = {{"addresses", Json::array({ip})},
                     {"conditions",
                      {{"ready", ready && !terminating}, {"serving", ready},
                       {"terminating", terminating}}},
                     {"targetRef", TargetRef(pod)}};
    if (address.contains("nodeName")) endpoint["nodeName"] = address["nodeName"];
    if (address.contains("hostname")) endpoint["hostname"] = address["hostname"];
    g.slice_endpoints.push_back(std::move(endpoint));
  }

  Json subsets = Json::array();
  for (auto& [resolved, g] : groups) {
    Json port_list = Json::array();
    for (const ResolvedPort& p : resolved) {
      Json entry = {{"port", p.port}, {"protocol", p.protocol}};
      if (!p.name.empty()) entry["name"] = p.name;
      port_list.push_back(entry);
    }
    if (!g.ready.empty() || !g.not_ready.empty()) {
      Json subset = {{"ports", port_list}};
      if (!g.ready.empty()) subset["addresses"] = g.ready;
      if (!g.not_ready.empty()) subset["notReadyAddresses"] = g.not_ready;
      subsets.push_back(std::move(subset));
    }
    // The slice name is a function of the port mapping, so the same slice is updated in place.
    Json key = port_list;
    uint32_t h = 2166136261u;
    for (unsigned char c : key.dump()) {
      h ^= c;
      h *= 16777619u;
    }
    char suffix[16];
    std::snprintf(suffix, sizeof(suffix), "%08x", h);
    out.slices.push_back(
        {{"apiVersion", "discovery.k8s.io/v1"},
         {"kind", "EndpointSlice"},
         {"metadata",
          {{"name", svc_name + "-" + suffix},
           {"namespace", ns},
           {"labels",
            {{std::string(kServiceNameLabel), svc_name},
             {std::string(kManagedByLabel), std::string(kManagedByValue)}}},
           {"ownerReferences", Json::array({ControllerRef(service, "v1", "Service")})}}},
         {"addressType", "IPv4"},
         {"endpoints", g.slice_endpoints},
         {"ports", port_list}});
  }
  out.endpoints = {{"apiVersion", "v1"},
                   {"kind", "Endpoints"},
                   {"metadata",
                    {{"name", svc_name},
                     {"namespace", ns},
                     {"labels", LabelsOf(service)}}},
                   {"subsets", subsets}};
  return out;
}

}  // namespace

StatusOr<ServiceEndpoints> BuildServiceEndpoints(const Json& service, const std::vector<Json>& pods) {
  return CatchMalformed<ServiceEndpoints>("Service " + NamespaceOf(service) + "/" + NameOf(service),
                                [&] { return BuildServiceEndpointsUnchecked(service, pods); });
}

}  // namespace mf::local
