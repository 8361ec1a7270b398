#include "controller/model_deployment_controller.h"

#include <ctime>
#include <random>
#include <set>

#include "common/flags.h"
#include "common/logging.h"
#include "k8s/api_error.h"
#include "metrics_feed/prometheus_query.h"
#include "modeldeployment/cache_view.h"

namespace mf::op {
namespace {

using k8s::ObjectPtr;
using std::chrono::seconds;

constexpr const char* kModelDeploymentController = "modeldeployment";
constexpr const char* kRetiringSince = "modelfleet.io/retiring-since";
constexpr const char* kIndex = "modeldeployment";
// A server running this long without becoming ready is asked why (a version that failed to load).
constexpr int64_t kStuckSeconds = 15;
// Rates for autoscaling are read over this window: a step in load shows within about a second.
constexpr int64_t kQpsWindowMs = 2000;

std::string NowRfc3339() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int64_t NowSeconds() { return static_cast<int64_t>(std::time(nullptr)); }

std::string LabelOf(const Json& object, const char* label) {
  const Json& labels = k8s::MetadataOf(object).value("labels", Json::object());
  return labels.is_object() ? k8s::StringAt(labels, label) : "";
}

std::string AnnotationOf(const Json& object, const char* key) {
  const Json& annotations = k8s::MetadataOf(object).value("annotations", Json::object());
  return annotations.is_object() ? k8s::StringAt(annotations, key) : "";
}

// "ns/<modeldeployment label>": which ModelDeployment an owned object or pod belongs to.
std::vector<std::string> OwnerIndex(const Json& object) {
  const std::string md = LabelOf(object, kModelDeploymentLabel);
  if (md.empty()) return {};
  return {k8s::StringAt(k8s::MetadataOf(object), "namespace") + "/" + md};
}

std::string KindOf(const std::string& resource) {
  static const std::map<std::string, std::string> kinds = {
      {"deployments", "Deployment"},         {"services", "Service"},         {"configmaps", "ConfigMap"},
      {"serviceaccounts", "ServiceAccount"}, {"rolebindings", "RoleBinding"}, {"pods", "Pod"}};
  auto it = kinds.find(resource);
  return it == kinds.end() ? resource : it->second;
}

}  // namespace

bool IsControlledBy(const Json& object, const std::string& uid) {
  const Json& refs = k8s::MetadataOf(object).value("ownerReferences", Json::array());
  if (!refs.is_array()) return false;
  for (const auto& ref : refs) {
    if (ref.is_object() && ref.value("controller", false) && k8s::StringAt(ref, "uid") == uid) return true;
  }
  return false;
}

ModelDeploymentController::ModelDeploymentController(k8s::Client& client, k8s::EventRecorder& events,
                                                     OperatorMetrics& metrics, ControllerOptions options)
    : client_(client), events_(events), metrics_(metrics), options_(std::move(options)) {}

ModelDeploymentController::~ModelDeploymentController() { Stop(); }

void ModelDeploymentController::Enqueue(const ObjectPtr& object) {
  if (queue_ && object) queue_->Add(k8s::ObjectKey(*object));
}

void ModelDeploymentController::EnqueueOwner(const ObjectPtr& object) {
  if (!queue_ || !object) return;
  for (const auto& key : OwnerIndex(*object)) queue_->Add(key);
}

k8s::Informer* ModelDeploymentController::OwnedInformer(const std::string& resource) const {
  for (const auto& o : owned_) {
    if (o.resource == resource) return o.informer.get();
  }
  return nullptr;
}

Status ModelDeploymentController::Start(std::chrono::milliseconds sync_timeout) {
  queue_ = std::make_unique<k8s::WorkQueue>(k8s::ItemRateLimiter::Options{
      .base = std::chrono::milliseconds(50), .cap = seconds(60), .qps = 50, .burst = 200});

  k8s::InformerOptions md_options{.collection = {k8s::resources::ModelDeployments(), options_.watch_namespace, "", ""},
                                  .resync_period = options_.resync,
                                  .transform = CompactForCache};
  model_deployments_ = std::make_unique<k8s::Informer>(client_, md_options);
  model_deployments_->AddEventHandlers(
      {.on_add = [this](const ObjectPtr& o) { Enqueue(o); },
       .on_update =
           [this](const ObjectPtr& old_object, const ObjectPtr& new_object) {
             if (old_object == new_object) {
               // A resync: spread the keys over a tenth of the period instead of all at once.
               thread_local std::mt19937_64 rng{std::random_device{}()};
               const auto spread = std::chrono::duration_cast<std::chrono::milliseconds>(options_.resync) / 10;
               std::uniform_int_distribution<int64_t> jitter(0, std::max<int64_t>(1, spread.count()));
               queue_->AddAfter(k8s::ObjectKey(*new_object), std::chrono::milliseconds(jitter(rng)));
               return;
             }
             Enqueue(new_object);
           },
       .on_delete = [this](const ObjectPtr& o) { Enqueue(o); }});

  const std::string owned_selector = std::string(kManagedByLabel) + "=" + kFieldManager + "," + kModelDeploymentLabel;
  const std::vector<std::pair<std::string, k8s::GroupVersionResource>> kinds = {
      {"deployments", k8s::resources::Deployments()},   {"services", k8s::resources::Services()},
      {"configmaps", k8s::resources::ConfigMaps()},     {"serviceaccounts", k8s::resources::ServiceAccounts()},
      {"rolebindings", k8s::resources::RoleBindings()}, {"pods", k8s::resources::Pods()}};
  for (const auto& [resource, gvr] : kinds) {
    k8s::InformerOptions o{
        .collection = {gvr, options_.watch_namespace, "", ""},
        .label_selector = resource == "pods" ? std::string(kModelDeploymentLabel) + "," + kComponentLabel + "=server"
                                             : owned_selector,
        .transform = resource == "pods" ? CompactPodForCache : CompactOwnedForCache};
    auto informer = std::make_unique<k8s::Informer>(client_, o);
    informer->AddIndex(kIndex, OwnerIndex);
    informer->AddEventHandlers({.on_add = [this](const ObjectPtr& obj) { EnqueueOwner(obj); },
                                .on_update =
                                    [this](const ObjectPtr& old_obj, const ObjectPtr& obj) {
                                      // Resyncs (old == new) and others' labels change nothing here.
                                      if (old_obj != obj && OwnedObjectChanged(*old_obj, *obj)) EnqueueOwner(obj);
                                    },
                                .on_delete =
                                    [this, resource](const ObjectPtr& obj) {
                                      std::lock_guard lock(applied_mu_);
                                      applied_digest_.erase(resource + "/" + k8s::ObjectKey(*obj));
                                      EnqueueOwner(obj);
                                    }});
    owned_.push_back({resource, gvr, std::move(informer)});
  }
  // Owned caches first, so the first reconciles see what already exists.
  for (auto& o : owned_) MF_RETURN_IF_ERROR(o.informer->Start());
  for (auto& o : owned_) {
    if (!o.informer->WaitForSync(sync_timeout)) return DeadlineExceeded("the " + o.resource + " cache did not sync");
  }
  MF_RETURN_IF_ERROR(model_deployments_->Start());
  if (!model_deployments_->WaitForSync(sync_timeout)) return DeadlineExceeded("the ModelDeployment cache did not sync");
  workers_ = std::make_unique<k8s::WorkerPool>(*queue_, options_.workers,
                                               [this](const std::string& key) { return Reconcile(key); });
  depth_reporter_ = std::jthread([this](std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    while (!stop.stop_requested()) {
      metrics_.SetQueueDepth(kModelDeploymentController, static_cast<double>(queue_->Len()));
      std::unique_lock lock(mu);
      cv.wait_for(lock, stop, seconds(1), [] { return false; });
    }
  });
  log::Info("ModelDeployment controller started",
            {{"namespace", options_.watch_namespace.empty() ? "(all)" : options_.watch_namespace},
             {"workers", std::to_string(options_.workers)}});
  return Status();
}

void ModelDeploymentController::Stop() {
  if (depth_reporter_.joinable()) {
    depth_reporter_.request_stop();
    depth_reporter_.join();
  }
  if (queue_) queue_->ShutDown();
  workers_.reset();  // joins: reconciles in flight finish
  if (model_deployments_) model_deployments_->Stop();
  for (auto& o : owned_) o.informer->Stop();
}

ObservedState ModelDeploymentController::Observe(const std::string& ns, const std::string& name,
                                                 const ModelDeploymentSpec* spec) const {
  ObservedState observed;
  const std::string key = ns + "/" + name;
  for (const auto& d : OwnedInformer("deployments")->store().ByIndex(kIndex, key)) {
    if (spec && !IsControlledBy(*d, spec->uid)) continue;
    const std::string component = LabelOf(*d, kComponentLabel);
    if (component == "router") {
      observed.router_deployment = *d;
    } else if (component == "server") {
      observed.versions[LabelOf(*d, kVersionLabel)].deployment = *d;
    }
  }
  for (const auto& p : OwnedInformer("pods")->store().ByIndex(kIndex, key)) {
    observed.versions[LabelOf(*p, kVersionLabel)].pods.push_back(*p);
  }
  return observed;
}

Status ModelDeploymentController::ApplyObject(const ModelDeploymentSpec& md, const DesiredObject& desired,
                                              const Json& involved, std::string* created) {
  created->clear();
  const std::string kind = KindOf(desired.resource);
  const Owned* owned = nullptr;
  for (const auto& o : owned_) {
    if (o.resource == desired.resource) owned = &o;
  }
  if (!owned) return Internal("no informer for " + desired.resource);
  k8s::Informer* informer = owned->informer.get();
  const k8s::ResourceRef target{owned->gvr, md.ns, desired.name, ""};
  ObjectPtr cached = informer->store().Get(md.ns + "/" + desired.name);
  Json existing;
  if (cached) {
    existing = *cached;
  } else {
    // Not in our label-selected cache: it may still exist, created by someone else. The API
    // server's watch cache answers ("0"): no etcd read per new object, and an object created a
    // moment ago by another client is a race the apply would lose anyway.
    auto got = client_.Get(target, "0");
    if (got.ok()) {
      existing = *got;
    } else if (!k8s::IsNotFound(got.status())) {
      return got.status();
    }
  }
  // The cache holds a digest of each object's content, not the content (cache_view.h): our
  // applied hash plus the digest our last apply left stand for the comparison.
  const std::string hash = AppliedHash(desired.object);
  const std::string memo_key = desired.resource + "/" + md.ns + "/" + desired.name;
  if (!existing.is_null()) {
    if (!IsControlledBy(existing, md.uid)) {
      const std::string message = kind + " " + desired.name +
                                  " exists and is not controlled by this ModelDeployment; the operator leaves it "
                                  "alone: delete or rename it";
      (void)events_.Record(involved, k8s::EventType::kWarning, "NameConflict", message);
      return FailedPrecondition(message);
    }
    if (AnnotationOf(existing, kAppliedHashAnnotation) == hash) {
      const std::string cached = CachedDigest(existing);
      const std::string digest = cached.empty() ? LiveDigest(existing) : cached;
      std::lock_guard lock(applied_mu_);
      auto [it, inserted] = applied_digest_.try_emplace(memo_key, digest);
      if (inserted || it->second == digest) return Status();
    }
  }
  Json object = desired.object;
  StampAppliedHash(&object);
  auto applied = client_.Apply(target, object, kFieldManager, /*force=*/true);
  if (!applied.ok()) {
    (void)events_.Record(involved, k8s::EventType::kWarning, "ApplyFailed",
                         "applying " + kind + " " + desired.name + ": " + applied.status().message());
    return applied.status();
  }
  {
    std::lock_guard lock(applied_mu_);
    applied_digest_[memo_key] = LiveDigest(*applied);
  }
  if (existing.is_null()) {
    *created = kind + " " + desired.name;
  } else if (k8s::ResourceVersion(*applied) != k8s::ResourceVersion(existing)) {
    (void)events_.Record(involved, k8s::EventType::kNormal, "Updated", "updated " + kind + " " + desired.name);
  }
  return Status();
}

Status ModelDeploymentController::PruneObjects(const ModelDeploymentSpec& md, const DesiredState& desired,
                                               const Json& involved, ObservedState* observed, seconds* requeue_after) {
  std::set<std::pair<std::string, std::string>> wanted;
  for (const auto& d : desired.objects) wanted.insert({d.resource, d.name});
  const std::string key = md.ns + "/" + md.name;
  std::set<std::string> retiring_deployments;
  for (const auto& d : OwnedInformer("deployments")->store().ByIndex(kIndex, key)) {
    if (IsControlledBy(*d, md.uid) && !wanted.count({"deployments", k8s::StringAt(k8s::MetadataOf(*d), "name")})) {
      retiring_deployments.insert(LabelOf(*d, kVersionLabel));
    }
  }
  Status first_error;
  for (const auto& owned : owned_) {
    // What a spec change can drop: a version's Deployment and Service, the batching ConfigMap.
    // The router's ServiceAccount and RoleBinding live as long as the ModelDeployment.
    if (owned.resource != "deployments" && owned.resource != "services" && owned.resource != "configmaps") continue;
    for (const auto& obj : owned.informer->store().ByIndex(kIndex, key)) {
      const std::string name = k8s::StringAt(k8s::MetadataOf(*obj), "name");
      if (!IsControlledBy(*obj, md.uid) || wanted.count({owned.resource, name})) continue;
      const std::string version = LabelOf(*obj, kVersionLabel);
      const k8s::ResourceRef ref{owned.gvr, md.ns, name, ""};
      if (!version.empty()) {
        // A removed version: the routers were already told to stop sending to it (the router
        // config applied before this), so its pods go only after the routers had time to act.
        observed->retiring.insert(version);
        if (owned.resource == "services" && retiring_deployments.count(version)) continue;  // goes after its pods
        if (owned.resource == "deployments") {
          const std::string since_text = AnnotationOf(*obj, kRetiringSince);
          int64_t since = 0;
          if (since_text.empty() || !ParseInt64(since_text, &since)) {
            const Json patch = {{"metadata", {{"annotations", {{kRetiringSince, std::to_string(NowSeconds())}}}}}};
            auto patched = client_.Patch(ref, k8s::PatchType::kMerge, patch);
            if (!patched.ok()) {
              if (first_error.ok()) first_error = patched.status();
              continue;
            }
            (void)events_.Record(involved, k8s::EventType::kNormal, "RetiringVersion",
                                 "version " + version + " was removed: its traffic moved to the other versions; its " +
                                     "pods are deleted in " + std::to_string(options_.retire_drain.count()) + "s");
            *requeue_after =
                requeue_after->count() ? std::min(*requeue_after, options_.retire_drain) : options_.retire_drain;
            continue;
          }
          const int64_t waited = NowSeconds() - since;
          if (waited < options_.retire_drain.count()) {
            const seconds left(options_.retire_drain.count() - waited);
            *requeue_after = requeue_after->count() ? std::min(*requeue_after, left) : left;
            continue;
          }
        }
      }
      const std::string uid = k8s::StringAt(k8s::MetadataOf(*obj), "uid");
      Status s = client_.Delete(ref, uid);
      if (!s.ok() && !k8s::IsNotFound(s)) {
        if (first_error.ok()) first_error = s;
        continue;
      }
      (void)events_.Record(involved, k8s::EventType::kNormal, "Deleted",
                           "deleted " + KindOf(owned.resource) + " " + name);
    }
  }
  return first_error;
}

std::chrono::seconds ModelDeploymentController::DiagnoseStuckVersions(const ModelDeploymentSpec& md,
                                                                      ObservedState* observed) {
  std::chrono::seconds recheck{0};
  for (auto& [version, ov] : observed->versions) {
    for (const auto& pod : ov.pods) {
      if (!DiagnosePod(pod).reason.empty()) continue;
      const int64_t not_ready = ServerNotReadySeconds(pod, NowSeconds());
      if (not_ready < 0) continue;
      if (not_ready < kStuckSeconds) {
        // Nothing else would wake us if the server never turns ready: look again then.
        const std::chrono::seconds left(kStuckSeconds - not_ready + 1);
        recheck = recheck.count() ? std::min(recheck, left) : left;
        continue;
      }
      // Through the API server's pod proxy, so it works from outside the cluster network too.
      const std::string path = "/api/v1/namespaces/" + md.ns + "/pods/" + k8s::StringAt(k8s::MetadataOf(pod), "name") +
                               ":" + std::to_string(kRestPort) + "/proxy/v1/models/" + k8s::UrlEncode(md.model_name);
      auto body = client_.Call("GET", path, "", "");
      if (body.ok()) ov.model_problem = DiagnoseModelStatus(*body);
      break;  // one pod per version says enough
    }
  }
  return recheck;
}

ModelDeploymentController::Plan ModelDeploymentController::PlanTrafficAndReplicas(const ModelDeploymentSpec& md,
                                                                                  const ObservedState& observed,
                                                                                  const Json& old_status,
                                                                                  const Json& involved) {
  Plan plan;
  plan.weights = md.traffic;
  const std::string key = md.ns + "/" + md.name;
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  if (options_.rates && (md.autoscaling || md.rollout)) {
    if (auto rates = options_.rates->Rates(key, kQpsWindowMs, now_ms)) {
      for (const auto& [version, r] : *rates) {
        plan.load[version] = {
            r.qps, r.requests > 0 ? static_cast<double>(r.errors) / static_cast<double>(r.requests) : 0, r.p99_ms};
      }
    }
  }
  auto ready = [&](const std::string& version) {
    auto it = observed.versions.find(version);
    return it != observed.versions.end() && it->second.deployment.is_object() &&
           it->second.deployment.value("status", Json::object()).value("readyReplicas", 0) > 0;
  };

  if (md.rollout) {
    const std::string canary = md.versions.back().name;
    CanaryMetrics m;
    if (options_.rates) {
      if (auto rates = options_.rates->Rates(key, md.rollout->analysis.interval_seconds * 1000, now_ms)) {
        m.known = true;
        if (auto it = rates->find(canary); it != rates->end()) {
          m.requests = it->second.requests;
          m.errors = it->second.errors;
          m.p99_ms = it->second.p99_ms;
          m.mirrored = it->second.mirrored;
          m.disagreements = it->second.disagreements;
        }
      }
    }
    std::string problem;
    if (auto it = observed.versions.find(canary); it != observed.versions.end()) {
      problem = it->second.model_problem.message;
      for (const auto& pod : it->second.pods) {
        if (problem.empty()) problem = DiagnosePod(pod).message;
      }
    }
    const RolloutDecision d = StepRollout(md, RolloutState::FromStatus(old_status.value("rollout", Json::object())),
                                          ready(canary), m, now_ms / 1000, problem);
    plan.weights = d.weights;
    plan.rollout = d.state.ToStatus();
    if (!d.event_reason.empty()) {
      (void)events_.Record(involved, d.warning ? k8s::EventType::kWarning : k8s::EventType::kNormal, d.event_reason,
                           d.event_message);
    }
    if (d.state.phase == "Progressing")
      plan.recheck = seconds(std::min<int64_t>(5, md.rollout->analysis.interval_seconds));
  }

  if (md.autoscaling) {
    const AutoscalingSpec& spec = *md.autoscaling;
    if (!spec.prometheus_url.empty() && spec.metric == "qps") ReadPrometheusQps(md, involved, &plan);
    double total_qps = 0;
    for (const auto& [v, l] : plan.load) total_qps += l.qps;
    std::map<std::string, double> in_flight;
    if (options_.rates) {
      if (auto rates = options_.rates->Rates(key, kQpsWindowMs, now_ms)) {
        for (const auto& [v, r] : *rates) in_flight[v] = r.in_flight;
      }
    }
    std::lock_guard lock(history_mu_);
    for (const auto& v : md.versions) {
      auto it = observed.versions.find(v.name);
      const Json& d = it == observed.versions.end() ? Json() : it->second.deployment;
      const int32_t current = d.is_object() ? d.value("spec", Json::object()).value("replicas", spec.min_replicas)
                                            : std::max<int32_t>(spec.min_replicas, 1);
      ScaleInput in{.spec = spec, .current = current, .now_ms = now_ms};
      auto load = plan.load.find(v.name);
      in.load_known = load != plan.load.end() || !plan.load.empty();
      if (spec.metric == "concurrency") {
        in.load = in_flight.count(v.name) ? in_flight[v.name] : 0;
      } else {
        // Its own measured rate, or its share of the total when traffic is about to move to it.
        const auto w = plan.weights.find(v.name);
        const double share = w == plan.weights.end() ? 0 : w->second / 100.0;
        in.load = std::max(load == plan.load.end() ? 0.0 : load->second.qps, total_qps * share);
      }
      const ScaleDecision decision = DecideReplicas(in, &history_[key + "/" + v.name]);
      plan.replicas[v.name] = decision.desired;
      if (d.is_object() && decision.desired != current) {
        (void)events_.Record(involved, k8s::EventType::kNormal, decision.desired > current ? "ScaledUp" : "ScaledDown",
                             "version " + v.name + " from " + std::to_string(current) + " to " +
                                 std::to_string(decision.desired) + ": " + decision.reason);
      }
    }
    plan.recheck = plan.recheck.count() ? std::min(plan.recheck, seconds(1)) : seconds(1);
  }
  return plan;
}

// spec.autoscaling.prometheus: each version's QPS from its query, replacing what the routers
// report; a version whose query fails keeps the reports' figure, and the failure is an event
// (the same message is aggregated by the recorder, so a down Prometheus does not flood).
void ModelDeploymentController::ReadPrometheusQps(const ModelDeploymentSpec& md, const Json& involved, Plan* plan) {
  if (!options_.http_get) return;
  const AutoscalingSpec& spec = *md.autoscaling;
  for (const auto& v : md.versions) {
    const std::string query = ExpandPrometheusQuery(spec.prometheus_query, md.ns, md.name, v.name);
    auto answer = options_.http_get(PrometheusQueryUrl(spec.prometheus_url, query));
    StatusOr<double> qps =
        answer.ok() ? ParsePrometheusAnswer(answer->first, answer->second) : StatusOr<double>(answer.status());
    if (!qps.ok()) {
      (void)events_.Record(involved, k8s::EventType::kWarning, "PrometheusQueryFailed",
                           "version " + v.name + ": " + qps.status().message() + "; scaling on the routers' reports");
      continue;
    }
    plan->load[v.name].qps = *qps;
  }
}

Status ModelDeploymentController::WriteStatus(const Json& object, const Json& status) {
  return client_.ReplaceStatus(k8s::resources::ModelDeployments(), object, status).status();
}

void ModelDeploymentController::RecordConditionEvents(const Json& involved, const Json& old_status,
                                                      const Json& new_status) {
  for (const char* type : {"Ready", "Degraded"}) {
    const Json before = FindCondition(old_status, type);
    const Json after = FindCondition(new_status, type);
    if (!after.is_object()) continue;
    const std::string now = after.value("status", "");
    const bool same = before.is_object() && before.value("status", "") == now &&
                      before.value("reason", "") == after.value("reason", "") &&
                      before.value("message", "") == after.value("message", "");
    if (same) continue;
    const std::string type_name = type;
    if (type_name == "Ready" && now == "True") {
      (void)events_.Record(involved, k8s::EventType::kNormal, "Ready", after.value("message", ""));
    } else if (type_name == "Degraded" && now == "True") {
      (void)events_.Record(involved, k8s::EventType::kWarning, after.value("reason", "Degraded"),
                           after.value("message", ""));
    } else if (type_name == "Degraded" && before.is_object() && before.value("status", "") == "True") {
      (void)events_.Record(involved, k8s::EventType::kNormal, "Recovered", "no version is degraded any more");
    }
  }
}

k8s::ReconcileResult ModelDeploymentController::Reconcile(const std::string& key) {
  const auto started = std::chrono::steady_clock::now();
  auto finish = [&](k8s::ReconcileResult r) {
    const char* result = !r.status.ok()                                   ? "error"
                         : r.requeue_after > k8s::Clock::duration::zero() ? "requeue"
                                                                          : "success";
    metrics_.ObserveReconcile(kModelDeploymentController, result, std::chrono::steady_clock::now() - started);
    if (!r.status.ok()) log::Warning("reconcile failed", {{"key", key}, {"error", r.status.message()}});
    return r;
  };
  const size_t slash = key.find('/');
  const std::string ns = key.substr(0, slash);
  const std::string name = slash == std::string::npos ? key : key.substr(slash + 1);
  const ObjectPtr object = model_deployments_->store().Get(key);
  if (!object) {
    // Deleted: the garbage collector removes what it owned.
    metrics_.ForgetVersions(ns, name);
    return finish({});
  }
  const Json& md_object = *object;
  if (k8s::MetadataOf(md_object).contains("deletionTimestamp")) return finish({});
  const Json involved = {
      {"apiVersion", "modelfleet.io/v1alpha1"},
      {"kind", "ModelDeployment"},
      {"metadata", {{"name", name}, {"namespace", ns}, {"uid", k8s::StringAt(k8s::MetadataOf(md_object), "uid")}}}};
  const Json old_status = md_object.value("status", Json::object());

  StatusInput in;
  in.object = &md_object;
  in.now = NowRfc3339();
  auto parsed = ParseModelDeployment(md_object);
  if (!parsed.ok()) {
    in.spec_error = parsed.status();
    const Json status = BuildStatus(in);
    RecordConditionEvents(involved, old_status, status);
    // Nothing is applied or deleted: the fleet keeps serving what the last valid spec asked for.
    return finish({WriteStatus(md_object, status)});
  }
  const ModelDeploymentSpec& md = *parsed;
  seconds requeue_after{0};
  auto requeue_within = [&](seconds s) {
    if (s.count() > 0 && (!requeue_after.count() || s < requeue_after)) requeue_after = s;
  };
  ObservedState before = Observe(ns, name, &md);
  requeue_within(DiagnoseStuckVersions(md, &before));
  const Plan plan = PlanTrafficAndReplicas(md, before, old_status, involved);
  requeue_within(plan.recheck);
  const DesiredState desired = BuildDesiredState(md, plan.weights, options_.settings, plan.replicas);
  Status first_error;
  std::string created_list;
  for (const auto& d : desired.objects) {
    std::string created;
    Status s = ApplyObject(md, d, involved, &created);
    if (!s.ok() && first_error.ok()) first_error = s;
    if (!created.empty()) created_list += (created_list.empty() ? "" : ", ") + created;
  }
  // One Event for a new fleet's objects instead of one each: a tenth of the API calls.
  if (!created_list.empty())
    (void)events_.Record(involved, k8s::EventType::kNormal, "Created", "created " + created_list);
  ObservedState observed = Observe(ns, name, &md);
  seconds prune_after{0};
  Status pruned = PruneObjects(md, desired, involved, &observed, &prune_after);
  if (!pruned.ok() && first_error.ok()) first_error = pruned;
  requeue_within(prune_after);
  for (auto& [version, ov] : observed.versions) {
    if (auto it = before.versions.find(version); it != before.versions.end())
      ov.model_problem = it->second.model_problem;
  }
  in.spec = &md;
  in.observed = &observed;
  in.weights = plan.weights;
  in.replicas = plan.replicas;
  in.load = plan.load;
  in.rollout = plan.rollout;
  const Json status = BuildStatus(in);
  std::set<std::string> versions;
  for (const auto& v : status["versions"]) {
    versions.insert(v["name"].get<std::string>());
    metrics_.SetVersionReplicas(ns, name, v["name"].get<std::string>(), v["replicas"].get<int64_t>(),
                                v["readyReplicas"].get<int64_t>());
  }
  metrics_.ForgetVersions(ns, name, versions);
  RecordConditionEvents(involved, old_status, status);
  Status written = WriteStatus(md_object, status);
  if (!written.ok() && first_error.ok()) first_error = written;
  return finish({first_error, requeue_after});
}

}  // namespace mf::op
