// The objects a TrainingJob's cluster is made of, as pure functions of its spec: one pod per task
// and one headless Service per pod, named alike ("<job>-<type>-<index>"), so the address in
// TF_CONFIG, "<job>-<type>-<index>.<ns>.svc:<port>", is the pod's (as Kubeflow's v1 operators do).
// Both carry an ownerReference to the job (controller: true), so deleting the job deletes them by
// garbage collection, and the labels below.
#pragma once

#include <optional>

#include "trainingjob/cluster_env.h"

namespace mf::op::training {

inline constexpr const char* kJobNameLabel = "modelfleet.io/job-name";
inline constexpr const char* kReplicaTypeLabel = "modelfleet.io/replica-type";    // "worker", "chief", ...
inline constexpr const char* kReplicaIndexLabel = "modelfleet.io/replica-index";  // "0", "1", ...
inline constexpr const char* kJobRoleLabel = "modelfleet.io/job-role";            // "master" on MasterTask()'s pod
inline constexpr const char* kTrainingManagedBy = "modelfleet-operator";          // app.kubernetes.io/managed-by

// The pod of `task`: the replica's template with the cluster env in its containers (replacing
// variables of the same names), restartPolicy Always/OnFailure as the replica asks (Never for
// Never and ExitCode: the operator decides those), the port declared, and a pvc:// output's
// claim mounted at PvcMountPath().
Json DesiredPod(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options);

// The headless Service that gives `task`'s pod its DNS name; it publishes the pod's address
// before the pod is ready, so peers resolve each other while they start.
Json DesiredService(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options);

// The task a pod or Service of the job stands for, from its labels (nullopt: not one of ours).
std::optional<Task> TaskOf(const Json& object);

// Whether the pods of this job share one network namespace: hostNetwork in any template.
bool UsesHostNetwork(const TrainingJobSpec& spec);

}  // namespace mf::op::training
