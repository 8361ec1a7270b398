#include "trainingjob/desired.h"

#include <set>

namespace mf::op::training {
namespace {

Json OwnerReferences(const TrainingJobSpec& spec) {
  return Json::array({{{"apiVersion", "modelfleet.io/v1alpha1"},
                       {"kind", "TrainingJob"},
                       {"name", spec.name},
                       {"uid", spec.uid},
                       {"controller", true},
                       {"blockOwnerDeletion", true}}});
}

Json Labels(const TrainingJobSpec& spec, Task task) {
  Json labels = {{"app.kubernetes.io/managed-by", kTrainingManagedBy},
                 {kJobNameLabel, spec.name},
                 {kReplicaTypeLabel, ReplicaTypeKey(task.type)},
                 {kReplicaIndexLabel, std::to_string(task.index)}};
  const Task master = MasterTask(spec);
  if (master.type == task.type && master.index == task.index) labels[kJobRoleLabel] = "master";
  return labels;
}

const char* PortName(Framework framework) {
  return framework == Framework::kPyTorch ? "pytorchjob-port" : "tfjob-port";
}

std::string PvcClaim(const std::string& uri) {
  if (!uri.starts_with("pvc://")) return "";
  const std::string rest = uri.substr(6);
  return rest.substr(0, rest.find('/'));
}

}  // namespace

Json DesiredPod(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options) {
  const ReplicaSpec& replica = *spec.Find(task.type);
  const Json& tmpl = replica.template_;
  Json pod_spec = At(tmpl, "spec");
  Json meta = At(tmpl, "metadata");
  Json labels = At(meta, "labels");
  if (!labels.is_object()) labels = Json::object();
  labels.update(Labels(spec, task));
  Json metadata = {{"name", TaskName(spec, task)},
                   {"namespace", spec.ns},
                   {"labels", labels},
                   {"ownerReferences", OwnerReferences(spec)}};
  if (meta.contains("annotations") && meta["annotations"].is_object()) metadata["annotations"] = meta["annotations"];

  pod_spec["restartPolicy"] = replica.restart_policy == RestartPolicy::kAlways      ? "Always"
                              : replica.restart_policy == RestartPolicy::kOnFailure ? "OnFailure"
                                                                                    : "Never";
  const EnvList env = ClusterEnv(spec, task, options);
  std::set<std::string> names;
  for (const auto& [k, v] : env) names.insert(k);
  const std::string claim = PvcClaim(spec.output.model_uri);
  const int32_t port = TaskPort(spec, task, options);
  const std::vector<size_t> targets = EnvContainers(spec.framework, pod_spec);
  for (size_t i : targets) {
    Json& c = pod_spec["containers"][i];
    Json container_env = Json::array();
    if (c.contains("env") && c["env"].is_array()) {
      for (const auto& e : c["env"]) {
        if (!e.is_object() || !names.count(StringAt(e, "name"))) container_env.push_back(e);
      }
    }
    for (const auto& [k, v] : env) container_env.push_back({{"name", k}, {"value", v}});
    c["env"] = container_env;
    if (!claim.empty()) {
      if (!c.contains("volumeMounts") || !c["volumeMounts"].is_array()) c["volumeMounts"] = Json::array();
      c["volumeMounts"].push_back({{"name", "modelfleet-output"}, {"mountPath", PvcMountPath(claim)}});
    }
  }
  // Kubeflow's defaulting: the default container declares the training port by its name.
  if (!targets.empty()) {
    Json& c = pod_spec["containers"][targets.front()];
    bool declared = false;
    if (c.contains("ports") && c["ports"].is_array()) {
      for (auto& p : c["ports"]) {
        if (p.is_object() && StringAt(p, "name") == PortName(spec.framework)) {
          p["containerPort"] = port;
          declared = true;
        }
      }
    } else {
      c["ports"] = Json::array();
    }
    if (!declared) c["ports"].push_back({{"name", PortName(spec.framework)}, {"containerPort", port}});
  }
  if (!claim.empty()) {
    if (!pod_spec.contains("volumes") || !pod_spec["volumes"].is_array()) pod_spec["volumes"] = Json::array();
    pod_spec["volumes"].push_back({{"name", "modelfleet-output"}, {"persistentVolumeClaim", {{"claimName", claim}}}});
  }
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata}, {"spec", pod_spec}};
}

Json DesiredService(const TrainingJobSpec& spec, Task task, const ClusterEnvOptions& options) {
  Json labels = Labels(spec, task);
  Json selector = {{kJobNameLabel, spec.name},
                   {kReplicaTypeLabel, ReplicaTypeKey(task.type)},
                   {kReplicaIndexLabel, std::to_string(task.index)}};
  const int32_t port = TaskPort(spec, task, options);
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata",
           {{"name", TaskName(spec, task)},
            {"namespace", spec.ns},
            {"labels", labels},
            {"ownerReferences", OwnerReferences(spec)}}},
          {"spec",
           {{"clusterIP", "None"},
            {"selector", selector},
            {"publishNotReadyAddresses", true},
            {"ports", Json::array({{{"name", PortName(spec.framework)}, {"port", port}, {"targetPort", port}}})}}}};
}

std::optional<Task> TaskOf(const Json& object) {
  const Json& meta = At(object, "metadata");
  const Json& labels = meta.is_object() ? At(meta, "labels") : Json::object();
  if (!labels.is_object()) return std::nullopt;
  const std::string type = StringAt(labels, kReplicaTypeLabel);
  const std::string index = StringAt(labels, kReplicaIndexLabel);
  if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  for (ReplicaType t : kAllReplicaTypes) {
    if (ReplicaTypeKey(t) == type) return Task{t, std::stoi(index)};
  }
  return std::nullopt;
}

bool UsesHostNetwork(const TrainingJobSpec& spec) {
  for (const auto& [type, r] : spec.replicas) {
    const Json& pod_spec = At(r.template_, "spec");
    if (At(pod_spec, "hostNetwork") == true) return true;
  }
  return false;
}

}  // namespace mf::op::training
