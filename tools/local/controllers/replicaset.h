// The ReplicaSet controller's decision, as a pure function: given a ReplicaSet and the pods it
// controls, which pods to create, which to delete and what its status should say. The apply
// loop (controller_manager.cc) names and writes the pods; this file never touches the store.
#pragma once

#include <string>
#include <vector>

#include "tools/local/controllers/object_meta.h"

namespace mf::local {

struct ReplicaSetPlan {
  int64_t pods_to_create = 0;
  Json pod_template;                   // a Pod without a name, owned by the ReplicaSet
  std::vector<std::string> pods_to_delete;  // names, least valuable first
  Json status;                         // the full .status the ReplicaSet should have
};

// `pods` are the non-terminating pods whose controller is this ReplicaSet (the caller filters
// by ownerReference uid, as Kubernetes does after adoption). Terminating pods do not count
// toward replicas, so a deleted pod is replaced at once.
StatusOr<ReplicaSetPlan> PlanReplicaSet(const Json& replica_set, const std::vector<Json>& pods,
                                        Clock::time_point now);

// The Pod a ReplicaSet stamps out from its template (no name: the apply loop picks one).
Json PodFromTemplate(const Json& replica_set);

// Orders pods the way Kubernetes picks deletion victims: unscheduled before scheduled, pending
// before running, not ready before ready, more restarts before fewer, newer before older.
void SortForDeletion(std::vector<const Json*>& pods);

}  // namespace mf::local
