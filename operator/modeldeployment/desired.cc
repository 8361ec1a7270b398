#include "modeldeployment/desired.h"

#include <functional>
#include <set>

namespace mf::op {
namespace {

constexpr const char* kModelsMount = "/models";
constexpr const char* kPvcRoot = "/mnt/pvc";
constexpr const char* kServerConfigMount = "/etc/modelfleet/server";
constexpr const char* kBatchingFile = "batching_parameters.txt";

Json Labels(const std::map<std::string, std::string>& labels) {
  Json out = Json::object();
  for (const auto& [k, v] : labels) out[k] = v;
  return out;
}

Json Metadata(const ModelDeploymentSpec& md, const std::string& name, std::map<std::string, std::string> labels) {
  return {{"name", name},
          {"namespace", md.ns},
          {"labels", Labels(labels)},
          {"ownerReferences", Json::array({OwnerReference(md)})}};
}

std::map<std::string, std::string> With(std::map<std::string, std::string> labels,
                                        std::initializer_list<std::pair<const std::string, std::string>> more) {
  for (const auto& [k, v] : more) labels[k] = v;
  return labels;
}

// The claim of a pvc:// URI ("pvc://store/a/b" -> "store").
std::string ClaimOf(const std::string& uri) {
  const std::string rest = uri.substr(6);
  return rest.substr(0, rest.find('/'));
}

std::string BatchingText(const BatchingSpec& b) {
  return "max_batch_size { value: " + std::to_string(b.max_batch_size) + " }\n" +
         "batch_timeout_micros { value: " + std::to_string(b.batch_timeout_micros) + " }\n" +
         "num_batch_threads { value: " + std::to_string(b.num_batch_threads) + " }\n" +
         "max_enqueued_batches { value: " + std::to_string(b.max_enqueued_batches) + " }\n";
}

// FNV-1a, for a pod-template annotation that changes (and so rolls the pods) when the
// server's configuration file does: the kubelet does not reload mounted files into a
// running server.
std::string Fingerprint(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Json Port(const char* name, int port) { return {{"name", name}, {"containerPort", port}, {"protocol", "TCP"}}; }

Json PodIpEnv() { return {{"name", "POD_IP"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "status.podIP"}}}}}}; }

Json HttpProbe(const std::string& path, const char* port, int period, int failures) {
  return {{"httpGet", {{"path", path}, {"port", port}}},
          {"periodSeconds", period},
          {"timeoutSeconds", 1},
          {"failureThreshold", failures}};
}

// Folds the user's container of the same name into ours: their env, mounts and settings are
// added; ours win where both set a field.
void MergeContainer(const Json& theirs, Json* ours) {
  for (const auto& [key, value] : theirs.items()) {
    if (key == "name") continue;
    if ((key == "env" || key == "volumeMounts" || key == "envFrom") && value.is_array()) {
      Json& list = (*ours)[key];
      if (!list.is_array()) list = Json::array();
      for (const auto& item : value) list.push_back(item);
    } else if (!ours->contains(key)) {
      (*ours)[key] = value;
    }
  }
}

// OpenMP's idle threads spin 300,000 times (about a millisecond) between parallel regions before
// they sleep; on a node whose cores other pods want, a spinning thread holds the core its partner
// needs, and a 0.5 ms MLP took 56 ms. 10,000 spins keep a quiet node's speed and cut that to
// 2.6 ms (docs/benchmarks.md, "OpenMP spinning"). Set unless the user's server container chooses
// its own wait policy or spin count.
void AddOpenMpSpinDefault(Json* server) {
  Json& env = (*server)["env"];
  for (const auto& e : env) {
    const std::string name = e.is_object() ? e.value("name", "") : "";
    if (name == "OMP_WAIT_POLICY" || name == "GOMP_SPINCOUNT") return;
  }
  env.push_back({{"name", "GOMP_SPINCOUNT"}, {"value", "10000"}});
}

Json ServerContainer(const ModelDeploymentSpec& md, const OperatorSettings& settings, bool batching_on) {
  const std::string base = std::string(kModelsMount) + "/" + md.model_name;
  // Bound to the pod IP rather than 0.0.0.0: the same in a cluster, and it lets a node agent
  // without per-pod network namespaces (modelfleet-local) run many serving pods side by side.
  Json args = Json::array({"--port=" + std::to_string(kGrpcPort), "--rest_api_port=" + std::to_string(kRestPort),
                           "--grpc_address=$(POD_IP)", "--rest_api_address=$(POD_IP)", "--model_name=" + md.model_name,
                           "--model_base_path=" + base, "--file_system_poll_wait_seconds=1",
                           "--not_ready_grace_seconds=" + std::to_string(settings.not_ready_grace_seconds)});
  if (md.RequestsGpu()) args.push_back("--device=cuda");  // fail loudly rather than fall back to the CPU
  if (batching_on) {
    args.push_back("--enable_batching");
    args.push_back(std::string("--batching_parameters_file=") + kServerConfigMount + "/" + kBatchingFile);
  }
  Json mounts = Json::array({{{"name", "models"}, {"mountPath", kModelsMount}}});
  if (batching_on) mounts.push_back({{"name", "server-config"}, {"mountPath", kServerConfigMount}, {"readOnly", true}});
  Json c = {{"name", "server"},
            {"image", md.server_image.empty() ? settings.server_image : md.server_image},
            {"args", args},
            {"env", Json::array({PodIpEnv()})},
            {"ports", Json::array({Port("grpc", kGrpcPort), Port("http", kRestPort)})},
            // Ready only once the version is loaded: the router never sends to a loading pod.
            {"readinessProbe", HttpProbe("/v2/models/" + md.model_name + "/ready", "http", 1, 2)},
            {"livenessProbe", HttpProbe("/v2/health/live", "http", 10, 3)},
            {"volumeMounts", mounts}};
  if (!md.server_resources.empty()) c["resources"] = md.server_resources;
  return c;
}

Json SyncContainer(const ModelDeploymentSpec& md, const VersionSpec& v, const OperatorSettings& settings) {
  const std::string dest =
      std::string(kModelsMount) + "/" + md.model_name + "/" + std::to_string(VersionNumber(v.name));
  Json args = Json::array({"--source=" + v.storage_uri, "--dest=" + dest});
  if (!v.sha256.empty()) args.push_back("--sha256=" + v.sha256);
  Json mounts = Json::array({{{"name", "models"}, {"mountPath", kModelsMount}}});
  if (v.storage_uri.starts_with("pvc://")) {
    args.push_back(std::string("--pvc-root=") + kPvcRoot);
    mounts.push_back({{"name", "model-store"},
                      {"mountPath", std::string(kPvcRoot) + "/" + ClaimOf(v.storage_uri)},
                      {"readOnly", true}});
  }
  return {{"name", "sync"},
          {"image", settings.sync_image},
          {"args", args},
          // The operator reads why a sync failed from here (Degraded's message).
          {"terminationMessagePolicy", "FallbackToLogsOnError"},
          {"resources", {{"requests", {{"cpu", "10m"}, {"memory", "32Mi"}}}}},
          {"volumeMounts", mounts}};
}

DesiredObject VersionDeployment(const ModelDeploymentSpec& md, const VersionSpec& v, const OperatorSettings& settings,
                                const std::string& server_config_hash, int32_t replicas) {
  const std::string name = VersionObjectName(md, v.name);
  const auto selector = std::map<std::string, std::string>{
      {kModelDeploymentLabel, md.name}, {kVersionLabel, v.name}, {kComponentLabel, "server"}};
  auto labels = CommonLabels(md);
  labels["app.kubernetes.io/name"] = "modelfleet-server";
  labels.insert(selector.begin(), selector.end());

  Json pod_meta = Json::object();
  Json pod_spec = Json::object();
  if (md.pod_template.contains("metadata")) pod_meta = md.pod_template["metadata"];
  if (md.pod_template.contains("spec")) pod_spec = md.pod_template["spec"];
  Json pod_labels = pod_meta.value("labels", Json::object());
  if (!pod_labels.is_object()) pod_labels = Json::object();
  for (const auto& [k, val] : labels) pod_labels[k] = val;
  Json annotations = pod_meta.value("annotations", Json::object());
  if (!annotations.is_object()) annotations = Json::object();
  annotations["prometheus.io/scrape"] = "true";
  annotations["prometheus.io/port"] = std::to_string(kRestPort);
  annotations["prometheus.io/path"] = "/metrics";  // served whatever the monitoring config says
  if (!server_config_hash.empty()) annotations["modelfleet.io/server-config"] = server_config_hash;

  Json server = ServerContainer(md, settings, !server_config_hash.empty());
  Json sync = SyncContainer(md, v, settings);
  Json containers = Json::array();
  if (auto it = pod_spec.find("containers"); it != pod_spec.end() && it->is_array()) {
    for (const auto& c : *it) {
      const std::string cname = c.is_object() ? c.value("name", "") : "";
      if (cname == "server") {
        MergeContainer(c, &server);
      } else if (cname == "sync") {
        MergeContainer(c, &sync);
      } else if (c.is_object()) {
        containers.push_back(c);
      }
    }
  }
  AddOpenMpSpinDefault(&server);
  containers.insert(containers.begin(), {server, sync});
  pod_spec["containers"] = containers;

  Json volumes = Json::array({{{"name", "models"}, {"emptyDir", Json::object()}}});
  if (!server_config_hash.empty()) {
    volumes.push_back({{"name", "server-config"}, {"configMap", {{"name", ServerConfigName(md)}}}});
  }
  if (v.storage_uri.starts_with("pvc://")) {
    volumes.push_back({{"name", "model-store"},
                       {"persistentVolumeClaim", {{"claimName", ClaimOf(v.storage_uri)}, {"readOnly", true}}}});
  }
  if (auto it = pod_spec.find("volumes"); it != pod_spec.end() && it->is_array()) {
    for (const auto& vol : *it) volumes.push_back(vol);
  }
  pod_spec["volumes"] = volumes;
  if (!pod_spec.contains("terminationGracePeriodSeconds")) {
    pod_spec["terminationGracePeriodSeconds"] = settings.termination_grace_seconds;
  }

  Json deployment = {
      {"apiVersion", "apps/v1"},
      {"kind", "Deployment"},
      {"metadata", Metadata(md, name, labels)},
      {"spec",
       {{"replicas", replicas},
        {"selector", {{"matchLabels", Labels(selector)}}},
        // Never fewer ready pods than asked for during a rollout: new pods load their model
        // before old ones go.
        {"strategy", {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", 0}, {"maxSurge", 1}}}}},
        {"template", {{"metadata", {{"labels", pod_labels}, {"annotations", annotations}}}, {"spec", pod_spec}}}}}};
  return {"deployments", name, std::move(deployment)};
}

Json ServicePorts() {
  return Json::array({{{"name", "http"}, {"port", kRestPort}, {"targetPort", "http"}, {"protocol", "TCP"}},
                      {{"name", "grpc"},
                       {"port", kGrpcPort},
                       {"targetPort", "grpc"},
                       {"protocol", "TCP"},
                       {"appProtocol", "kubernetes.io/h2c"}}});
}

DesiredObject VersionService(const ModelDeploymentSpec& md, const VersionSpec& v) {
  const std::string name = VersionObjectName(md, v.name);
  auto labels = With(CommonLabels(md), {{kVersionLabel, v.name}, {kComponentLabel, "server"}});
  Json service = {
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", Metadata(md, name, labels)},
      {"spec",
       {{"type", "ClusterIP"},
        {"selector", Labels({{kModelDeploymentLabel, md.name}, {kVersionLabel, v.name}, {kComponentLabel, "server"}})},
        {"ports", ServicePorts()}}}};
  return {"services", name, std::move(service)};
}

Json RouterConfig(const ModelDeploymentSpec& md, const std::map<std::string, int>& weights) {
  Json versions = Json::array();
  for (const auto& v : md.versions) {
    auto w = weights.find(v.name);
    versions.push_back(
        {{"name", v.name}, {"service", VersionObjectName(md, v.name)}, {"weight", w == weights.end() ? 0 : w->second}});
  }
  Json config = {{"model", md.model_name}, {"versions", versions}};
  if (!md.routes.empty()) {
    Json routes = Json::array();
    for (const auto& r : md.routes)
      routes.push_back({{"header", r.header}, {"value", r.value}, {"version", r.version}});
    config["routes"] = routes;
  }
  if (!md.sticky_header.empty()) config["stickyBy"] = {{"header", md.sticky_header}};
  if (!md.sticky_cookie.empty()) config["stickyBy"] = {{"cookie", md.sticky_cookie}};
  if (!md.mirror_version.empty()) config["mirror"] = {{"version", md.mirror_version}, {"percent", md.mirror_percent}};
  return config;
}

std::vector<DesiredObject> RouterObjects(const ModelDeploymentSpec& md, const Json& router_config,
                                         const OperatorSettings& settings) {
  const std::string name = RouterName(md);
  const auto selector =
      std::map<std::string, std::string>{{kModelDeploymentLabel, md.name}, {kComponentLabel, "router"}};
  auto labels = CommonLabels(md);
  labels["app.kubernetes.io/name"] = "modelfleet-router";
  labels.insert(selector.begin(), selector.end());
  std::vector<DesiredObject> out;

  out.push_back({"configmaps",
                 name,
                 {{"apiVersion", "v1"},
                  {"kind", "ConfigMap"},
                  {"metadata", Metadata(md, name, labels)},
                  {"data", {{"router.yaml", router_config.dump(2) + "\n"}}}}});
  out.push_back({"serviceaccounts",
                 name,
                 {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", Metadata(md, name, labels)}}});
  if (!settings.router_cluster_role.empty()) {
    out.push_back({"rolebindings",
                   name,
                   {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                    {"kind", "RoleBinding"},
                    {"metadata", Metadata(md, name, labels)},
                    {"roleRef",
                     {{"apiGroup", "rbac.authorization.k8s.io"},
                      {"kind", "ClusterRole"},
                      {"name", settings.router_cluster_role}}},
                    {"subjects", Json::array({{{"kind", "ServiceAccount"}, {"name", name}, {"namespace", md.ns}}})}}});
  }
  Json args = Json::array({"--configmap=" + md.ns + "/" + name, "--address=$(POD_IP)",
                           "--rest-port=" + std::to_string(kRestPort), "--grpc-port=" + std::to_string(kGrpcPort),
                           "--admin-port=" + std::to_string(kRouterAdminPort),
                           "--not-ready-grace-seconds=" + std::to_string(settings.not_ready_grace_seconds)});
  Json env = Json::array({PodIpEnv()});
  if (!settings.report_url.empty()) {
    args.push_back("--report-url=" + settings.report_url);
    args.push_back("--report-name=" + md.ns + "/" + md.name);
    env.push_back({{"name", "POD_NAME"}, {"valueFrom", {{"fieldRef", {{"fieldPath", "metadata.name"}}}}}});
  }
  Json container = {
      {"name", "router"},
      {"image", settings.router_image},
      {"env", env},
      {"args", args},
      {"ports", Json::array({Port("http", kRestPort), Port("grpc", kGrpcPort), Port("admin", kRouterAdminPort)})},
      {"readinessProbe", HttpProbe("/readyz", "admin", 1, 2)},
      {"livenessProbe", HttpProbe("/healthz", "admin", 10, 3)},
      {"resources", {{"requests", {{"cpu", "100m"}, {"memory", "64Mi"}}}}},
      {"securityContext",
       {{"runAsNonRoot", true},
        {"allowPrivilegeEscalation", false},
        {"readOnlyRootFilesystem", true},
        {"capabilities", {{"drop", Json::array({"ALL"})}}}}}};
  Json annotations = {{"prometheus.io/scrape", "true"},
                      {"prometheus.io/port", std::to_string(kRouterAdminPort)},
                      {"prometheus.io/path", "/metrics"}};
  out.push_back(
      {"deployments",
       name,
       {{"apiVersion", "apps/v1"},
        {"kind", "Deployment"},
        {"metadata", Metadata(md, name, labels)},
        {"spec",
         {{"replicas", md.router_replicas},
          {"selector", {{"matchLabels", Labels(selector)}}},
          {"strategy", {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", 0}, {"maxSurge", 1}}}}},
          {"template",
           {{"metadata", {{"labels", Labels(labels)}, {"annotations", annotations}}},
            {"spec",
             {{"serviceAccountName", name},
              {"terminationGracePeriodSeconds", settings.termination_grace_seconds},
              {"containers", Json::array({container})}}}}}}}}});
  const std::string service = RouterServiceName(md);
  out.push_back(
      {"services",
       service,
       {{"apiVersion", "v1"},
        {"kind", "Service"},
        {"metadata", Metadata(md, service, labels)},
        {"spec", {{"type", md.router_service_type}, {"selector", Labels(selector)}, {"ports", ServicePorts()}}}}});
  return out;
}

}  // namespace

std::string VersionObjectName(const ModelDeploymentSpec& md, const std::string& version) {
  return md.name + "-" + version;
}
std::string RouterName(const ModelDeploymentSpec& md) { return md.name + "-router"; }
std::string RouterServiceName(const ModelDeploymentSpec& md) { return md.name; }
std::string ServerConfigName(const ModelDeploymentSpec& md) { return md.name + "-server"; }

std::map<std::string, std::string> CommonLabels(const ModelDeploymentSpec& md) {
  return {{kManagedByLabel, kFieldManager}, {"app.kubernetes.io/instance", md.name}, {kModelDeploymentLabel, md.name}};
}

std::string PodSelector(const std::string& md_name) { return std::string(kModelDeploymentLabel) + "=" + md_name; }

Json OwnerReference(const ModelDeploymentSpec& md) {
  return {{"apiVersion", "modelfleet.io/v1alpha1"},
          {"kind", "ModelDeployment"},
          {"name", md.name},
          {"uid", md.uid},
          {"controller", true},
          {"blockOwnerDeletion", true}};
}

DesiredState BuildDesiredState(const ModelDeploymentSpec& md, const std::map<std::string, int>& weights,
                               const OperatorSettings& settings, const std::map<std::string, int32_t>& replicas) {
  DesiredState state;
  std::string server_config_hash;
  if (md.batching) {
    const std::string text = BatchingText(*md.batching);
    server_config_hash = Fingerprint(text);
    auto labels = With(CommonLabels(md), {{kComponentLabel, "server"}});
    state.objects.push_back({"configmaps",
                             ServerConfigName(md),
                             {{"apiVersion", "v1"},
                              {"kind", "ConfigMap"},
                              {"metadata", Metadata(md, ServerConfigName(md), labels)},
                              {"data", {{kBatchingFile, text}}}}});
  }
  for (const auto& v : md.versions) {
    auto chosen = replicas.find(v.name);
    state.objects.push_back(VersionDeployment(md, v, settings, server_config_hash,
                                              chosen == replicas.end() ? md.ReplicasOf(v) : chosen->second));
    state.objects.push_back(VersionService(md, v));
  }
  state.router_config = RouterConfig(md, weights);
  for (auto& o : RouterObjects(md, state.router_config, settings)) state.objects.push_back(std::move(o));
  return state;
}

namespace {

// Keeps only the labels and annotations the operator reads or sets.
Json OursOnly(const Json& map, bool labels) {
  Json out = Json::object();
  if (!map.is_object()) return out;
  for (const auto& [k, v] : map.items()) {
    const bool ours = labels
                          ? (k == kManagedByLabel || k == kModelDeploymentLabel || k == kVersionLabel ||
                             k == kComponentLabel || k == "app.kubernetes.io/instance" || k == "app.kubernetes.io/name")
                          : k.starts_with("modelfleet.io/");
    if (ours) out[k] = v;
  }
  return out;
}

Json Relevant(const Json& object) {
  if (!object.is_object()) return object;
  Json copy = object;
  if (auto meta = copy.find("metadata"); meta != copy.end() && meta->is_object()) {
    meta->erase("resourceVersion");
    meta->erase("managedFields");
    (*meta)["labels"] = OursOnly(meta->value("labels", Json::object()), true);
    (*meta)["annotations"] = OursOnly(meta->value("annotations", Json::object()), false);
  }
  return copy;
}

}  // namespace

bool OwnedObjectChanged(const Json& old_object, const Json& new_object) {
  return Relevant(old_object) != Relevant(new_object);
}

}  // namespace mf::op
