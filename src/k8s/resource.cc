#include "k8s/resource.h"

namespace mf::k8s {

std::string GroupVersionResource::ApiPrefix() const {
  return group.empty() ? "/api/" + version : "/apis/" + group + "/" + version;
}

std::string GroupVersionResource::ToString() const { return group.empty() ? resource : resource + "." + group; }

namespace resources {
GroupVersionResource Pods() { return {"", "v1", "pods", true}; }
GroupVersionResource Services() { return {"", "v1", "services", true}; }
GroupVersionResource ConfigMaps() { return {"", "v1", "configmaps", true}; }
GroupVersionResource Events() { return {"", "v1", "events", true}; }
GroupVersionResource Namespaces() { return {"", "v1", "namespaces", false}; }
GroupVersionResource Deployments() { return {"apps", "v1", "deployments", true}; }
GroupVersionResource Nodes() { return {"", "v1", "nodes", false}; }
GroupVersionResource Secrets() { return {"", "v1", "secrets", true}; }
GroupVersionResource ServiceAccounts() { return {"", "v1", "serviceaccounts", true}; }
GroupVersionResource Endpoints() { return {"", "v1", "endpoints", true}; }
GroupVersionResource EndpointSlices() { return {"discovery.k8s.io", "v1", "endpointslices", true}; }
GroupVersionResource ReplicaSets() { return {"apps", "v1", "replicasets", true}; }
GroupVersionResource ClusterRoleBindings() { return {"rbac.authorization.k8s.io", "v1", "clusterrolebindings", false}; }
GroupVersionResource RoleBindings() { return {"rbac.authorization.k8s.io", "v1", "rolebindings", true}; }
GroupVersionResource Leases() { return {"coordination.k8s.io", "v1", "leases", true}; }
GroupVersionResource ModelDeployments() { return {"modelfleet.io", "v1alpha1", "modeldeployments", true}; }
GroupVersionResource TrainingJobs() { return {"modelfleet.io", "v1alpha1", "trainingjobs", true}; }
}  // namespace resources

namespace {

// A path segment must be non-empty, must not be "." or "..", and must not contain characters
// that would change the path's meaning. Kubernetes names are stricter still; the API server
// gives the precise validation error, this only keeps the request well-formed.
Status CheckSegment(std::string_view what, std::string_view value) {
  if (value.empty()) return InvalidArgument(std::string(what) + " must not be empty");
  if (value == "." || value == "..") {
    return InvalidArgument(std::string(what) + " must not be '" + std::string(value) + "'");
  }
  for (char c : value) {
    if (c == '/' || c == '?' || c == '#' || c == '%' || static_cast<unsigned char>(c) <= 0x20 ||
        static_cast<unsigned char>(c) >= 0x7f) {
      return InvalidArgument(std::string(what) + " '" + std::string(value) +
                             "' contains a character not allowed in a Kubernetes path segment");
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> ResourceRef::Path() const {
  MF_RETURN_IF_ERROR(CheckSegment("API version", gvr.version));
  MF_RETURN_IF_ERROR(CheckSegment("resource", gvr.resource));
  if (!gvr.group.empty()) MF_RETURN_IF_ERROR(CheckSegment("API group", gvr.group));
  std::string path = gvr.ApiPrefix();
  if (!ns.empty()) {
    if (!gvr.namespaced) {
      return InvalidArgument("resource " + gvr.ToString() + " is cluster-scoped; namespace '" + ns +
                             "' must not be set");
    }
    MF_RETURN_IF_ERROR(CheckSegment("namespace", ns));
    path += "/namespaces/" + ns;
  }
  path += "/" + gvr.resource;
  if (!name.empty()) {
    MF_RETURN_IF_ERROR(CheckSegment("name", name));
    path += "/" + name;
  }
  if (!subresource.empty()) {
    if (name.empty()) return InvalidArgument("subresource '" + subresource + "' needs an object name");
    MF_RETURN_IF_ERROR(CheckSegment("subresource", subresource));
    path += "/" + subresource;
  }
  return path;
}

std::string UrlEncode(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (unsigned char c : value) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
        c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

}  // namespace mf::k8s
