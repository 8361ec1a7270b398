// The objects a ModelDeployment asks for, as a pure function of its spec and the operator's
// settings: per version a Deployment of serving pods (model server + modelfleet-sync sidecar) and
// a Service; the router's ConfigMap, ServiceAccount, RoleBinding, Deployment and Service; the
// server's batching ConfigMap when batching is on. Every object carries the owner reference and
// the labels the operator finds its objects by; nothing here talks to the API server.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "modeldeployment/spec.h"

namespace mf::op {

inline constexpr const char* kFieldManager = "modelfleet-operator";
inline constexpr const char* kManagedByLabel = "app.kubernetes.io/managed-by";
inline constexpr const char* kModelDeploymentLabel = "modelfleet.io/modeldeployment";
inline constexpr const char* kVersionLabel = "modelfleet.io/version";
inline constexpr const char* kComponentLabel = "modelfleet.io/component";
inline constexpr int kRestPort = 8501;
inline constexpr int kGrpcPort = 8500;
inline constexpr int kRouterAdminPort = 8081;

struct OperatorSettings {
  std::string server_image = "modelfleet/server:0.1.0";
  std::string sync_image = "modelfleet/sync:0.1.0";
  std::string router_image = "modelfleet/router:0.1.0";
  // The ClusterRole the routers' ServiceAccounts are bound to in each namespace ("" = bind none).
  std::string router_cluster_role = "modelfleet-router";
  // Where the routers push their counters every second (autoscaling and rollout analysis).
  std::string report_url;
  // Server and router pods answer not-ready this long after SIGTERM before draining, so routers
  // (and, for a router, its Service) stop sending first; the grace period leaves room for the
  // drain after it.
  // 10 s: EndpointSlice updates reach every router within it even on a loaded control plane.
  int not_ready_grace_seconds = 10;
  int termination_grace_seconds = 45;
};

// One object to server-side apply, with the identity the apply layer needs.
struct DesiredObject {
  std::string resource;  // "deployments", "services", "configmaps", "serviceaccounts", "rolebindings"
  std::string name;
  Json object;
};

struct DesiredState {
  std::vector<DesiredObject> objects;
  Json router_config;  // what the routers receive (also in the router ConfigMap)
};

// `weights`: the percent per version the routers should apply (the spec's traffic, or a rollout's).
// `replicas`: per-version sizes the autoscaler chose (versions not named use the spec's).
DesiredState BuildDesiredState(const ModelDeploymentSpec& md, const std::map<std::string, int>& weights,
                               const OperatorSettings& settings, const std::map<std::string, int32_t>& replicas = {});

// Object names, shared with the status builder and the tests.
std::string VersionObjectName(const ModelDeploymentSpec& md, const std::string& version);
std::string RouterName(const ModelDeploymentSpec& md);         // "<md>-router": Deployment, ConfigMap, SA, RoleBinding
std::string RouterServiceName(const ModelDeploymentSpec& md);  // "<md>": what clients call
std::string ServerConfigName(const ModelDeploymentSpec& md);

// The labels every object of the ModelDeployment carries, and the selector text for its pods.
std::map<std::string, std::string> CommonLabels(const ModelDeploymentSpec& md);
std::string PodSelector(const std::string& md_name);
Json OwnerReference(const ModelDeploymentSpec& md);

// Whether an update of an owned object can change what a reconcile does: anything but other
// controllers' labels and annotations and the API server's bookkeeping (resourceVersion,
// managedFields). Keeps reconciles at rest flat while others label our objects.
bool OwnedObjectChanged(const Json& old_object, const Json& new_object);

}  // namespace mf::op
