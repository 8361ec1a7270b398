#include "tools/local/apiserver/resources.h"

#include <set>

#include "tools/local/apiserver/field_validation.h"
#include "tools/local/apiserver/schema.h"
#include "tools/local/store/object_meta.h"
#include "tools/local/store/selector.h"

namespace mf::local {
namespace {

using json = nlohmann::json;

json GenericSchema(const std::string& kind, bool with_spec, bool with_status) {
  json props = {
      {"apiVersion", {{"type", "string"}, {"description", "APIVersion defines the versioned schema of this representation of an object."}}},
      {"kind", {{"type", "string"}, {"description", "Kind is a string value representing the REST resource this object represents."}}},
      {"metadata", {{"type", "object"}, {"description", "Standard object's metadata."}, {"x-kubernetes-preserve-unknown-fields", true}}},
  };
  if (with_spec) {
    props["spec"] = {{"type", "object"}, {"description", "Spec defines the desired state of the " + kind + "."}, {"x-kubernetes-preserve-unknown-fields", true}};
  }
  if (with_status) {
    props["status"] = {{"type", "object"}, {"description", "Status is the most recently observed state of the " + kind + "."}, {"x-kubernetes-preserve-unknown-fields", true}};
  }
  return {{"type", "object"}, {"description", kind + " (served by modelfleet-local; fields are not itemized)."},
          {"properties", props}, {"x-kubernetes-preserve-unknown-fields", true}};
}

PrinterColumn Age() { return {"Age", "date", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", ".metadata.creationTimestamp", 0}; }

ResourceInfo Builtin(std::string group, std::string resource, std::string kind, bool namespaced,
                     std::vector<std::string> short_names, bool has_status, bool with_spec = true) {
  ResourceInfo info;
  info.type.gvr = {std::move(group), "v1", std::move(resource)};
  info.type.kind = kind;
  info.type.namespaced = namespaced;
  info.type.has_status_subresource = has_status;
  info.singular = kind;
  std::transform(info.singular.begin(), info.singular.end(), info.singular.begin(), ::tolower);
  info.short_names = std::move(short_names);
  info.schema = GenericSchema(kind, with_spec, has_status);
  info.columns = {Age()};
  return info;
}

Status Invalid(const json& object, const std::string& kind_group, const std::vector<std::string>& errors) {
  std::string name = object.contains("metadata") ? object["metadata"].value("name", "") : "";
  std::string message = kind_group + " \"" + name + "\" is invalid: ";
  if (errors.size() == 1) {
    message += errors[0];
  } else {
    message += "[";
    for (size_t i = 0; i < errors.size(); ++i) message += (i ? ", " : "") + errors[i];
    message += "]";
  }
  return InvalidArgument(message);
}

// Deployment/ReplicaSet: defaulted replicas, and a selector that selects the pod template.
Status AdmitWorkload(json& o, const std::string& kind_group) {
  json& spec = o["spec"];
  if (!spec.is_object()) return Invalid(o, kind_group, {"spec: Required value"});
  if (!spec.contains("replicas")) spec["replicas"] = 1;
  std::vector<std::string> errors;
  if (!spec["replicas"].is_number_integer() || spec["replicas"].get<int64_t>() < 0) {
    errors.push_back("spec.replicas: Invalid value: " + spec["replicas"].dump() + ": must be greater than or equal to 0");
  }
  auto selector = LabelSelector::FromObject(spec.value("selector", json()));
  if (!spec.contains("selector") || !selector.ok() || selector->empty()) {
    errors.push_back("spec.selector: Required value");
  } else {
    json labels = spec.contains("template") && spec["template"].contains("metadata")
                      ? spec["template"]["metadata"].value("labels", json::object()) : json::object();
    if (!selector->Matches(labels)) {
      errors.push_back("spec.template.metadata.labels: Invalid value: " + labels.dump() + ": `selector` does not match template `labels`");
    }
  }
  if (!errors.empty()) return Invalid(o, kind_group, errors);
  if (kind_group == "Deployment.apps") {
    json& strategy = spec["strategy"];
    if (!strategy.is_object()) strategy = json::object();
    if (strategy.value("type", "").empty()) strategy["type"] = "RollingUpdate";
    if (strategy["type"] == "RollingUpdate" && !strategy.contains("rollingUpdate")) {
      strategy["rollingUpdate"] = {{"maxSurge", "25%"}, {"maxUnavailable", "25%"}};
    }
  }
  return Status::Ok();
}

Status AdmitPod(json& o, const json*) {
  std::vector<std::string> errors;
  const json& containers = o.contains("spec") ? o["spec"].value("containers", json()) : json();
  if (!containers.is_array() || containers.empty()) {
    errors.push_back("spec.containers: Required value");
  } else {
    for (size_t i = 0; i < containers.size(); ++i) {
      const json& c = containers[i];
      if (!c.is_object() || !c.contains("name") || !c["name"].is_string() || c["name"].get<std::string>().empty()) {
        errors.push_back("spec.containers[" + std::to_string(i) + "].name: Required value");
      }
      if (!c.is_object() || !c.contains("image") || !c["image"].is_string()) {
        errors.push_back("spec.containers[" + std::to_string(i) + "].image: Required value");
      }
    }
  }
  if (!errors.empty()) return Invalid(o, "Pod", errors);
  if (!o.contains("status") || !o["status"].contains("phase")) o["status"]["phase"] = "Pending";
  if (!o["spec"].contains("restartPolicy")) o["spec"]["restartPolicy"] = "Always";
  return Status::Ok();
}

// A Service's cluster IP, as kube-apiserver allocates it at creation. Ours come from 127.128.0.0/10
// (loopback, so the kubelet's Service proxy can listen on it), picked by a hash of
// namespace/name: stable across restarts, and a collision (the proxy then picks another
// address) is rare among the Services of one machine.
std::string ClusterIpFor(const json& o) {
  std::string key = o["metadata"].value("namespace", "") + "/" + o["metadata"].value("name", "");
  uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : key) h = (h ^ c) * 16777619u;
  uint32_t ip = (127u << 24) | (128u << 16) | (h & ((1u << 22) - 1));
  if ((ip & 255) == 0) ip |= 1;
  if ((ip & 255) == 255) ip &= ~1u;
  return std::to_string(ip >> 24) + "." + std::to_string((ip >> 16) & 255) + "." + std::to_string((ip >> 8) & 255) +
         "." + std::to_string(ip & 255);
}

Status AdmitService(json& o, const json* old) {
  json& spec = o["spec"];
  if (!spec.is_object()) spec = json::object();
  if (!spec.contains("type")) spec["type"] = "ClusterIP";
  if (spec["type"] != "ExternalName") {
    auto ip_of = [](const json& s) { return s.contains("clusterIP") && s["clusterIP"].is_string() ? s["clusterIP"].get<std::string>() : ""; };
    std::string ip = ip_of(spec);
    const std::string previous = old && old->contains("spec") ? ip_of((*old)["spec"]) : "";
    if (!previous.empty()) {
      if (ip.empty()) ip = previous;
      if (ip != previous) {
        return Invalid(o, "Service", {"spec.clusterIP: Invalid value: \"" + ip + "\": field is immutable"});
      }
    }
    if (ip.empty()) ip = ClusterIpFor(o);
    spec["clusterIP"] = ip;
    if (!spec.contains("clusterIPs")) spec["clusterIPs"] = json::array({ip});
  }
  if (spec.contains("ports") && spec["ports"].is_array()) {
    for (auto& p : spec["ports"]) {
      if (!p.is_object() || !p.contains("port") || !p["port"].is_number_integer()) {
        return Invalid(o, "Service", {"spec.ports: Invalid value: each port needs an integer \"port\""});
      }
      if (!p.contains("protocol")) p["protocol"] = "TCP";
      if (!p.contains("targetPort")) p["targetPort"] = p["port"];
    }
  }
  return Status::Ok();
}

json CrdStatus(const json& crd) {
  json names = crd["spec"]["names"];
  return {{"acceptedNames", names},
          {"storedVersions", [&] {
             json v = json::array();
             for (const auto& ver : crd["spec"]["versions"]) {
               if (ver.value("storage", false)) v.push_back(ver["name"]);
             }
             return v;
           }()},
          {"conditions",
           {{{"type", "NamesAccepted"}, {"status", "True"}, {"reason", "NoConflicts"}, {"message", "no conflicts found"},
             {"lastTransitionTime", crd["metadata"].value("creationTimestamp", "")}},
            {{"type", "Established"}, {"status", "True"}, {"reason", "InitialNamesAccepted"},
             {"message", "the initial names have been accepted"},
             {"lastTransitionTime", crd["metadata"].value("creationTimestamp", "")}}}}};
}

}  // namespace

std::vector<ResourceInfo> BuiltinResources() {
  std::vector<ResourceInfo> out;
  auto ns = Builtin("", "namespaces", "Namespace", false, {"ns"}, true);
  ns.columns = {{"Status", "string", "", "The status of the namespace", ".status.phase", 0}, Age()};
  ns.type.admit = [](json& o, const json*) {
    if (!o.contains("status") || !o["status"].contains("phase")) o["status"]["phase"] = "Active";
    if (!o.contains("spec")) o["spec"] = {{"finalizers", {"kubernetes"}}};
    return Status::Ok();
  };
  out.push_back(ns);

  auto pods = Builtin("", "pods", "Pod", true, {"po"}, true);
  pods.has_log = true;
  pods.categories = {"all"};
  pods.columns = {{"Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", "", 0},
                  {"Status", "string", "", "The aggregate status of the containers in this pod.", ".status.phase", 0},
                  {"Restarts", "string", "", "The number of times the containers in this pod have been restarted.", "", 0},
                  Age(),
                  {"IP", "string", "", "The IP address assigned to the pod", ".status.podIP", 1},
                  {"Node", "string", "", "The name of the node the pod is running on", ".spec.nodeName", 1}};
  pods.type.admit = AdmitPod;
  out.push_back(pods);

  auto services = Builtin("", "services", "Service", true, {"svc"}, true);
  services.categories = {"all"};
  services.columns = {{"Type", "string", "", "The type of the service.", ".spec.type", 0},
                      {"Cluster-IP", "string", "", "The IP address of the service.", ".spec.clusterIP", 0}, Age()};
  services.type.admit = AdmitService;
  out.push_back(services);

  out.push_back(Builtin("", "endpoints", "Endpoints", true, {"ep"}, false, false));
  out.push_back(Builtin("", "configmaps", "ConfigMap", true, {"cm"}, false, false));
  out.push_back(Builtin("", "secrets", "Secret", true, {}, false, false));
  out.push_back(Builtin("", "serviceaccounts", "ServiceAccount", true, {"sa"}, false, false));
  out.push_back(Builtin("", "events", "Event", true, {"ev"}, false, false));
  out.push_back(Builtin("", "persistentvolumeclaims", "PersistentVolumeClaim", true, {"pvc"}, true));
  out.push_back(Builtin("", "nodes", "Node", false, {"no"}, true));

  auto deployments = Builtin("apps", "deployments", "Deployment", true, {"deploy"}, true);
  deployments.categories = {"all"};
  deployments.scale = ScaleSubresource{".spec.replicas", ".status.replicas", ".status.selector"};
  deployments.columns = {{"Ready", "string", "", "Number of the pod with ready state", "", 0},
                         {"Up-to-date", "integer", "", "Total number of non-terminated pods targeted by this deployment that have the desired template spec.", ".status.updatedReplicas", 0},
                         {"Available", "integer", "", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.", ".status.availableReplicas", 0},
                         Age()};
  deployments.type.admit = [](json& o, const json*) { return AdmitWorkload(o, "Deployment.apps"); };
  out.push_back(deployments);

  auto replicasets = Builtin("apps", "replicasets", "ReplicaSet", true, {"rs"}, true);
  replicasets.categories = {"all"};
  replicasets.scale = ScaleSubresource{".spec.replicas", ".status.replicas", ".status.selector"};
  replicasets.columns = {{"Desired", "integer", "", "Number of desired pods.", ".spec.replicas", 0},
                         {"Current", "integer", "", "Number of actual replicas.", ".status.replicas", 0},
                         {"Ready", "integer", "", "Number of ready replicas.", ".status.readyReplicas", 0}, Age()};
  replicasets.type.admit = [](json& o, const json*) { return AdmitWorkload(o, "ReplicaSet.apps"); };
  out.push_back(replicasets);

  out.push_back(Builtin("discovery.k8s.io", "endpointslices", "EndpointSlice", true, {}, false, false));
  out.push_back(Builtin("coordination.k8s.io", "leases", "Lease", true, {}, false));
  out.push_back(Builtin("rbac.authorization.k8s.io", "roles", "Role", true, {}, false, false));
  out.push_back(Builtin("rbac.authorization.k8s.io", "rolebindings", "RoleBinding", true, {}, false, false));
  out.push_back(Builtin("rbac.authorization.k8s.io", "clusterroles", "ClusterRole", false, {}, false, false));
  out.push_back(Builtin("rbac.authorization.k8s.io", "clusterrolebindings", "ClusterRoleBinding", false, {}, false, false));

  auto crds = Builtin("apiextensions.k8s.io", "customresourcedefinitions", "CustomResourceDefinition", false, {"crd", "crds"}, true);
  crds.columns = {{"Created At", "date", "", "", ".metadata.creationTimestamp", 0}};
  crds.type.admit = [](json& o, const json* old) {
    MF_RETURN_IF_ERROR(ValidateCrd(o, old));
    o["status"] = CrdStatus(o);
    return Status::Ok();
  };
  out.push_back(crds);
  return out;
}

Status ValidateCrd(json& crd, const json* old) {
  std::vector<std::string> errors;
  const json& spec = crd.value("spec", json::object());
  std::string group = spec.value("group", "");
  const json names = spec.value("names", json::object());
  std::string plural = names.value("plural", "");
  std::string kind = names.value("kind", "");
  if (group.empty() || group.find('.') == std::string::npos) errors.push_back("spec.group: Invalid value: \"" + group + "\": should be a domain with at least one dot");
  if (plural.empty()) errors.push_back("spec.names.plural: Required value");
  if (kind.empty()) errors.push_back("spec.names.kind: Required value");
  std::string scope = spec.value("scope", "");
  if (scope != "Namespaced" && scope != "Cluster") errors.push_back("spec.scope: Unsupported value: \"" + scope + "\": supported values: \"Cluster\", \"Namespaced\"");
  std::string name = crd["metadata"].value("name", "");
  if (name != plural + "." + group) errors.push_back("metadata.name: Invalid value: \"" + name + "\": must be spec.names.plural+\".\"+spec.group");
  const json versions = spec.value("versions", json::array());
  if (!versions.is_array() || versions.empty()) errors.push_back("spec.versions: Invalid value: must have exactly one version marked as storage version");
  int storage = 0;
  if (versions.is_array()) {
    for (size_t i = 0; i < versions.size(); ++i) {
      const json& v = versions[i];
      if (!v.is_object() || v.value("name", "").empty()) errors.push_back("spec.versions[" + std::to_string(i) + "].name: Required value");
      if (v.is_object() && v.value("storage", false)) ++storage;
      if (v.is_object() && (!v.contains("schema") || !v["schema"].contains("openAPIV3Schema"))) {
        errors.push_back("spec.versions[" + std::to_string(i) + "].schema.openAPIV3Schema: Required value: schemas are required");
      }
      if (v.is_object() && v.contains("schema") && v["schema"].contains("openAPIV3Schema")) {
        for (auto& e : ValidateSchemaRules(v["schema"]["openAPIV3Schema"], "spec.versions[" + std::to_string(i) + "].schema.openAPIV3Schema")) {
          errors.push_back(std::move(e));
        }
      }
    }
  }
  if (versions.is_array() && !versions.empty() && storage != 1) errors.push_back("spec.versions: Invalid value: must have exactly one version marked as storage version");
  if (old && old->contains("spec")) {
    const json& old_spec = (*old)["spec"];
    if (old_spec.value("group", "") != group) errors.push_back("spec.group: Invalid value: field is immutable");
    if (old_spec.value("scope", "") != scope) errors.push_back("spec.scope: Invalid value: field is immutable");
  }
  if (!errors.empty()) return Invalid(crd, "CustomResourceDefinition.apiextensions.k8s.io", errors);
  return Status::Ok();
}

StatusOr<std::vector<ResourceInfo>> ResourcesFromCrd(const json& crd) {
  json copy = crd;
  MF_RETURN_IF_ERROR(ValidateCrd(copy, nullptr));
  const json& spec = crd["spec"];
  const json& names = spec["names"];
  std::vector<ResourceInfo> out;
  for (const auto& v : spec["versions"]) {
    if (!v.value("served", true)) continue;
    ResourceInfo info;
    info.is_custom = true;
    info.type.gvr = {spec["group"].get<std::string>(), v["name"].get<std::string>(), names["plural"].get<std::string>()};
    info.type.kind = names["kind"].get<std::string>();
    info.type.namespaced = spec["scope"] == "Namespaced";
    info.singular = names.value("singular", "");
    if (info.singular.empty()) {
      info.singular = info.type.kind;
      std::transform(info.singular.begin(), info.singular.end(), info.singular.begin(), ::tolower);
    }
    for (const auto& s : names.value("shortNames", json::array())) info.short_names.push_back(s.get<std::string>());
    for (const auto& c : names.value("categories", json::array())) info.categories.push_back(c.get<std::string>());
    const json subresources = v.value("subresources", spec.value("subresources", json::object()));
    info.type.has_status_subresource = subresources.contains("status");
    if (subresources.contains("scale")) {
      const json& s = subresources["scale"];
      info.scale = ScaleSubresource{s.value("specReplicasPath", ".spec.replicas"), s.value("statusReplicasPath", ".status.replicas"),
                                    s.value("labelSelectorPath", "")};
    }
    const json columns = v.value("additionalPrinterColumns", json::array());
    if (columns.empty()) {
      info.columns = {Age()};
    } else {
      for (const auto& c : columns) {
        info.columns.push_back({c.value("name", ""), c.value("type", "string"), c.value("format", ""),
                                c.value("description", ""), c.value("jsonPath", ""), c.value("priority", 0)});
      }
    }
    info.schema = v["schema"]["openAPIV3Schema"];
    const std::string kind_group = info.type.kind + "." + info.type.gvr.group;
    const json schema = info.schema;
    info.type.admit = [schema, kind_group](json& object, const json* old) -> Status {
      MF_RETURN_IF_ERROR(FieldValidationScope::ReportUnknownFields(PruneUnknownFields(object, schema)));
      ApplyDefaults(object, schema);
      std::vector<std::string> errors = ValidateAgainstSchema(object, schema, old);
      if (!errors.empty()) return Invalid(object, kind_group, errors);
      return Status::Ok();
    };
    out.push_back(std::move(info));
  }
  return out;
}

ResourceCatalog::ResourceCatalog() : builtins_(BuiltinResources()) {
  snapshot_ = std::make_shared<const Snapshot>(builtins_);
}

std::shared_ptr<const ResourceCatalog::Snapshot> ResourceCatalog::snapshot() const {
  std::lock_guard lock(mu_);
  return snapshot_;
}

void ResourceCatalog::SetCrdResources(const std::string& crd_name, std::vector<ResourceInfo> resources) {
  std::lock_guard lock(mu_);
  auto it = std::find_if(crds_.begin(), crds_.end(), [&](const auto& e) { return e.first == crd_name; });
  if (resources.empty()) {
    if (it != crds_.end()) crds_.erase(it);
  } else if (it != crds_.end()) {
    it->second = std::move(resources);
  } else {
    crds_.emplace_back(crd_name, std::move(resources));
  }
  Snapshot next = builtins_;
  for (const auto& [_, rs] : crds_) next.insert(next.end(), rs.begin(), rs.end());
  snapshot_ = std::make_shared<const Snapshot>(std::move(next));
}

const ResourceInfo* FindResource(const ResourceCatalog::Snapshot& snap, const std::string& group,
                                 const std::string& version, const std::string& resource) {
  for (const auto& r : snap) {
    if (r.type.gvr.group == group && r.type.gvr.version == version && r.type.gvr.resource == resource) return &r;
  }
  return nullptr;
}

}  // namespace mf::local
