// The ModelDeployment controller: informers on ModelDeployments and on the objects it owns, a
// work queue keyed by "namespace/name", and a reconcile that applies BuildDesiredState() with
// server-side apply, retires removed versions after their traffic has moved, and writes the
// status BuildStatus() computes. Everything it decides comes from the pure functions in
// modeldeployment/; this file only reads caches and talks to the API server.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "autoscale/autoscaler.h"
#include "controller/operator_metrics.h"
#include "k8s/client.h"
#include "k8s/event_recorder.h"
#include "k8s/informer.h"
#include "k8s/work_queue.h"
#include "metrics_feed/rate_store.h"
#include "modeldeployment/desired.h"
#include "modeldeployment/spec.h"
#include "modeldeployment/status.h"
#include "rollout/rollout.h"

namespace mf::op {

struct ControllerOptions {
  std::string watch_namespace;  // "" = all namespaces
  int workers = 4;
  std::chrono::seconds resync{300};
  // How long a removed version keeps its pods after the routers were told to stop sending to it.
  std::chrono::seconds retire_drain{5};
  OperatorSettings settings;
  RateStore* rates = nullptr;  // what the routers report (null: no autoscaling or analysis data)
  // GETs a URL (spec.autoscaling.prometheus queries): the answer's HTTP status and body, or why
  // there is none. Null: the routers' reports are the only QPS source.
  std::function<StatusOr<std::pair<int, std::string>>(const std::string& url)> http_get;
};

class ModelDeploymentController {
 public:
  ModelDeploymentController(k8s::Client& client, k8s::EventRecorder& events, OperatorMetrics& metrics,
                            ControllerOptions options);
  ~ModelDeploymentController();

  // Starts the informers, waits for their first lists, then starts the workers.
  Status Start(std::chrono::milliseconds sync_timeout = std::chrono::seconds(60));
  // Stops the workers (the current reconciles finish) and the informers. Idempotent.
  void Stop();

  // One reconcile of "namespace/name" (public for tests).
  k8s::ReconcileResult Reconcile(const std::string& key);

 private:
  struct Owned {
    std::string resource;
    k8s::GroupVersionResource gvr;
    std::unique_ptr<k8s::Informer> informer;
  };

  // What this reconcile tells the routers and how big each version is: the spec's traffic or the
  // rollout's step, the spec's replicas or the autoscaler's, with what the routers measured.
  struct Plan {
    std::map<std::string, int> weights;
    std::map<std::string, int32_t> replicas;
    std::map<std::string, VersionLoad> load;
    Json rollout;
    std::chrono::seconds recheck{0};
  };
  Plan PlanTrafficAndReplicas(const ModelDeploymentSpec& md, const ObservedState& observed, const Json& old_status,
                              const Json& involved);
  void Enqueue(const k8s::ObjectPtr& object);
  void EnqueueOwner(const k8s::ObjectPtr& object);
  k8s::Informer* OwnedInformer(const std::string& resource) const;
  ObservedState Observe(const std::string& ns, const std::string& name, const ModelDeploymentSpec* spec) const;
  // Server-side applies `desired` unless the cache shows it applied already. `created` gets
  // "Kind name" when the object was new (one Event lists them all), an update records its own.
  Status ApplyObject(const ModelDeploymentSpec& md, const DesiredObject& desired, const Json& involved,
                     std::string* created);
  // Deletes owned objects nothing asks for any more; removed versions only after the drain.
  Status PruneObjects(const ModelDeploymentSpec& md, const DesiredState& desired, const Json& involved,
                      ObservedState* observed, std::chrono::seconds* requeue_after);
  // Asks the server of one stuck pod per version why it is not ready (ObservedVersion::model_problem);
  // returns when to look again at pods not stuck long enough yet (0: no need).
  std::chrono::seconds DiagnoseStuckVersions(const ModelDeploymentSpec& md, ObservedState* observed);
  Status WriteStatus(const Json& object, const Json& status);
  void ReadPrometheusQps(const ModelDeploymentSpec& md, const Json& involved, Plan* plan);
  void RecordConditionEvents(const Json& involved, const Json& old_status, const Json& new_status);

  k8s::Client& client_;
  k8s::EventRecorder& events_;
  OperatorMetrics& metrics_;
  const ControllerOptions options_;
  std::unique_ptr<k8s::Informer> model_deployments_;
  std::vector<Owned> owned_;
  std::unique_ptr<k8s::WorkQueue> queue_;
  std::unique_ptr<k8s::WorkerPool> workers_;
  std::jthread depth_reporter_;
  // The autoscaler's recent recommendations per "ns/name/version" (lost on restart, which the
  // autoscaler handles by holding the current size).
  std::mutex history_mu_;
  // "resource/ns/name" -> the content digest our last apply of it returned (see ApplyObject).
  std::mutex applied_mu_;
  std::map<std::string, std::string> applied_digest_;
  std::map<std::string, std::deque<Recommendation>> history_;
};

// True when `object` has a controller owner reference to the ModelDeployment with `uid`.
bool IsControlledBy(const Json& object, const std::string& uid);

}  // namespace mf::op
