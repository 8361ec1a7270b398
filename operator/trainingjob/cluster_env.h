// The environment each training pod reads to find its cluster, exactly as Kubeflow's v1
// operators write it (../shared/design/COMPAT.md, "Training env"):
//   - TensorFlow: TF_CONFIG, compact JSON with the fields in the order cluster, task,
//     environment and the cluster's keys sorted, e.g. for worker 1 of "mnist" in "ml":
//     {"cluster":{"chief":["mnist-chief-0.ml.svc:2222"],"worker":["mnist-worker-0.ml.svc:2222",
//     "mnist-worker-1.ml.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}
//     The evaluator is inside the cluster. Not set at all for a job of one pod.
//   - PyTorch: MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK and the PET_* names torchrun reads
//     (PET_MASTER_ADDR, PET_MASTER_PORT, PET_NNODES, PET_NODE_RANK), PYTHONUNBUFFERED=1.
//   - Both: MODEL_DIR = AIP_MODEL_DIR, AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR when the
//     job has spec.output.modelUri.
// Pure: the same spec and options give the same bytes, which tools/modelfleet-tfconfig prints.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "trainingjob/spec.h"

namespace mf::op::training {

struct Task {
  ReplicaType type = ReplicaType::kWorker;
  int32_t index = 0;
};

struct ClusterEnvOptions {
  // Appended after ".svc" in addresses (Kubeflow's CUSTOM_CLUSTER_DOMAIN), e.g. "cluster.local".
  std::string cluster_domain;
  // Pods share one network namespace (modelfleet-local's node, or hostNetwork pods): a port can
  // be bound once per machine, so each task gets the replica's port plus its position in the
  // cluster (chief, evaluator, master, ps, worker order) instead of all sharing one.
  bool distinct_ports = false;
  // The model version this run writes (status.modelVersion): MODEL_DIR = <modelUri>/<version>.
  int64_t model_version = 1;
};

using EnvList = std::vector<std::pair<std::string, std::string>>;

// "<job>-<type>-<index>": the pod's name, its Service's name and its DNS label.
std::string TaskName(const TrainingJobSpec& spec, Task task);
// The port `task` listens on (see ClusterEnvOptions::distinct_ports).
int32_t TaskPort(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options);
// "<job>-<type>-<index>.<ns>.svc[.<domain>]:<port>"
std::string TaskAddress(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options);

// Every task of the job, in cluster order (type, then index).
std::vector<Task> AllTasks(const TrainingJobSpec& spec);

// The task whose success is the job's (Kubeflow's master role): Chief or Master 0, else Worker 0.
Task MasterTask(const TrainingJobSpec& spec);

// TF_CONFIG for `task`; "" when the job is not distributed (one pod in all).
std::string TfConfig(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options);

// Where the trained model goes, as the pods see it ("" without spec.output.modelUri): file:// and
// pvc:// URIs become paths (a pvc:// claim is mounted at PvcMountPath), others pass unchanged.
std::string ModelDir(const TrainingJobSpec& spec, const ClusterEnvOptions& options);
// "/mnt/pvc/<claim>": where a pvc:// output's claim is mounted in training pods.
std::string PvcMountPath(const std::string& claim);

// The variables the operator sets in `task`'s containers, in a stable order.
EnvList ClusterEnv(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options);

// The indices of the containers in `pod_spec` that get ClusterEnv(): TensorFlow's only the one
// named "tensorflow" (else the first), PyTorch's every container.
std::vector<size_t> EnvContainers(Framework framework, const Json& pod_spec);

}  // namespace mf::op::training
