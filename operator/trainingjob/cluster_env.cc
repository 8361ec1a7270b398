#include "trainingjob/cluster_env.h"

namespace mf::op::training {

std::string TaskName(const TrainingJobSpec& spec, Task task) {
  return spec.name + "-" + ReplicaTypeKey(task.type) + "-" + std::to_string(task.index);
}

std::vector<Task> AllTasks(const TrainingJobSpec& spec) {
  std::vector<Task> tasks;
  for (ReplicaType type : kAllReplicaTypes) {
    const ReplicaSpec* r = spec.Find(type);
    for (int32_t i = 0; r && i < r->replicas; ++i) tasks.push_back({type, i});
  }
  return tasks;
}

int32_t TaskPort(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options) {
  const ReplicaSpec* r = spec.Find(task.type);
  const int32_t base = r ? r->port : spec.port;
  if (!options.distinct_ports) return base;
  int32_t position = 0;
  for (const Task& t : AllTasks(spec)) {
    if (t.type == task.type && t.index == task.index) break;
    ++position;
  }
  return base + position;
}

std::string TaskAddress(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options) {
  std::string host = TaskName(spec, task) + "." + spec.ns + ".svc";
  if (!options.cluster_domain.empty()) host += "." + options.cluster_domain;
  return host + ":" + std::to_string(TaskPort(spec, task, options));
}

Task MasterTask(const TrainingJobSpec& spec) {
  for (ReplicaType type : {ReplicaType::kChief, ReplicaType::kMaster}) {
    if (const ReplicaSpec* r = spec.Find(type); r && r->replicas > 0) return {type, 0};
  }
  return {ReplicaType::kWorker, 0};
}

std::string TfConfig(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options) {
  const std::vector<Task> tasks = AllTasks(spec);
  if (tasks.size() <= 1) return "";  // not distributed: Kubeflow sets no TF_CONFIG
  // nlohmann::json keeps object keys sorted, as Go's encoding/json writes a map.
  nlohmann::json cluster = nlohmann::json::object();
  for (const Task& t : tasks) cluster[ReplicaTypeKey(t.type)].push_back(TaskAddress(spec, t, options));
  // Kubeflow's TFConfig struct: cluster, task {type, index}, environment, in that order.
  return "{\"cluster\":" + cluster.dump() + ",\"task\":{\"type\":\"" + ReplicaTypeKey(task.type) +
         "\",\"index\":" + std::to_string(task.index) + "},\"environment\":\"cloud\"}";
}

std::string PvcMountPath(const std::string& claim) { return "/mnt/pvc/" + claim; }

std::string ModelDir(const TrainingJobSpec& spec, const ClusterEnvOptions& options) {
  const std::string& uri = spec.output.model_uri;
  if (uri.empty()) return "";
  std::string base = uri;
  if (uri.starts_with("file://")) {
    base = uri.substr(7);
  } else if (uri.starts_with("pvc://")) {
    const std::string rest = uri.substr(6);
    const size_t slash = rest.find('/');
    base = PvcMountPath(rest.substr(0, slash)) + (slash == std::string::npos ? "" : rest.substr(slash));
  }
  return base + "/" + std::to_string(options.model_version);
}

EnvList ClusterEnv(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options) {
  EnvList env;
  if (spec.framework == Framework::kTensorFlow) {
    if (std::string tf_config = TfConfig(spec, task, options); !tf_config.empty()) {
      env.emplace_back("TF_CONFIG", std::move(tf_config));
    }
  } else {
    // Kubeflow's PyTorchJob: rank 0 is the Master, workers follow it. A job without a Master
    // (which Kubeflow would give no MASTER_* at all) has worker 0 as its rank 0.
    const Task master = MasterTask(spec);
    const bool has_master = master.type == ReplicaType::kMaster;
    const int32_t rank = task.type == ReplicaType::kMaster ? task.index : task.index + (has_master ? 1 : 0);
    const std::string world = std::to_string(spec.TotalReplicas());
    const std::string port = std::to_string(TaskPort(spec, master, options));
    env.emplace_back("PYTHONUNBUFFERED", "1");
    env.emplace_back("MASTER_ADDR", TaskName(spec, master));
    env.emplace_back("PET_MASTER_ADDR", TaskName(spec, master));
    env.emplace_back("MASTER_PORT", port);
    env.emplace_back("PET_MASTER_PORT", port);
    env.emplace_back("WORLD_SIZE", world);
    env.emplace_back("RANK", std::to_string(rank));
    env.emplace_back("PET_NODE_RANK", std::to_string(rank));
    env.emplace_back("PET_NNODES", world);
  }
  if (std::string model_dir = ModelDir(spec, options); !model_dir.empty()) {
    // Vertex AI's names next to Kubeflow's usual MODEL_DIR; checkpoints and logs live beside the
    // numbered version directories (a server scanning <modelUri> for versions skips them).
    const std::string base = model_dir.substr(0, model_dir.rfind('/'));
    env.emplace_back("MODEL_DIR", model_dir);
    env.emplace_back("AIP_MODEL_DIR", model_dir);
    env.emplace_back("AIP_CHECKPOINT_DIR", base + "/checkpoints/" + spec.name);
    env.emplace_back("AIP_TENSORBOARD_LOG_DIR", base + "/logs/" + spec.name);
  }
  return env;
}

std::vector<size_t> EnvContainers(Framework framework, const Json& pod_spec) {
  const Json& containers = At(pod_spec, "containers");
  std::vector<size_t> out;
  if (!containers.is_array() || containers.empty()) return out;
  if (framework == Framework::kPyTorch) {
    for (size_t i = 0; i < containers.size(); ++i) out.push_back(i);
    return out;
  }
  for (size_t i = 0; i < containers.size(); ++i) {
    if (containers[i].is_object() && StringAt(containers[i], "name") == "tensorflow") return {i};
  }
  return {0};
}

}  // namespace mf::op::training
