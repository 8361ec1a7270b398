// A ModelDeployment's spec as typed values, parsed once per reconcile from the object the API
// server stored. The CRD's schema and CEL rules reject most bad specs at admission; this parser
// checks again (an old CRD, a hand-edited etcd, a client that skipped validation) and adds what
// the schema cannot say: names that must fit a Service, a storageUri scheme we can fetch.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace mf::op {

using Json = nlohmann::json;

struct VersionSpec {
  std::string name;
  std::string storage_uri;
  std::string sha256;               // optional digest of a single-file model
  std::optional<int32_t> replicas;  // per-version override of spec.replicas
};

struct RouteSpec {
  std::string header;
  std::string value;
  std::string version;
};

struct BatchingSpec {
  int64_t max_batch_size = 32;
  int64_t batch_timeout_micros = 1000;
  int64_t num_batch_threads = 2;
  int64_t max_enqueued_batches = 100;
};

struct AutoscalingSpec {
  std::string metric = "qps";  // qps | concurrency
  double target_per_replica = 1;
  int32_t min_replicas = 1;
  int32_t max_replicas = 10;
  int64_t scale_down_stabilization_seconds = 300;
  double tolerance = 0.1;  // no change while load / (current * target) is within 1 +- this
  std::string prometheus_url;
  std::string prometheus_query;
};

struct RolloutStep {
  int percent = 0;
  int64_t pause_seconds = 0;
};

struct AnalysisSpec {
  int64_t interval_seconds = 30;
  int64_t min_requests = 100;
  std::optional<double> max_error_rate;
  std::optional<double> max_latency_p99_ms;
  std::optional<double> max_disagreement;  // of mirrored answers, before real traffic moves
};

struct RolloutSpec {
  std::vector<RolloutStep> steps;
  AnalysisSpec analysis;
};

struct ModelDeploymentSpec {
  // From metadata.
  std::string name;
  std::string ns;
  std::string uid;
  int64_t generation = 0;

  std::string model_name;  // spec.modelName, default metadata.name
  int32_t replicas = 1;
  std::vector<VersionSpec> versions;
  // Percent per version name, every version present (0 when unnamed), summing to 100.
  std::map<std::string, int> traffic;
  std::vector<RouteSpec> routes;
  std::string sticky_header;
  std::string sticky_cookie;
  std::string mirror_version;
  int mirror_percent = 0;

  std::string server_image;  // "" = the operator's default
  Json server_resources = Json::object();
  std::optional<BatchingSpec> batching;
  Json pod_template = Json::object();  // a PodTemplateSpec: {metadata, spec}

  std::optional<AutoscalingSpec> autoscaling;
  std::optional<RolloutSpec> rollout;

  int32_t router_replicas = 2;
  std::string router_service_type = "ClusterIP";

  const VersionSpec* FindVersion(const std::string& name) const;
  int32_t ReplicasOf(const VersionSpec& version) const { return version.replicas.value_or(replicas); }
  // Whether the serving pods ask for GPUs (nvidia.com/gpu in limits or requests).
  bool RequestsGpu() const;
};

// INVALID_ARGUMENT naming the field and what is wrong, for the Degraded condition.
StatusOr<ModelDeploymentSpec> ParseModelDeployment(const Json& object);

// The numbered directory a version is served from (TF Serving's <base>/<model>/<number>/): the
// trailing digits of its name ("v2" -> 2, "0003" -> 3), else 1. Each serving pod holds one version.
int64_t VersionNumber(const std::string& version_name);

}  // namespace mf::op
