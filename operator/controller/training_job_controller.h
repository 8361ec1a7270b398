// The TrainingJob controller: informers on TrainingJobs and their pods, a work queue keyed by
// "namespace/name", and a reconcile that applies what trainingjob/lifecycle.h decides (create
// every pod with its headless Service at a gang start, delete pods to restart or clean up, delete
// the job after its TTL), hands a succeeded job's model to its ModelDeployment
// (trainingjob/handoff.h), and writes the status. A job with spec.hyperparameters is a study:
// trainingjob/study/study_reconcile.h handles it, and a change to a trial (a child TrainingJob)
// enqueues its study.
//
// Like controller-runtime's "expectations", it remembers the pods it just created or deleted and
// the status it just wrote, and waits for its caches to show them before deciding again, so a
// failed pod is never restarted twice because the cache was a moment behind.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "controller/operator_metrics.h"
#include "k8s/client.h"
#include "k8s/event_recorder.h"
#include "k8s/informer.h"
#include "k8s/work_queue.h"
#include "trainingjob/cluster_env.h"
#include "trainingjob/lifecycle.h"

namespace mf::op {

using Json = nlohmann::json;

struct TrainingControllerOptions {
  std::string watch_namespace;  // "" = all namespaces
  int workers = 2;
  std::chrono::seconds resync{300};
  std::string cluster_domain;  // appended after ".svc" in TF_CONFIG addresses (Kubeflow's CUSTOM_CLUSTER_DOMAIN)
};

// Nodes with this label ("shared") run pods in one network namespace (modelfleet-local's node
// agent sets it): each task of a job gets a port of its own there.
inline constexpr const char* kPodNetworkLabel = "modelfleet.io/pod-network";

class TrainingJobController {
 public:
  TrainingJobController(k8s::Client& client, k8s::EventRecorder& events, OperatorMetrics& metrics,
                        TrainingControllerOptions options);
  ~TrainingJobController();

  Status Start(std::chrono::milliseconds sync_timeout = std::chrono::seconds(60));
  void Stop();

  k8s::ReconcileResult Reconcile(const std::string& key);

 private:
  // What this controller did to a job that its caches may not show yet.
  struct Expectation {
    std::map<std::string, std::string> deleted;   // pod name -> uid
    std::set<std::string> created;                // pod names
    int64_t status_version = 0;                   // resourceVersion of the status written
    std::chrono::steady_clock::time_point until;  // after this, stop waiting
  };

  void Enqueue(const k8s::ObjectPtr& object);
  bool CacheCaughtUp(const std::string& key, const Json& job);
  // At a gang start: whether the pods fit (empty: yes), the model version and the network.
  Status PrepareStart(const training::TrainingJobSpec& spec, Json* status, std::string* gang_problem);
  Status Apply(const training::TrainingJobSpec& spec, const training::ClusterEnvOptions& env,
               const training::LifecycleDecision& d, const Json& involved, Expectation* expect);
  // Adds the model of a succeeded job to its ModelDeployment, once (status.handoff).
  Status HandOff(const training::TrainingJobSpec& spec, Json* status, const Json& involved);
  StatusOr<int64_t> WriteStatus(const Json& object, const Json& status);

  k8s::Client& client_;
  k8s::EventRecorder& events_;
  OperatorMetrics& metrics_;
  const TrainingControllerOptions options_;
  std::unique_ptr<k8s::Informer> jobs_;
  std::unique_ptr<k8s::Informer> pods_;
  std::unique_ptr<k8s::WorkQueue> queue_;
  std::unique_ptr<k8s::WorkerPool> workers_;
  std::mutex expect_mu_;
  std::map<std::string, Expectation> expectations_;
};

}  // namespace mf::op
