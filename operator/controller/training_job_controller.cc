#include "controller/training_job_controller.h"

#include <ctime>

#include "common/logging.h"
#include "controller/model_deployment_controller.h"
#include "k8s/api_error.h"
#include "trainingjob/desired.h"
#include "trainingjob/gang.h"
#include "trainingjob/handoff.h"
#include "trainingjob/status.h"
#include "trainingjob/study/study_reconcile.h"

namespace mf::op {
namespace {

using k8s::ObjectPtr;
using std::chrono::seconds;
using training::Task;
using training::TrainingJobSpec;

constexpr const char* kTrainingJobController = "trainingjob";
constexpr const char* kJobIndex = "trainingjob";
// How long to wait for the caches to show what a reconcile did before deciding without them.
constexpr seconds kExpectationTimeout{30};

std::string Label(const Json& object, const char* label) {
  const Json& labels = k8s::MetadataOf(object).value("labels", Json::object());
  return labels.is_object() ? k8s::StringAt(labels, label) : "";
}

// "ns/<job-name label>": the job a pod belongs to.
std::vector<std::string> JobOfPod(const Json& pod) {
  const std::string job = Label(pod, training::kJobNameLabel);
  if (job.empty()) return {};
  return {k8s::StringAt(k8s::MetadataOf(pod), "namespace") + "/" + job};
}

// The TrainingJob that controls `job` (a study's trial), as a key, or "".
std::string ParentJob(const Json& job) {
  const Json& refs = k8s::MetadataOf(job).value("ownerReferences", Json::array());
  if (!refs.is_array()) return "";
  for (const auto& ref : refs) {
    if (ref.is_object() && ref.value("controller", false) == true && k8s::StringAt(ref, "kind") == "TrainingJob") {
      return k8s::StringAt(k8s::MetadataOf(job), "namespace") + "/" + k8s::StringAt(ref, "name");
    }
  }
  return "";
}

int64_t VersionOf(const Json& object) {
  const std::string rv = k8s::ResourceVersion(object);
  int64_t v = 0;
  for (char c : rv) {
    if (c < '0' || c > '9' || v > INT64_MAX / 10 - 10) return 0;
    v = v * 10 + (c - '0');
  }
  return v;
}

void TrimForCache(Json* object) {
  if (!object->is_object()) return;
  if (auto meta = object->find("metadata"); meta != object->end() && meta->is_object()) meta->erase("managedFields");
}

// Of a training pod the lifecycle reads metadata and status only.
void TrimPodForCache(Json* pod) {
  TrimForCache(pod);
  if (pod->is_object()) pod->erase("spec");
}

int64_t Now() { return static_cast<int64_t>(std::time(nullptr)); }

}  // namespace

TrainingJobController::TrainingJobController(k8s::Client& client, k8s::EventRecorder& events, OperatorMetrics& metrics,
                                             TrainingControllerOptions options)
    : client_(client), events_(events), metrics_(metrics), options_(std::move(options)) {}

TrainingJobController::~TrainingJobController() { Stop(); }

void TrainingJobController::Enqueue(const ObjectPtr& object) {
  if (!queue_ || !object) return;
  queue_->Add(k8s::ObjectKey(*object));
  if (std::string parent = ParentJob(*object); !parent.empty()) queue_->Add(parent);
}

Status TrainingJobController::Start(std::chrono::milliseconds sync_timeout) {
  queue_ = std::make_unique<k8s::WorkQueue>(k8s::ItemRateLimiter::Options{
      .base = std::chrono::milliseconds(100), .cap = seconds(60), .qps = 20, .burst = 100});
  pods_ = std::make_unique<k8s::Informer>(
      client_, k8s::InformerOptions{.collection = {k8s::resources::Pods(), options_.watch_namespace, "", ""},
                                    .label_selector = training::kJobNameLabel,
                                    .transform = TrimPodForCache});
  pods_->AddIndex(kJobIndex, JobOfPod);
  auto enqueue_job = [this](const ObjectPtr& pod) {
    if (!queue_ || !pod) return;
    for (const auto& key : JobOfPod(*pod)) queue_->Add(key);
  };
  pods_->AddEventHandlers({.on_add = enqueue_job,
                           .on_update =
                               [enqueue_job](const ObjectPtr& old_pod, const ObjectPtr& pod) {
                                 if (old_pod != pod) enqueue_job(pod);
                               },
                           .on_delete = enqueue_job});
  jobs_ = std::make_unique<k8s::Informer>(
      client_, k8s::InformerOptions{.collection = {k8s::resources::TrainingJobs(), options_.watch_namespace, "", ""},
                                    .resync_period = options_.resync,
                                    .transform = TrimForCache});
  jobs_->AddEventHandlers({.on_add = [this](const ObjectPtr& o) { Enqueue(o); },
                           .on_update = [this](const ObjectPtr&, const ObjectPtr& o) { Enqueue(o); },
                           .on_delete = [this](const ObjectPtr& o) { Enqueue(o); }});
  MF_RETURN_IF_ERROR(pods_->Start());
  if (!pods_->WaitForSync(sync_timeout)) return DeadlineExceeded("the training pod cache did not sync");
  MF_RETURN_IF_ERROR(jobs_->Start());
  if (!jobs_->WaitForSync(sync_timeout)) return DeadlineExceeded("the TrainingJob cache did not sync");
  workers_ = std::make_unique<k8s::WorkerPool>(*queue_, options_.workers,
                                               [this](const std::string& key) { return Reconcile(key); });
  log::Info("TrainingJob controller started",
            {{"namespace", options_.watch_namespace.empty() ? "(all)" : options_.watch_namespace},
             {"workers", std::to_string(options_.workers)}});
  return Status();
}

void TrainingJobController::Stop() {
  if (queue_) queue_->ShutDown();
  workers_.reset();
  if (jobs_) jobs_->Stop();
  if (pods_) pods_->Stop();
}

bool TrainingJobController::CacheCaughtUp(const std::string& key, const Json& job) {
  std::lock_guard lock(expect_mu_);
  auto it = expectations_.find(key);
  if (it == expectations_.end()) return true;
  const Expectation& e = it->second;
  const std::string ns = k8s::StringAt(k8s::MetadataOf(job), "namespace");
  bool caught_up = std::chrono::steady_clock::now() > e.until;
  if (!caught_up) {
    caught_up = e.status_version == 0 || VersionOf(job) >= e.status_version;
    for (const auto& [name, uid] : e.deleted) {
      const ObjectPtr pod = pods_->store().Get(ns + "/" + name);
      if (pod && k8s::StringAt(k8s::MetadataOf(*pod), "uid") == uid &&
          !k8s::MetadataOf(*pod).contains("deletionTimestamp")) {
        caught_up = false;
      }
    }
    for (const auto& name : e.created) {
      if (!pods_->store().Get(ns + "/" + name)) caught_up = false;
    }
  }
  if (caught_up) expectations_.erase(it);
  return caught_up;
}

Status TrainingJobController::PrepareStart(const TrainingJobSpec& spec, Json* status, std::string* gang_problem) {
  if (!spec.output.model_uri.empty() && !status->contains("modelVersion")) {
    int64_t version = spec.output.version.value_or(1);
    if (!spec.output.version && spec.output.deploy_to) {
      auto md = client_.Get({k8s::resources::ModelDeployments(), spec.ns, spec.output.deploy_to->model_deployment, ""});
      if (md.ok()) {
        version = training::NextModelVersion(*md);
      } else if (!k8s::IsNotFound(md.status())) {
        return md.status();
      }
    }
    (*status)["modelVersion"] = version;
  }
  auto nodes = client_.List({k8s::resources::Nodes(), "", "", ""});
  if (!nodes.ok()) return nodes.status();
  std::vector<Json> node_list;
  bool shared = false;
  for (const auto& n : nodes->value("items", Json::array())) {
    node_list.push_back(n);
    shared = shared || Label(n, kPodNetworkLabel) == "shared";
  }
  if (shared) {
    (*status)["podNetwork"] = "shared";
  } else {
    status->erase("podNetwork");
  }
  auto pods = client_.List({k8s::resources::Pods(), "", "", ""},
                           {.field_selector = "status.phase!=Succeeded,status.phase!=Failed"});
  if (!pods.ok()) return pods.status();
  std::vector<Json> bound;
  for (const auto& p : pods->value("items", Json::array())) bound.push_back(p);
  std::vector<std::pair<std::string, Json>> wanted;
  for (const Task& t : training::AllTasks(spec)) {
    wanted.emplace_back(training::TaskName(spec, t), training::DesiredPod(spec, t, {})["spec"]);
  }
  *gang_problem = training::CheckGangFits(training::FreeRoom(node_list, bound), wanted);
  return Status();
}

Status TrainingJobController::Apply(const TrainingJobSpec& spec, const training::ClusterEnvOptions& env,
                                    const training::LifecycleDecision& d, const Json& involved, Expectation* expect) {
  Status first_error;
  auto keep = [&](const Status& s) {
    if (!s.ok() && first_error.ok()) first_error = s;
  };
  std::string created;
  for (const Task& t : d.create) {
    const std::string name = training::TaskName(spec, t);
    auto svc = client_.Create({k8s::resources::Services(), spec.ns, "", ""}, training::DesiredService(spec, t, env));
    if (!svc.ok() && svc.status().code() != StatusCode::kAlreadyExists) {
      keep(svc.status());
      continue;
    }
    auto pod = client_.Create({k8s::resources::Pods(), spec.ns, "", ""}, training::DesiredPod(spec, t, env));
    if (!pod.ok() && pod.status().code() != StatusCode::kAlreadyExists) {
      keep(pod.status());
      (void)events_.Record(involved, k8s::EventType::kWarning, "FailedCreatePod",
                           "cannot create pod " + name + ": " + pod.status().message());
      continue;
    }
    expect->created.insert(name);
    created += (created.empty() ? "" : ", ") + name;
  }
  if (!created.empty()) (void)events_.Record(involved, k8s::EventType::kNormal, "CreatedPods", "created " + created);
  for (const auto& p : d.remove) {
    Status s = client_.Delete({k8s::resources::Pods(), spec.ns, p.name, ""}, p.uid);
    if (!s.ok() && !k8s::IsNotFound(s)) {
      keep(s);
      continue;
    }
    expect->deleted[p.name] = p.uid;
  }
  if (d.remove_services) {
    for (const Task& t : training::AllTasks(spec)) {
      Status s = client_.Delete({k8s::resources::Services(), spec.ns, training::TaskName(spec, t), ""});
      if (!s.ok() && !k8s::IsNotFound(s)) keep(s);
    }
  }
  return first_error;
}

Status TrainingJobController::HandOff(const TrainingJobSpec& spec, Json* status, const Json& involved) {
  const Json& previous = status->value("handoff", Json::object());
  if (previous.is_object() && previous.contains("version")) return Status();
  const std::string md_name = spec.output.deploy_to->model_deployment;
  auto fail = [&](const Status& s) {
    const std::string message = "cannot hand the model to ModelDeployment " + md_name + ": " + s.message();
    if (!previous.is_object() || previous.value("message", Json("")) != message) {
      (void)events_.Record(involved, k8s::EventType::kWarning, "HandOffFailed", message);
    }
    (*status)["handoff"] = {{"modelDeployment", md_name}, {"message", message}};
    return s;
  };
  auto md = client_.Get({k8s::resources::ModelDeployments(), spec.ns, md_name, ""});
  if (!md.ok()) return fail(md.status());
  const int64_t version = status->value("modelVersion", Json(1)).is_number_integer()
                              ? status->value("modelVersion", Json(1)).get<int64_t>()
                              : 1;
  auto handoff = training::BuildHandoff(*md, spec, version);
  if (!handoff.ok()) return fail(handoff.status());
  if (!handoff->already_done) {
    auto patched = client_.Patch({k8s::resources::ModelDeployments(), spec.ns, md_name, ""}, k8s::PatchType::kMerge,
                                 handoff->patch);
    if (!patched.ok()) return fail(patched.status());
    (void)events_.Record(involved, k8s::EventType::kNormal, "HandedOff",
                         "model " + handoff->storage_uri + " added to ModelDeployment " + md_name + " as version " +
                             handoff->version + " at " + std::to_string(spec.output.deploy_to->canary_percent) +
                             "% of the traffic");
  }
  (*status)["handoff"] = {{"modelDeployment", md_name},
                          {"version", handoff->version},
                          {"storageUri", handoff->storage_uri},
                          {"canaryPercent", spec.output.deploy_to->canary_percent},
                          {"time", training::FormatTime(Now())}};
  return Status();
}

StatusOr<int64_t> TrainingJobController::WriteStatus(const Json& object, const Json& status) {
  MF_ASSIGN_OR_RETURN(std::optional<Json> patched,
                      client_.ReplaceStatus(k8s::resources::TrainingJobs(), object, status));
  return patched ? VersionOf(*patched) : int64_t{0};
}

k8s::ReconcileResult TrainingJobController::Reconcile(const std::string& key) {
  const auto started = std::chrono::steady_clock::now();
  auto finish = [&](k8s::ReconcileResult r) {
    const char* result = !r.status.ok()                                   ? "error"
                         : r.requeue_after > k8s::Clock::duration::zero() ? "requeue"
                                                                          : "success";
    metrics_.ObserveReconcile(kTrainingJobController, result, std::chrono::steady_clock::now() - started);
    if (!r.status.ok()) log::Warning("reconcile failed", {{"key", key}, {"error", r.status.message()}});
    return r;
  };
  const ObjectPtr object = jobs_->store().Get(key);
  if (!object) {
    // Deleted: the garbage collector removes its pods and Services.
    std::lock_guard lock(expect_mu_);
    expectations_.erase(key);
    return finish({});
  }
  const Json& job = *object;
  if (k8s::MetadataOf(job).contains("deletionTimestamp")) return finish({});
  const std::string ns = k8s::StringAt(k8s::MetadataOf(job), "namespace");
  const std::string name = k8s::StringAt(k8s::MetadataOf(job), "name");
  const std::string uid = k8s::StringAt(k8s::MetadataOf(job), "uid");
  const Json involved = {{"apiVersion", "modelfleet.io/v1alpha1"},
                         {"kind", "TrainingJob"},
                         {"metadata", {{"name", name}, {"namespace", ns}, {"uid", uid}}}};
  const Json old_status = job.value("status", Json::object());
  const int64_t now = Now();

  auto parsed = training::ParseTrainingJob(job);
  if (!parsed.ok()) {
    if (!training::IsConditionTrue(old_status, "Failed")) {
      (void)events_.Record(involved, k8s::EventType::kWarning, "FailedValidation", parsed.status().message());
    }
    if (training::IsFinished(old_status)) return finish({});
    auto written = WriteStatus(job, training::InvalidSpecStatus(old_status, name, parsed.status().message(), now));
    return finish({written.status()});
  }
  const TrainingJobSpec& spec = *parsed;

  if (spec.IsStudy()) {
    const study::StudyContext context{client_, events_, jobs_->store(), pods_->store(), now};
    study::StudyOutcome outcome = study::ReconcileStudy(context, job, spec);
    auto written = WriteStatus(job, outcome.status);
    return finish({outcome.error.ok() ? written.status() : outcome.error, outcome.requeue_after});
  }

  if (!CacheCaughtUp(key, job)) return finish({Status(), std::chrono::milliseconds(200)});
  std::vector<Json> pods;
  for (const auto& p : pods_->store().ByIndex(kJobIndex, key)) {
    if (IsControlledBy(*p, uid)) pods.push_back(*p);
  }
  Json status = old_status.is_object() ? old_status : Json::object();
  std::string gang_problem;
  if (training::WantsGangStart(spec, old_status, pods)) {
    if (Status s = PrepareStart(spec, &status, &gang_problem); !s.ok()) return finish({s});
  }
  training::LifecycleDecision d =
      training::Decide({.spec = &spec, .old_status = status, .pods = pods, .now = now, .gang_problem = gang_problem});
  const training::ClusterEnvOptions env{
      .cluster_domain = options_.cluster_domain,
      .distinct_ports = d.status.value("podNetwork", Json("")) == "shared" || training::UsesHostNetwork(spec),
      .model_version = d.status.value("modelVersion", Json(1)).is_number_integer()
                           ? d.status.value("modelVersion", Json(1)).get<int64_t>()
                           : 1};
  Expectation expect;
  Status first_error = Apply(spec, env, d, involved, &expect);
  for (const auto& e : d.events) {
    (void)events_.Record(involved, e.warning ? k8s::EventType::kWarning : k8s::EventType::kNormal, e.reason, e.message);
  }
  seconds requeue(d.requeue_after);
  if (training::IsConditionTrue(d.status, "Succeeded") && spec.output.deploy_to) {
    if (Status s = HandOff(spec, &d.status, involved); !s.ok()) {
      requeue = requeue.count() ? std::min(requeue, seconds(15)) : seconds(15);
    }
  }
  auto written = WriteStatus(job, d.status);
  if (!written.ok() && first_error.ok()) first_error = written.status();
  if (written.ok()) expect.status_version = *written;
  if (!expect.deleted.empty() || !expect.created.empty() || expect.status_version) {
    expect.until = std::chrono::steady_clock::now() + kExpectationTimeout;
    std::lock_guard lock(expect_mu_);
    expectations_[key] = std::move(expect);
  }
  if (d.delete_job) {
    Status s = client_.Delete({k8s::resources::TrainingJobs(), ns, name, ""}, uid);
    if (!s.ok() && !k8s::IsNotFound(s) && first_error.ok()) first_error = s;
    if (s.ok()) log::Info("deleted a finished TrainingJob after its TTL", {{"job", key}});
  }
  return finish({first_error, requeue});
}

}  // namespace mf::op
