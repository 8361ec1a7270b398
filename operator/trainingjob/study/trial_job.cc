#include "trainingjob/study/trial_job.h"

namespace mf::op::study {
namespace {

// obj[key] when obj is an object and the value a string, else "" (templates are free-form JSON).
std::string Str(const Json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

Json* FirstContainer(Json& replica) {
  auto tmpl = replica.find("template");
  if (tmpl == replica.end() || !tmpl->is_object()) return nullptr;
  auto pod_spec = tmpl->find("spec");
  if (pod_spec == tmpl->end() || !pod_spec->is_object()) return nullptr;
  auto containers = pod_spec->find("containers");
  if (containers == pod_spec->end() || !containers->is_array() || containers->empty()) return nullptr;
  return &containers->front();
}

}  // namespace

std::string MetricReplicaType(const Json& job_spec) {
  auto replicas = job_spec.find("replicaSpecs");
  if (replicas == job_spec.end() || !replicas->is_object()) return "";
  for (const char* type : {"Chief", "Master", "Worker"}) {
    if (replicas->contains(type)) return type;
  }
  return "";
}

std::string MetricContainerName(const Json& job_spec) {
  const std::string type = MetricReplicaType(job_spec);
  if (type.empty()) return "";
  Json replica = job_spec["replicaSpecs"][type];
  const Json* container = FirstContainer(replica);
  return container ? Str(*container, "name") : "";
}

std::string MetricsFilePath(const Json& container) {
  if (auto env = container.find("env"); env != container.end() && env->is_array()) {
    for (const auto& e : *env) {
      if (Str(e, "name") == "MODELFLEET_METRICS_FILE" && !Str(e, "value").empty()) return Str(e, "value");
    }
  }
  const std::string path = Str(container, "terminationMessagePath");
  return path.empty() ? kDefaultMetricsFile : path;
}

Json BuildTrialJob(const Json& study_job, const StudySpec& study, const Trial& trial) {
  const Json& meta = study_job.at("metadata");
  const std::string name = Str(meta, "name");
  Json spec = study_job.at("spec");
  spec.erase("hyperparameters");

  if (auto output = spec.find("output"); output != spec.end() && output->is_object()) {
    output->erase("deployTo");
    if (auto uri = output->find("modelUri"); uri != output->end() && uri->is_string() && !uri->empty()) {
      std::string base = uri->get<std::string>();
      while (!base.empty() && base.back() == '/') base.pop_back();
      *uri = base + "/" + trial.name;
    }
  }
  Json& run_policy = spec["runPolicy"];
  if (!run_policy.is_object()) run_policy = Json::object();
  run_policy.erase("ttlSecondsAfterFinished");
  if (Str(run_policy, "cleanPodPolicy") == "All") run_policy["cleanPodPolicy"] = "Running";

  const auto args = TrialArgs(study.params, trial.parameters);
  const std::string metric_type = MetricReplicaType(spec);
  if (auto replicas = spec.find("replicaSpecs"); replicas != spec.end() && replicas->is_object()) {
    for (auto& [type, replica] : replicas->items()) {
      Json* container = FirstContainer(replica);
      if (!container) continue;
      Json& container_args = (*container)["args"];
      if (!container_args.is_array()) container_args = Json::array();
      for (const auto& a : args) container_args.push_back(a);
      if (type != metric_type) continue;
      const std::string path = MetricsFilePath(*container);
      (*container)["terminationMessagePath"] = path;
      Json& env = (*container)["env"];
      if (!env.is_array()) env = Json::array();
      bool set = false;
      for (auto& e : env) {
        if (Str(e, "name") != "MODELFLEET_METRICS_FILE") continue;
        e = {{"name", "MODELFLEET_METRICS_FILE"}, {"value", path}};  // a valueFrom would hide the path
        set = true;
      }
      if (!set) env.push_back({{"name", "MODELFLEET_METRICS_FILE"}, {"value", path}});
    }
  }

  Json labels = Json::object();
  if (auto l = meta.find("labels"); l != meta.end() && l->is_object()) labels = *l;
  labels[kStudyLabel] = name;
  return {
      {"apiVersion", "modelfleet.io/v1alpha1"},
      {"kind", "TrainingJob"},
      {"metadata",
       {{"name", trial.name},
        {"namespace", Str(meta, "namespace")},
        {"labels", labels},
        {"ownerReferences", Json::array({{{"apiVersion", "modelfleet.io/v1alpha1"},
                                          {"kind", "TrainingJob"},
                                          {"name", name},
                                          {"uid", Str(meta, "uid")},
                                          {"controller", true},
                                          {"blockOwnerDeletion", true}}})}}},
      {"spec", spec},
  };
}

std::optional<std::string> TerminationMessage(const Json& pod, const std::string& container) {
  auto status = pod.find("status");
  if (status == pod.end() || !status->is_object()) return std::nullopt;
  auto statuses = status->find("containerStatuses");
  if (statuses == status->end() || !statuses->is_array()) return std::nullopt;
  for (const auto& s : *statuses) {
    if (Str(s, "name") != container) continue;
    auto state = s.find("state");
    if (state == s.end() || !state->is_object()) return std::nullopt;
    auto terminated = state->find("terminated");
    if (terminated == state->end() || !terminated->is_object()) return std::nullopt;
    return Str(*terminated, "message");
  }
  return std::nullopt;
}

}  // namespace mf::op::study
