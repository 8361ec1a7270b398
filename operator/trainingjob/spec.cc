#include "trainingjob/spec.h"

#include <algorithm>
#include <cctype>

#include "parsing/cr_fields.h"

namespace mf::op::training {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The port a replica's default container names (tfjob-port / pytorchjob-port), if any.
std::optional<int32_t> NamedPort(const Json& pod_spec, Framework framework) {
  const char* container_name = framework == Framework::kPyTorch ? "pytorch" : "tensorflow";
  const char* port_name = framework == Framework::kPyTorch ? "pytorchjob-port" : "tfjob-port";
  const Json& containers = At(pod_spec, "containers");
  if (!containers.is_array() || containers.empty()) return std::nullopt;
  const Json* chosen = &containers[0];
  for (const auto& c : containers) {
    if (c.is_object() && StringAt(c, "name") == container_name) chosen = &c;
  }
  const Json& ports = chosen->is_object() ? chosen->value("ports", Json::array()) : Json::array();
  if (!ports.is_array()) return std::nullopt;
  for (const auto& p : ports) {
    const Json& port = At(p, "containerPort");
    if (StringAt(p, "name") == port_name && port.is_number_integer() && port.get<int64_t>() >= 1 &&
        port.get<int64_t>() <= 65535) {
      return port.get<int32_t>();
    }
  }
  return std::nullopt;
}

Status ParseReplica(const Json& value, const std::string& path, Framework framework, int32_t default_port,
                    ReplicaSpec* out) {
  if (!value.is_object()) return InvalidArgument(path + " must be an object");
  std::optional<int64_t> replicas;
  if (Status s = OptionalInt(value, "replicas", path, 0, 1000, &replicas); !s.ok()) return s;
  out->replicas = static_cast<int32_t>(replicas.value_or(1));
  std::string policy = "OnFailure";
  if (Status s = OptionalEnum(value, "restartPolicy", path, {"OnFailure", "Always", "Never", "ExitCode"}, &policy);
      !s.ok()) {
    return s;
  }
  out->restart_policy = policy == "Always"     ? RestartPolicy::kAlways
                        : policy == "Never"    ? RestartPolicy::kNever
                        : policy == "ExitCode" ? RestartPolicy::kExitCode
                                               : RestartPolicy::kOnFailure;
  const Json& tmpl = At(value, "template");
  if (!tmpl.is_object()) return InvalidArgument(path + ".template must be a pod template ({metadata, spec})");
  const Json& pod_spec = At(tmpl, "spec");
  if (!pod_spec.is_object() || !pod_spec.contains("containers") || !pod_spec["containers"].is_array() ||
      pod_spec["containers"].empty()) {
    return InvalidArgument(path + ".template.spec.containers must list at least one container");
  }
  for (const auto& c : pod_spec["containers"]) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) {
      return InvalidArgument(path + ".template.spec.containers: every container needs a name");
    }
  }
  out->template_ = tmpl;
  out->port = NamedPort(pod_spec, framework).value_or(default_port);
  return Status();
}

}  // namespace

const Json& At(const Json& object, std::string_view key) {
  static const Json kNull;
  if (!object.is_object()) return kNull;
  auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

std::string StringAt(const Json& object, std::string_view key) {
  const Json& v = At(object, key);
  return v.is_string() ? v.get<std::string>() : "";
}

const char* ReplicaTypeName(ReplicaType type) {
  switch (type) {
    case ReplicaType::kChief:
      return "Chief";
    case ReplicaType::kEvaluator:
      return "Evaluator";
    case ReplicaType::kMaster:
      return "Master";
    case ReplicaType::kPS:
      return "PS";
    case ReplicaType::kWorker:
      return "Worker";
  }
  return "Worker";
}

std::string ReplicaTypeKey(ReplicaType type) { return Lower(ReplicaTypeName(type)); }

const char* RestartPolicyName(RestartPolicy policy) {
  switch (policy) {
    case RestartPolicy::kAlways:
      return "Always";
    case RestartPolicy::kOnFailure:
      return "OnFailure";
    case RestartPolicy::kNever:
      return "Never";
    case RestartPolicy::kExitCode:
      return "ExitCode";
  }
  return "Never";
}

bool IsRetryableExitCode(int code) { return code >= 128; }

const ReplicaSpec* TrainingJobSpec::Find(ReplicaType type) const {
  auto it = replicas.find(type);
  return it == replicas.end() ? nullptr : &it->second;
}

int32_t TrainingJobSpec::TotalReplicas() const {
  int32_t total = 0;
  for (const auto& [type, r] : replicas) total += r.replicas;
  return total;
}

StatusOr<TrainingJobSpec> ParseTrainingJob(const Json& object) {
  if (!object.is_object()) return InvalidArgument("a TrainingJob must be a JSON object");
  TrainingJobSpec job;
  const Json& meta = At(object, "metadata");
  job.name = meta.is_object() ? StringAt(meta, "name") : "";
  job.ns = meta.is_object() ? StringAt(meta, "namespace") : "";
  job.uid = meta.is_object() ? StringAt(meta, "uid") : "";
  if (meta.is_object() && meta.contains("generation") && meta["generation"].is_number_integer()) {
    job.generation = meta["generation"].get<int64_t>();
  }
  const Json& spec = At(object, "spec");
  if (!spec.is_object()) return InvalidArgument("spec must be an object");

  std::string framework = "tensorflow";
  if (Status s = OptionalEnum(spec, "framework", "spec", {"tensorflow", "pytorch"}, &framework); !s.ok()) return s;
  job.framework = framework == "pytorch" ? Framework::kPyTorch : Framework::kTensorFlow;
  std::optional<int64_t> port;
  if (Status s = OptionalInt(spec, "port", "spec", 1, 65535, &port); !s.ok()) return s;
  job.port = static_cast<int32_t>(port.value_or(2222));

  const Json& specs = At(spec, "replicaSpecs");
  if (!specs.is_object() || specs.empty()) {
    return InvalidArgument("spec.replicaSpecs must name at least one replica type (Chief, Worker, PS, Evaluator)");
  }
  for (const auto& [key, value] : specs.items()) {
    // As Kubeflow's defaulting does: the type in any case ("worker", "WORKER") is the type.
    std::optional<ReplicaType> type;
    for (ReplicaType t : kAllReplicaTypes) {
      if (Lower(key) == ReplicaTypeKey(t)) type = t;
    }
    const std::string path = "spec.replicaSpecs." + key;
    if (!type)
      return InvalidArgument(path +
                             ": unknown replica type; use Chief, Worker, PS or Evaluator (PyTorch: Master, Worker)");
    if (job.replicas.count(*type)) return InvalidArgument(path + ": " + ReplicaTypeName(*type) + " is named twice");
    if (job.framework == Framework::kTensorFlow && *type == ReplicaType::kMaster) {
      return InvalidArgument(path +
                             ": TensorFlow 2's distribution strategies (MultiWorkerMirroredStrategy, "
                             "ParameterServerStrategy) refuse a 'master' job in TF_CONFIG; name the coordinating "
                             "replica Chief instead");
    }
    if (job.framework == Framework::kPyTorch && *type != ReplicaType::kMaster && *type != ReplicaType::kWorker) {
      return InvalidArgument(path + ": a PyTorch job has Master and Worker replicas only" +
                             (*type == ReplicaType::kChief ? std::string("; name the rank-0 replica Master") : ""));
    }
    ReplicaSpec r;
    if (Status s = ParseReplica(value, path, job.framework, job.port, &r); !s.ok()) return s;
    const bool single = *type == ReplicaType::kChief || *type == ReplicaType::kMaster ||
                        (*type == ReplicaType::kEvaluator && job.framework == Framework::kTensorFlow);
    if (single && r.replicas > 1) {
      return InvalidArgument(path + ".replicas is " + std::to_string(r.replicas) + "; a job has at most one " +
                             ReplicaTypeName(*type));
    }
    job.replicas[*type] = std::move(r);
  }
  const bool has_coordinator = (job.Find(ReplicaType::kChief) && job.Find(ReplicaType::kChief)->replicas > 0) ||
                               (job.Find(ReplicaType::kMaster) && job.Find(ReplicaType::kMaster)->replicas > 0) ||
                               (job.Find(ReplicaType::kWorker) && job.Find(ReplicaType::kWorker)->replicas > 0);
  if (!has_coordinator) {
    return InvalidArgument(std::string("spec.replicaSpecs needs a ") +
                           (job.framework == Framework::kPyTorch ? "Master" : "Chief") + " or at least one Worker");
  }
  // Pod and Service names are "<job>-<type>-<index>": DNS-1035 labels of at most 63 characters.
  for (const auto& [type, r] : job.replicas) {
    const std::string longest =
        job.name + "-" + ReplicaTypeKey(type) + "-" + std::to_string(std::max<int32_t>(r.replicas - 1, 0));
    if (!IsDns1035Label(longest)) {
      return InvalidArgument("metadata.name: pods and Services are named like '" + longest +
                             "', which must be a DNS label (lower-case letters, digits and '-', starting with a "
                             "letter, at most 63 characters); choose a shorter name");
    }
  }

  static const Json kEmpty = Json::object();
  const Json& run = spec.contains("runPolicy") && !spec["runPolicy"].is_null() ? spec["runPolicy"] : kEmpty;
  if (!run.is_object()) return InvalidArgument("spec.runPolicy must be an object");
  std::optional<int64_t> v;
  if (Status s = OptionalInt(run, "backoffLimit", "spec.runPolicy", 0, 1'000'000, &v); !s.ok()) return s;
  job.run_policy.backoff_limit = static_cast<int32_t>(v.value_or(3));
  if (Status s = OptionalInt(run, "activeDeadlineSeconds", "spec.runPolicy", 1, INT64_MAX / 2,
                             &job.run_policy.active_deadline_seconds);
      !s.ok()) {
    return s;
  }
  if (Status s = OptionalInt(run, "ttlSecondsAfterFinished", "spec.runPolicy", 0, INT32_MAX,
                             &job.run_policy.ttl_seconds_after_finished);
      !s.ok()) {
    return s;
  }
  std::string clean_pod_policy = "Running";
  if (Status s = OptionalEnum(run, "cleanPodPolicy", "spec.runPolicy", {"Running", "All", "None"}, &clean_pod_policy);
      !s.ok()) {
    return s;
  }
  job.run_policy.clean_pod_policy = clean_pod_policy == "All"    ? CleanPodPolicy::kAll
                                    : clean_pod_policy == "None" ? CleanPodPolicy::kNone
                                                                 : CleanPodPolicy::kRunning;
  std::string restart_scope = "Pod";
  if (Status s = OptionalEnum(run, "restartScope", "spec.runPolicy", {"Pod", "Job"}, &restart_scope); !s.ok()) return s;
  job.run_policy.restart_scope = restart_scope == "Job" ? RestartScope::kJob : RestartScope::kPod;
  if (run.contains("suspend") && !run["suspend"].is_null()) {
    if (!run["suspend"].is_boolean()) return InvalidArgument("spec.runPolicy.suspend must be true or false");
    job.run_policy.suspend = run["suspend"].get<bool>();
  }

  std::string success_policy = "Default";
  if (Status s = OptionalEnum(spec, "successPolicy", "spec", {"Default", "AllWorkers"}, &success_policy); !s.ok()) {
    return s;
  }
  job.success_policy = success_policy == "AllWorkers" ? SuccessPolicy::kAllWorkers : SuccessPolicy::kDefault;
  if (job.success_policy == SuccessPolicy::kAllWorkers && !job.Find(ReplicaType::kWorker)) {
    return InvalidArgument("spec.successPolicy AllWorkers needs Worker replicas");
  }

  const Json& output = spec.contains("output") && !spec["output"].is_null() ? spec["output"] : kEmpty;
  if (!output.is_object()) return InvalidArgument("spec.output must be an object");
  if (output.contains("modelUri") && !output["modelUri"].is_null()) {
    if (!output["modelUri"].is_string()) return InvalidArgument("spec.output.modelUri must be a string");
    job.output.model_uri = output["modelUri"].get<std::string>();
    while (job.output.model_uri.size() > 1 && job.output.model_uri.back() == '/') job.output.model_uri.pop_back();
    const std::string& uri = job.output.model_uri;
    if (uri.starts_with("file://") && !uri.starts_with("file:///")) {
      return InvalidArgument(
          "spec.output.modelUri must be file:///absolute/path, pvc://CLAIM/path or a URI the "
          "trainer writes itself (gs://, s3://)");
    }
    if (uri.starts_with("pvc://") && (uri.size() <= 6 || uri[6] == '/')) {
      return InvalidArgument("spec.output.modelUri pvc:// needs a claim name: pvc://CLAIM/path");
    }
  }
  if (output.contains("deployTo") && !output["deployTo"].is_null()) {
    const Json& d = output["deployTo"];
    if (!d.is_object() || !d.contains("modelDeployment") || !d["modelDeployment"].is_string() ||
        d["modelDeployment"].get<std::string>().empty()) {
      return InvalidArgument("spec.output.deployTo.modelDeployment must name a ModelDeployment");
    }
    if (job.output.model_uri.empty()) {
      return InvalidArgument(
          "spec.output.deployTo needs spec.output.modelUri: the model handed to the "
          "ModelDeployment is <modelUri>/<version>");
    }
    if (!job.output.model_uri.starts_with("file:///") && !job.output.model_uri.starts_with("pvc://") &&
        !job.output.model_uri.starts_with("http://") && !job.output.model_uri.starts_with("https://")) {
      return InvalidArgument(
          "spec.output.deployTo: a ModelDeployment serves file:///, pvc:// or http(s):// "
          "models; spec.output.modelUri is " +
          job.output.model_uri);
    }
    DeployTo deploy;
    deploy.model_deployment = d["modelDeployment"].get<std::string>();
    std::optional<int64_t> percent;
    if (Status s = OptionalInt(d, "canaryPercent", "spec.output.deployTo", 0, 100, &percent); !s.ok()) return s;
    deploy.canary_percent = static_cast<int>(percent.value_or(10));
    job.output.deploy_to = deploy;
  }
  if (Status s = OptionalInt(output, "version", "spec.output", 1, INT64_MAX / 2, &job.output.version); !s.ok()) {
    return s;
  }

  if (spec.contains("hyperparameters") && !spec["hyperparameters"].is_null()) {
    if (!spec["hyperparameters"].is_object()) return InvalidArgument("spec.hyperparameters must be an object");
    job.hyperparameters = spec["hyperparameters"];
  }
  return job;
}

}  // namespace mf::op::training
