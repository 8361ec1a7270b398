// The Deployment controller's decision, as a pure function of a Deployment and the ReplicaSets
// it owns: which ReplicaSet to create (named <deployment>-<pod-template-hash>), how to scale each
// one for a RollingUpdate (maxSurge / maxUnavailable, the same arithmetic as Kubernetes'
// rolloutRolling) or Recreate, which old ReplicaSets fall out of revisionHistoryLimit, and the
// Deployment status (replica counts, observedGeneration, Available / Progressing conditions).
// One call takes one step; the apply loop calls it again as pods become ready.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tools/local/controllers/object_meta.h"

namespace mf::local {

inline constexpr std::string_view kPodTemplateHashLabel = "pod-template-hash";
inline constexpr std::string_view kRevisionAnnotation = "deployment.kubernetes.io/revision";

struct DeploymentPlan {
  std::optional<Json> create_replica_set;                      // full object, named
  std::vector<std::pair<std::string, int64_t>> scale;          // ReplicaSet name -> spec.replicas
  std::vector<std::string> delete_replica_sets;                // beyond revisionHistoryLimit
  Json status;                                                 // the Deployment's full .status
};

// `replica_sets` are those whose controller is this Deployment (terminating ones excluded).
StatusOr<DeploymentPlan> PlanDeployment(const Json& deployment,
                                        const std::vector<Json>& replica_sets,
                                        Clock::time_point now);

// FNV-1a of the template's canonical JSON (plus the collision count), spelled with Kubernetes'
// "safe" alphabet so it never forms words: stable across runs, short, a valid label value.
std::string PodTemplateHash(const Json& pod_template, int64_t collision_count);

}  // namespace mf::local
