#include "tools/local/controllers/replicaset.h"

#include <algorithm>
#include <tuple>

namespace mf::local {
namespace {

int PhaseRank(const Json& pod) {
  std::string phase = StringAt(pod, {"status", "phase"});
  if (phase == "Pending" || phase.empty()) return 0;
  if (phase == "Unknown") return 1;
  return 2;
}

int64_t RestartCount(const Json& pod) {
  int64_t restarts = 0;
  const Json& status = ObjectAt(pod, {"status"});
  if (auto it = status.find("containerStatuses"); it != status.end() && it->is_array()) {
    for (const Json& cs : *it) restarts = std::max(restarts, IntAt(cs, {"restartCount"}, 0));
  }
  return restarts;
}

}  // namespace

void SortForDeletion(std::vector<const Json*>& pods) {
  auto key = [](const Json* p) {
    bool scheduled = !StringAt(*p, {"spec", "nodeName"}).empty();
    // Newer first: reverse the creation timestamp by negating in the comparison below.
    return std::make_tuple(scheduled, PhaseRank(*p), IsPodReady(*p), -RestartCount(*p));
  };
  std::stable_sort(pods.begin(), pods.end(), [&](const Json* a, const Json* b) {
    auto ka = key(a), kb = key(b);
    if (ka != kb) return ka < kb;
    return StringAt(*a, {"metadata", "creationTimestamp"}) >
           StringAt(*b, {"metadata", "creationTimestamp"});
  });
}

Json PodFromTemplate(const Json& replica_set) {
  const Json& tmpl = ObjectAt(replica_set, {"spec", "template"});
  Json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}};
  Json meta = Json::object();
  const Json& tmeta = ObjectAt(tmpl, {"metadata"});
  for (const char* field : {"labels", "annotations"}) {
    if (tmeta.contains(field) && tmeta[field].is_object()) meta[field] = tmeta[field];
  }
  meta["namespace"] = NamespaceOf(replica_set);
  meta["ownerReferences"] = Json::array({ControllerRef(replica_set, "apps/v1", "ReplicaSet")});
  pod["metadata"] = std::move(meta);
  pod["spec"] = ObjectAt(tmpl, {"spec"});
  return pod;
}

namespace {

StatusOr<ReplicaSetPlan> PlanReplicaSetUnchecked(const Json& replica_set, const std::vector<Json>& pods,
                                        Clock::time_point now) {
  const Json& spec = ObjectAt(replica_set, {"spec"});
  int64_t desired = IntAt(spec, {"replicas"}, 1);
  if (desired < 0) return InvalidArgument("spec.replicas must be >= 0");
  int64_t min_ready = IntAt(spec, {"minReadySeconds"}, 0);
  Json selector = spec.contains("selector") ? spec["selector"] : Json();
  if (!selector.is_object() || selector.empty()) {
    return InvalidArgument("spec.selector is required and must not be empty");
  }
  MF_ASSIGN_OR_RETURN(bool template_matches,
                      LabelSelectorMatches(selector, LabelsOf(ObjectAt(spec, {"template"}))));
  if (!template_matches) {
    return InvalidArgument("spec.template.metadata.labels do not match spec.selector");
  }

  ReplicaSetPlan plan;
  std::vector<const Json*> active;
  int64_t labeled = 0, ready = 0, available = 0;
  for (const Json& pod : pods) {
    if (IsBeingDeleted(pod)) continue;
    std::string phase = StringAt(pod, {"status", "phase"});
    if (phase == "Succeeded" || phase == "Failed") {
      // Finished pods never run again under a ReplicaSet: replace them (and clean them up).
      plan.pods_to_delete.push_back(NameOf(pod));
      continue;
    }
    active.push_back(&pod);
    MF_ASSIGN_OR_RETURN(bool m, LabelSelectorMatches(selector, LabelsOf(pod)));
    if (m) ++labeled;
    if (IsPodReady(pod)) ++ready;
    if (IsPodAvailable(pod, min_ready, now)) ++available;
  }
  auto count = static_cast<int64_t>(active.size());
  if (count < desired) {
    plan.pods_to_create = desired - count;
    plan.pod_template = PodFromTemplate(replica_set);
  } else if (count > desired) {
    SortForDeletion(active);
    for (int64_t i = 0; i < count - desired; ++i) plan.pods_to_delete.push_back(NameOf(*active[i]));
  }

  plan.status = {{"replicas", count},
                 {"fullyLabeledReplicas", labeled},
                 {"readyReplicas", ready},
                 {"availableReplicas", available},
                 {"observedGeneration", IntAt(replica_set, {"metadata", "generation"}, 0)}};
  return plan;
}

}  // namespace

StatusOr<ReplicaSetPlan> PlanReplicaSet(const Json& replica_set, const std::vector<Json>& pods,
                                        Clock::time_point now) {
  return CatchMalformed<ReplicaSetPlan>("ReplicaSet " + NamespaceOf(replica_set) + "/" + NameOf(replica_set),
                                [&] { return PlanReplicaSetUnchecked(replica_set, pods, now); });
}

}  // namespace mf::local
