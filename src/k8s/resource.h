// Addressing Kubernetes resources without generated types: a GroupVersionResource plus a
// namespace, name and subresource become the REST path. The core group lives under /api/v1,
// every other group under /apis/<group>/<version>.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace mf::k8s {

struct GroupVersionResource {
  std::string group;     // "" for the core group
  std::string version;   // "v1"
  std::string resource;  // plural, lower-case: "pods", "deployments", "modeldeployments"
  bool namespaced = true;

  // "/api/v1" or "/apis/apps/v1"
  std::string ApiPrefix() const;
  // "pods" or "deployments.apps", as kubectl names them.
  std::string ToString() const;
  friend bool operator==(const GroupVersionResource&, const GroupVersionResource&) = default;
};

// Well-known resources the operator, router and sidecar use.
namespace resources {
GroupVersionResource Pods();
GroupVersionResource Services();
GroupVersionResource ConfigMaps();
GroupVersionResource Events();
GroupVersionResource Namespaces();
GroupVersionResource Nodes();
GroupVersionResource Secrets();
GroupVersionResource ServiceAccounts();
GroupVersionResource Endpoints();
GroupVersionResource EndpointSlices();
GroupVersionResource ReplicaSets();
GroupVersionResource ClusterRoleBindings();
GroupVersionResource RoleBindings();
GroupVersionResource Deployments();
GroupVersionResource Leases();
GroupVersionResource ModelDeployments();
GroupVersionResource TrainingJobs();
}  // namespace resources

// One object (name set) or a collection (name empty) of a resource, optionally a subresource.
struct ResourceRef {
  GroupVersionResource gvr;
  std::string ns;           // empty: cluster-scoped resource, or all namespaces for a collection
  std::string name;         // empty: the collection
  std::string subresource;  // "status", "scale", "log" or empty

  // Validates the parts (DNS-1123-ish: no '/', no "..", no empty segments where required) and
  // builds the path, e.g. /apis/apps/v1/namespaces/ml/deployments/web/scale.
  StatusOr<std::string> Path() const;
};

// Percent-encodes a query parameter value (RFC 3986 unreserved characters pass through).
std::string UrlEncode(std::string_view value);

}  // namespace mf::k8s
