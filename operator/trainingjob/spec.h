// A TrainingJob's spec as typed values, parsed once per reconcile. The CRD's schema and CEL rules
// reject most bad specs at admission; this parser checks again and adds what the schema cannot
// say: replica types the framework accepts (TF2's strategies refuse `master`), names that must fit
// a pod and a Service, an output URI the pods can write to.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace mf::op::training {

using Json = nlohmann::json;

enum class Framework { kTensorFlow, kPyTorch };

// In cluster order: TF_CONFIG's keys are the lower-cased names, sorted, which is this order.
enum class ReplicaType { kChief, kEvaluator, kMaster, kPS, kWorker };
inline constexpr ReplicaType kAllReplicaTypes[] = {ReplicaType::kChief, ReplicaType::kEvaluator, ReplicaType::kMaster,
                                                   ReplicaType::kPS, ReplicaType::kWorker};

// "Chief", "Worker", ... as the spec's keys (Kubeflow's camel case).
const char* ReplicaTypeName(ReplicaType type);
// "chief", "worker", ...: TF_CONFIG job names and pod-name parts.
std::string ReplicaTypeKey(ReplicaType type);

// Kubeflow's restart policies. ExitCode pods run with restartPolicy Never and the operator retries
// them only on retryable exit codes (128-255, e.g. a SIGKILL or an OOM kill).
enum class RestartPolicy { kAlways, kOnFailure, kNever, kExitCode };
const char* RestartPolicyName(RestartPolicy policy);
bool IsRetryableExitCode(int code);

// Pod: a failed pod is retried alone. Job: every pod is deleted and created again, so the
// cluster restarts together from the last checkpoint (collectives cannot take one new member).
enum class RestartScope { kPod, kJob };
enum class CleanPodPolicy { kAll, kRunning, kNone };
enum class SuccessPolicy { kDefault, kAllWorkers };

struct ReplicaSpec {
  int32_t replicas = 1;
  RestartPolicy restart_policy = RestartPolicy::kOnFailure;
  Json template_ = Json::object();  // a PodTemplateSpec: {metadata, spec}
  int32_t port = 2222;              // the spec's port, or the template's tfjob-port/pytorchjob-port
};

struct RunPolicy {
  int32_t backoff_limit = 3;
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int64_t> ttl_seconds_after_finished;
  CleanPodPolicy clean_pod_policy = CleanPodPolicy::kRunning;
  RestartScope restart_scope = RestartScope::kPod;
  bool suspend = false;
};

struct DeployTo {
  std::string model_deployment;
  int canary_percent = 10;
};

struct OutputSpec {
  std::string model_uri;  // file:///abs/path, pvc://claim/sub/path (written), or any other URI (passed on)
  std::optional<DeployTo> deploy_to;
  // The model version this job writes (MODEL_DIR = <modelUri>/<version>). Unset: with deployTo
  // the next number above the ModelDeployment's versions, else 1 (status.modelVersion keeps it).
  std::optional<int64_t> version;
};

struct TrainingJobSpec {
  // From metadata.
  std::string name;
  std::string ns;
  std::string uid;
  int64_t generation = 0;

  Framework framework = Framework::kTensorFlow;
  int32_t port = 2222;
  std::map<ReplicaType, ReplicaSpec> replicas;  // only the types the spec names
  RunPolicy run_policy;
  SuccessPolicy success_policy = SuccessPolicy::kDefault;
  OutputSpec output;
  Json hyperparameters;  // null unless spec.hyperparameters is set (a study: study/study_reconcile.h)

  const ReplicaSpec* Find(ReplicaType type) const;
  int32_t TotalReplicas() const;
  bool IsStudy() const { return hyperparameters.is_object(); }
};

// INVALID_ARGUMENT naming the field and what to do.
StatusOr<TrainingJobSpec> ParseTrainingJob(const Json& object);

// Reads of objects others write that never throw, whatever their shape: the member `key` of
// `object` (null when `object` is no object or lacks it), and that member as a string ("" unless
// it is one).
const Json& At(const Json& object, std::string_view key);
std::string StringAt(const Json& object, std::string_view key);

}  // namespace mf::op::training
