#include "tools/local/controllers/builtin_controllers.h"

#include "tools/local/controllers/deployment.h"
#include "tools/local/controllers/endpoints.h"
#include "tools/local/controllers/object_meta.h"
#include "tools/local/controllers/replicaset.h"
#include "tools/local/controllers/resources.h"

namespace mf::local {
namespace {

// Objects in `ns` of `gvr` whose controller is `owner`, not being deleted.
StatusOr<std::vector<Json>> Owned(Store* store, const GroupVersionResource& gvr, const std::string& ns,
                                  const Json& owner) {
  MF_ASSIGN_OR_RETURN(ObjectList list, store->List(gvr, ns));
  std::vector<Json> owned;
  for (Json& obj : list.items) {
    if (ControllerUidOf(obj) == Uid(owner) && !IsBeingDeleted(obj)) owned.push_back(std::move(obj));
  }
  return owned;
}

Status IgnoreNotFound(const Status& s) {
  return s.code() == StatusCode::kNotFound ? Status::Ok() : s;
}

}  // namespace

Status ReconcileReplicaSet(Store* store, const std::string& ns, const std::string& name) {
  auto rs = store->Get({resources::kReplicaSets, ns, name});
  if (!rs.ok()) return IgnoreNotFound(rs.status());  // its pods go with it (garbage collection)
  if (IsBeingDeleted(*rs)) return Status::Ok();
  MF_ASSIGN_OR_RETURN(std::vector<Json> pods, Owned(store, resources::kPods, ns, *rs));
  MF_ASSIGN_OR_RETURN(ReplicaSetPlan plan, PlanReplicaSet(*rs, pods, Clock::now()));
  for (int64_t i = 0; i < plan.pods_to_create; ++i) {
    Json pod = plan.pod_template;
    pod["metadata"]["generateName"] = name + "-";
    MF_RETURN_IF_ERROR(store->Create(resources::kPods, ns, pod).status());
  }
  for (const std::string& pod : plan.pods_to_delete) {
    MF_RETURN_IF_ERROR(IgnoreNotFound(store->Delete({resources::kPods, ns, pod}).status()));
  }
  return UpdateStatusIfChanged(store, resources::kReplicaSets, *rs, plan.status);
}

Status ReconcileDeployment(Store* store, const std::string& ns, const std::string& name) {
  auto deployment = store->Get({resources::kDeployments, ns, name});
  if (!deployment.ok()) return IgnoreNotFound(deployment.status());
  if (IsBeingDeleted(*deployment)) return Status::Ok();
  MF_ASSIGN_OR_RETURN(std::vector<Json> sets, Owned(store, resources::kReplicaSets, ns, *deployment));
  MF_ASSIGN_OR_RETURN(DeploymentPlan plan, PlanDeployment(*deployment, sets, Clock::now()));
  if (plan.create_replica_set) {
    auto created = store->Create(resources::kReplicaSets, ns, *plan.create_replica_set);
    if (created.status().code() == StatusCode::kAlreadyExists) {
      // A ReplicaSet of another template holds the hashed name: bump collisionCount, as
      // Kubernetes does, so the next pass hashes to a new name.
      Json status = plan.status;
      status["collisionCount"] = IntAt(*deployment, {"status", "collisionCount"}, 0) + 1;
      return UpdateStatusIfChanged(store, resources::kDeployments, *deployment, status);
    }
    MF_RETURN_IF_ERROR(created.status());
  }
  for (const auto& [rs_name, replicas] : plan.scale) {
    auto scaled = store->GuaranteedUpdate(
        {resources::kReplicaSets, ns, rs_name}, Subresource::kMain,
        [&, replicas = replicas](const Json& current) -> StatusOr<Json> {
          Json updated = current;
          updated["spec"]["replicas"] = replicas;
          return updated;
        });
    MF_RETURN_IF_ERROR(IgnoreNotFound(scaled.status()));
  }
  for (const std::string& rs_name : plan.delete_replica_sets) {
    MF_RETURN_IF_ERROR(IgnoreNotFound(store->Delete({resources::kReplicaSets, ns, rs_name}).status()));
  }
  return UpdateStatusIfChanged(store, resources::kDeployments, *deployment, plan.status);
}

Status ReconcileServiceEndpoints(Store* store, const std::string& ns, const std::string& name) {
  auto service = store->Get({resources::kServices, ns, name});
  if (!service.ok()) {
    if (service.status().code() != StatusCode::kNotFound) return service.status();
    // The Service is gone: its Endpoints go too (slices are owned and garbage collected).
    return IgnoreNotFound(store->Delete({resources::kEndpoints, ns, name}).status());
  }
  if (IsBeingDeleted(*service)) return Status::Ok();
  MF_ASSIGN_OR_RETURN(ObjectList pods, store->List(resources::kPods, ns));
  MF_ASSIGN_OR_RETURN(ServiceEndpoints desired, BuildServiceEndpoints(*service, pods.items));
  if (desired.endpoints.is_null()) return Status::Ok();  // no selector: managed by hand
  MF_RETURN_IF_ERROR(CreateOrUpdate(store, resources::kEndpoints, desired.endpoints).status());
  if (!store->FindType(resources::kEndpointSlices)) return Status::Ok();
  std::set<std::string> keep;
  for (const Json& slice : desired.slices) {
    keep.insert(NameOf(slice));
    MF_RETURN_IF_ERROR(CreateOrUpdate(store, resources::kEndpointSlices, slice).status());
  }
  ListOptions ours;
  ours.label_selector = std::string(kServiceNameLabel) + "=" + name + "," + std::string(kManagedByLabel) +
                        "=" + std::string(kManagedByValue);
  MF_ASSIGN_OR_RETURN(ObjectList existing, store->List(resources::kEndpointSlices, ns, ours));
  for (const Json& slice : existing.items) {
    if (!keep.count(NameOf(slice))) {
      MF_RETURN_IF_ERROR(IgnoreNotFound(store->Delete({resources::kEndpointSlices, ns, NameOf(slice)}).status()));
    }
  }
  return Status::Ok();
}

BuiltinControllers::BuiltinControllers(Store* store) : store_(store) {}

Status BuiltinControllers::Start() {
  auto self = [](const WatchEvent& e) { return std::vector<std::string>{KeyOf(e.object)}; };
  auto served = [this](std::initializer_list<GroupVersionResource> gvrs) {
    for (const auto& gvr : gvrs) {
      if (!store_->FindType(gvr)) return false;
    }
    return true;
  };
  if (served({resources::kDeployments, resources::kReplicaSets})) {
    auto loop = std::make_unique<ControllerLoop>(
        "deployment", store_, resources::kDeployments,
        [this](const std::string& ns, const std::string& n) { return ReconcileDeployment(store_, ns, n); });
    loop->Watch(resources::kDeployments, self);
    loop->Watch(resources::kReplicaSets,
                [](const WatchEvent& e) { return ControllerKeyOf(e.object, "Deployment"); });
    loops_.push_back(std::move(loop));
  }
  if (served({resources::kReplicaSets, resources::kPods})) {
    auto loop = std::make_unique<ControllerLoop>(
        "replicaset", store_, resources::kReplicaSets,
        [this](const std::string& ns, const std::string& n) { return ReconcileReplicaSet(store_, ns, n); },
        // Short resync: availability after minReadySeconds is time-driven, not event-driven.
        std::chrono::milliseconds(1000));
    loop->Watch(resources::kReplicaSets, self);
    loop->Watch(resources::kPods, [](const WatchEvent& e) { return ControllerKeyOf(e.object, "ReplicaSet"); });
    loops_.push_back(std::move(loop));
  }
  if (served({resources::kServices, resources::kEndpoints, resources::kPods})) {
    Store* store = store_;
    auto loop = std::make_unique<ControllerLoop>(
        "endpoints", store_, resources::kServices,
        [store](const std::string& ns, const std::string& n) { return ReconcileServiceEndpoints(store, ns, n); });
    loop->Watch(resources::kServices, self);
    // A pod change may affect any Service of its namespace.
    loop->Watch(resources::kPods, [store](const WatchEvent& e) {
      std::vector<std::string> keys;
      if (auto services = store->List(resources::kServices, NamespaceOf(e.object)); services.ok()) {
        for (const Json& s : services->items) {
          if (MapSelectorMatches(ObjectAt(s, {"spec", "selector"}), LabelsOf(e.object))) keys.push_back(KeyOf(s));
        }
      }
      return keys;
    });
    loops_.push_back(std::move(loop));
  }
  for (auto& loop : loops_) MF_RETURN_IF_ERROR(loop->Start());
  return Status::Ok();
}

void BuiltinControllers::Stop() {
  for (auto& loop : loops_) loop->Stop();
}

}  // namespace mf::local
