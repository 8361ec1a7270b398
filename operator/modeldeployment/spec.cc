#include "modeldeployment/spec.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "parsing/cr_fields.h"

namespace mf::op {
namespace {

bool IsModelName(const std::string& s) {
  if (s.empty() || s.size() > 253 || !std::isalnum(static_cast<unsigned char>(s.front()))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

bool IsHexDigest(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}

bool HasSupportedScheme(const std::string& uri) {
  for (std::string_view scheme : {"pvc://", "file:///", "http://", "https://"}) {
    if (uri.size() > scheme.size() && uri.compare(0, scheme.size(), scheme) == 0) return true;
  }
  return false;
}

Status ParseVersions(const Json& spec, ModelDeploymentSpec* md) {
  auto it = spec.find("versions");
  if (it == spec.end() || !it->is_array() || it->empty())
    return InvalidArgument("spec.versions must list at least one version");
  if (it->size() > 16)
    return InvalidArgument("spec.versions has " + std::to_string(it->size()) + " entries; at most 16 are allowed");
  std::set<std::string> seen;
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& v = (*it)[i];
    const std::string path = "spec.versions[" + std::to_string(i) + "]";
    if (!v.is_object()) return InvalidArgument(path + " must be an object");
    VersionSpec version;
    MF_RETURN_IF_ERROR(OptionalString(v, "name", path, &version.name));
    MF_RETURN_IF_ERROR(OptionalString(v, "storageUri", path, &version.storage_uri));
    MF_RETURN_IF_ERROR(OptionalString(v, "sha256", path, &version.sha256));
    if (!IsDns1123Label(version.name) || version.name.size() > 32) {
      return InvalidArgument(path + ".name '" + version.name + "' must be a DNS label of at most 32 characters");
    }
    if (!seen.insert(version.name).second) return InvalidArgument("spec.versions names '" + version.name + "' twice");
    if (!HasSupportedScheme(version.storage_uri)) {
      return InvalidArgument(path + ".storageUri '" + version.storage_uri +
                             "' must start with pvc://, file:/// , http:// or https://");
    }
    if (!version.sha256.empty() && !IsHexDigest(version.sha256)) {
      return InvalidArgument(path + ".sha256 must be 64 hexadecimal digits");
    }
    int64_t replicas = -1;
    MF_RETURN_IF_ERROR(OptionalInt(v, "replicas", path, 0, 10000, &replicas));
    if (replicas >= 0) version.replicas = static_cast<int32_t>(replicas);
    md->versions.push_back(std::move(version));
  }
  return Status();
}

Status ParseTraffic(const Json& spec, ModelDeploymentSpec* md) {
  for (const auto& v : md->versions) md->traffic[v.name] = 0;
  auto it = spec.find("traffic");
  if (it == spec.end() || it->is_null() || it->empty()) {
    // No split given: an even one, the remainder to the first versions listed.
    const int n = static_cast<int>(md->versions.size());
    for (int i = 0; i < n; ++i) md->traffic[md->versions[i].name] = 100 / n + (i < 100 % n ? 1 : 0);
    return Status();
  }
  if (!it->is_object()) return InvalidArgument("spec.traffic must map version names to percentages");
  int sum = 0;
  for (const auto& [name, value] : it->items()) {
    if (!md->FindVersion(name))
      return InvalidArgument("spec.traffic names '" + name + "', which is not in spec.versions");
    if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > 100) {
      return InvalidArgument("spec.traffic." + name + " must be an integer percentage from 0 to 100");
    }
    md->traffic[name] = value.get<int>();
    sum += value.get<int>();
  }
  if (sum != 100)
    return InvalidArgument("spec.traffic percentages sum to " + std::to_string(sum) + "; they must sum to 100");
  return Status();
}

Status ParseRouting(const Json& spec, ModelDeploymentSpec* md) {
  if (auto it = spec.find("routes"); it != spec.end() && !it->is_null()) {
    if (!it->is_array()) return InvalidArgument("spec.routes must be a list");
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& r = (*it)[i];
      const std::string path = "spec.routes[" + std::to_string(i) + "]";
      if (!r.is_object() || !r.contains("match") || !r["match"].is_object())
        return InvalidArgument(path + ".match must be an object");
      RouteSpec route;
      MF_RETURN_IF_ERROR(OptionalString(r["match"], "header", path + ".match", &route.header));
      MF_RETURN_IF_ERROR(OptionalString(r["match"], "value", path + ".match", &route.value));
      MF_RETURN_IF_ERROR(OptionalString(r, "version", path, &route.version));
      if (route.header.empty()) return InvalidArgument(path + ".match.header must not be empty");
      if (!md->FindVersion(route.version))
        return InvalidArgument(path + ".version '" + route.version + "' is not in spec.versions");
      md->routes.push_back(std::move(route));
    }
  }
  Json sticky = Json::object();
  MF_RETURN_IF_ERROR(OptionalObject(spec, "stickyBy", "spec", &sticky));
  MF_RETURN_IF_ERROR(OptionalString(sticky, "header", "spec.stickyBy", &md->sticky_header));
  MF_RETURN_IF_ERROR(OptionalString(sticky, "cookie", "spec.stickyBy", &md->sticky_cookie));
  if (!md->sticky_header.empty() && !md->sticky_cookie.empty()) {
    return InvalidArgument("spec.stickyBy names both a header and a cookie; give one");
  }
  Json mirror;
  MF_RETURN_IF_ERROR(OptionalObject(spec, "mirror", "spec", &mirror));
  if (mirror.is_object()) {
    MF_RETURN_IF_ERROR(OptionalString(mirror, "version", "spec.mirror", &md->mirror_version));
    if (!md->FindVersion(md->mirror_version)) {
      return InvalidArgument("spec.mirror.version '" + md->mirror_version + "' is not in spec.versions");
    }
    int64_t percent = 100;
    MF_RETURN_IF_ERROR(OptionalInt(mirror, "percent", "spec.mirror", 0, 100, &percent));
    md->mirror_percent = static_cast<int>(percent);
  }
  return Status();
}

Status ParseServerAndRouter(const Json& spec, ModelDeploymentSpec* md) {
  Json server = Json::object();
  MF_RETURN_IF_ERROR(OptionalObject(spec, "server", "spec", &server));
  MF_RETURN_IF_ERROR(OptionalString(server, "image", "spec.server", &md->server_image));
  MF_RETURN_IF_ERROR(OptionalObject(server, "resources", "spec.server", &md->server_resources));
  Json batching;
  MF_RETURN_IF_ERROR(OptionalObject(server, "batching", "spec.server", &batching));
  if (batching.is_object()) {
    BatchingSpec b;
    const std::string path = "spec.server.batching";
    MF_RETURN_IF_ERROR(OptionalInt(batching, "maxBatchSize", path, 1, 1 << 20, &b.max_batch_size));
    MF_RETURN_IF_ERROR(OptionalInt(batching, "batchTimeoutMicros", path, 0, 60'000'000, &b.batch_timeout_micros));
    MF_RETURN_IF_ERROR(OptionalInt(batching, "numBatchThreads", path, 1, 1024, &b.num_batch_threads));
    MF_RETURN_IF_ERROR(OptionalInt(batching, "maxEnqueuedBatches", path, 1, 1 << 20, &b.max_enqueued_batches));
    md->batching = b;
  }
  Json tmpl;
  MF_RETURN_IF_ERROR(OptionalObject(server, "podTemplate", "spec.server", &tmpl));
  if (tmpl.is_object()) {
    // A PodTemplateSpec ({metadata, spec}); a bare PodSpec is accepted as its spec.
    const bool is_template = std::all_of(tmpl.items().begin(), tmpl.items().end(),
                                         [](const auto& kv) { return kv.key() == "metadata" || kv.key() == "spec"; });
    md->pod_template = is_template ? tmpl : Json{{"spec", tmpl}};
    for (const char* part : {"metadata", "spec"}) {
      if (md->pod_template.contains(part) && !md->pod_template[part].is_object()) {
        return InvalidArgument(std::string("spec.server.podTemplate.") + part + " must be an object");
      }
    }
  }
  Json router = Json::object();
  MF_RETURN_IF_ERROR(OptionalObject(spec, "router", "spec", &router));
  int64_t router_replicas = md->router_replicas;
  MF_RETURN_IF_ERROR(OptionalInt(router, "replicas", "spec.router", 0, 1000, &router_replicas));
  md->router_replicas = static_cast<int32_t>(router_replicas);
  MF_RETURN_IF_ERROR(OptionalString(router, "serviceType", "spec.router", &md->router_service_type));
  if (md->router_service_type != "ClusterIP" && md->router_service_type != "NodePort" &&
      md->router_service_type != "LoadBalancer") {
    return InvalidArgument("spec.router.serviceType '" + md->router_service_type +
                           "' must be ClusterIP, NodePort or LoadBalancer");
  }
  return Status();
}

Status ParseAutoscalingAndRollout(const Json& spec, ModelDeploymentSpec* md) {
  Json as;
  MF_RETURN_IF_ERROR(OptionalObject(spec, "autoscaling", "spec", &as));
  if (as.is_object()) {
    AutoscalingSpec a;
    const std::string path = "spec.autoscaling";
    MF_RETURN_IF_ERROR(OptionalString(as, "metric", path, &a.metric));
    if (a.metric != "qps" && a.metric != "concurrency") {
      return InvalidArgument(path + ".metric '" + a.metric + "' must be qps or concurrency");
    }
    std::optional<double> target;
    MF_RETURN_IF_ERROR(OptionalNumber(as, "targetPerReplica", path, 1e-9, 1e12, &target));
    if (!target) return InvalidArgument(path + ".targetPerReplica must be a positive number");
    a.target_per_replica = *target;
    int64_t min = 1, max = 10;
    MF_RETURN_IF_ERROR(OptionalInt(as, "minReplicas", path, 0, 10000, &min));
    MF_RETURN_IF_ERROR(OptionalInt(as, "maxReplicas", path, 1, 10000, &max));
    if (min > max) return InvalidArgument(path + ".minReplicas must not exceed maxReplicas");
    a.min_replicas = static_cast<int32_t>(min);
    a.max_replicas = static_cast<int32_t>(max);
    MF_RETURN_IF_ERROR(
        OptionalInt(as, "scaleDownStabilizationSeconds", path, 0, 86400, &a.scale_down_stabilization_seconds));
    Json prometheus;
    MF_RETURN_IF_ERROR(OptionalObject(as, "prometheus", path, &prometheus));
    if (prometheus.is_object()) {
      MF_RETURN_IF_ERROR(OptionalString(prometheus, "url", path + ".prometheus", &a.prometheus_url));
      MF_RETURN_IF_ERROR(OptionalString(prometheus, "query", path + ".prometheus", &a.prometheus_query));
    }
    md->autoscaling = a;
  }
  Json ro;
  MF_RETURN_IF_ERROR(OptionalObject(spec, "rollout", "spec", &ro));
  if (ro.is_object()) {
    RolloutSpec r;
    auto steps = ro.find("steps");
    if (steps == ro.end() || !steps->is_array() || steps->empty())
      return InvalidArgument("spec.rollout.steps must list at least one step");
    int last = -1;
    for (size_t i = 0; i < steps->size(); ++i) {
      const std::string path = "spec.rollout.steps[" + std::to_string(i) + "]";
      if (!(*steps)[i].is_object()) return InvalidArgument(path + " must be an object");
      int64_t percent = -1, pause = 0;
      MF_RETURN_IF_ERROR(OptionalInt((*steps)[i], "percent", path, 0, 100, &percent));
      if (percent < 0) return InvalidArgument(path + ".percent is required");
      if (percent < last) return InvalidArgument(path + ".percent must not go down (steps walk traffic up)");
      last = static_cast<int>(percent);
      MF_RETURN_IF_ERROR(OptionalInt((*steps)[i], "pauseSeconds", path, 0, 7 * 86400, &pause));
      r.steps.push_back({static_cast<int>(percent), pause});
    }
    Json analysis;
    MF_RETURN_IF_ERROR(OptionalObject(ro, "analysis", "spec.rollout", &analysis));
    if (analysis.is_object()) {
      const std::string path = "spec.rollout.analysis";
      MF_RETURN_IF_ERROR(OptionalInt(analysis, "intervalSeconds", path, 1, 86400, &r.analysis.interval_seconds));
      MF_RETURN_IF_ERROR(OptionalInt(analysis, "minRequests", path, 0, int64_t{1} << 40, &r.analysis.min_requests));
      MF_RETURN_IF_ERROR(OptionalNumber(analysis, "maxErrorRate", path, 0, 1, &r.analysis.max_error_rate));
      MF_RETURN_IF_ERROR(OptionalNumber(analysis, "maxLatencyP99Ms", path, 0, 1e9, &r.analysis.max_latency_p99_ms));
      MF_RETURN_IF_ERROR(OptionalNumber(analysis, "maxDisagreement", path, 0, 1, &r.analysis.max_disagreement));
    }
    if (md->versions.size() < 2)
      return InvalidArgument("spec.rollout needs two versions: the stable one and the canary (the last)");
    md->rollout = r;
  }
  return Status();
}

}  // namespace

const VersionSpec* ModelDeploymentSpec::FindVersion(const std::string& version_name) const {
  for (const auto& v : versions) {
    if (v.name == version_name) return &v;
  }
  return nullptr;
}

bool ModelDeploymentSpec::RequestsGpu() const {
  for (const char* part : {"limits", "requests"}) {
    auto it = server_resources.find(part);
    if (it == server_resources.end() || !it->is_object()) continue;
    auto gpu = it->find("nvidia.com/gpu");
    if (gpu == it->end()) continue;
    if (gpu->is_number() && gpu->get<double>() > 0) return true;
    if (gpu->is_string() && !gpu->get<std::string>().empty() && gpu->get<std::string>() != "0") return true;
  }
  return false;
}

StatusOr<ModelDeploymentSpec> ParseModelDeployment(const Json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) {
    return InvalidArgument("the ModelDeployment has no metadata");
  }
  const Json& meta = object["metadata"];
  ModelDeploymentSpec md;
  MF_RETURN_IF_ERROR(OptionalString(meta, "name", "metadata", &md.name));
  MF_RETURN_IF_ERROR(OptionalString(meta, "namespace", "metadata", &md.ns));
  MF_RETURN_IF_ERROR(OptionalString(meta, "uid", "metadata", &md.uid));
  if (auto g = meta.find("generation"); g != meta.end() && g->is_number_integer()) md.generation = g->get<int64_t>();
  if (md.name.empty() || md.ns.empty() || md.uid.empty())
    return InvalidArgument("metadata needs name, namespace and uid");

  auto spec_it = object.find("spec");
  if (spec_it == object.end() || !spec_it->is_object()) return InvalidArgument("spec must be an object");
  const Json& spec = *spec_it;
  md.model_name = md.name;
  MF_RETURN_IF_ERROR(OptionalString(spec, "modelName", "spec", &md.model_name));
  if (!IsModelName(md.model_name)) {
    return InvalidArgument("spec.modelName '" + md.model_name + "' must be letters, digits, '_', '.' or '-'");
  }
  int64_t replicas = 1;
  MF_RETURN_IF_ERROR(OptionalInt(spec, "replicas", "spec", 0, 10000, &replicas));
  md.replicas = static_cast<int32_t>(replicas);
  MF_RETURN_IF_ERROR(ParseVersions(spec, &md));
  // Every object is named after the ModelDeployment; Services need DNS-1035 labels.
  for (const auto& v : md.versions) {
    const std::string service = md.name + "-" + v.name;
    if (!IsDns1035Label(service)) {
      return InvalidArgument("the Service name '" + service + "' for version " + v.name +
                             " must be a DNS-1035 label (a letter first, at most 63 characters): "
                             "use a shorter ModelDeployment or version name");
    }
  }
  if (!IsDns1035Label(md.name + "-router")) {
    return InvalidArgument("metadata.name '" + md.name +
                           "' must start with a letter and leave room for '-router' in 63 characters");
  }
  MF_RETURN_IF_ERROR(ParseTraffic(spec, &md));
  MF_RETURN_IF_ERROR(ParseRouting(spec, &md));
  MF_RETURN_IF_ERROR(ParseServerAndRouter(spec, &md));
  MF_RETURN_IF_ERROR(ParseAutoscalingAndRollout(spec, &md));
  return md;
}

int64_t VersionNumber(const std::string& version_name) {
  size_t start = version_name.size();
  while (start > 0 && std::isdigit(static_cast<unsigned char>(version_name[start - 1]))) --start;
  const std::string digits = version_name.substr(start);
  if (digits.empty() || digits.size() > 15) return 1;
  const int64_t n = std::stoll(digits);
  return n > 0 ? n : 1;
}

}  // namespace mf::op
