// The Kubernetes REST API over the local store: discovery, OpenAPI, CRUD with resourceVersion
// conflicts, list with selectors and Table output, watch streams with bookmarks and 410, the
// status / scale / log subresources (log with follow streams), merge / JSON / strategic-merge patch, server-side apply,
// and CRDs whose resources appear as soon as the CRD is stored.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "http/server.h"
#include "tools/local/apiserver/resources.h"
#include "tools/local/store/store.h"

namespace mf::local {

struct PodLogRequest {
  std::string ns;
  std::string pod;
  std::string container;
  bool previous = false;  // the instance before the last restart
};

struct ApiServerOptions {
  // What /api reports as the server address ("127.0.0.1:PORT").
  std::string server_address = "127.0.0.1";
  // pods/log: where the local kubelet writes a container's output. Unset: pods/log answers 400
  // "no kubelet".
  std::function<std::filesystem::path(const PodLogRequest&)> pod_log_path;
  // The longest a watch stays open without timeoutSeconds (kube-apiserver: 30-60 minutes).
  std::chrono::seconds max_watch_duration{1800};
};

class ApiServer {
 public:
  ApiServer(Store* store, ApiServerOptions options);
  ~ApiServer();  // ends every watch and joins its thread
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Registers the built-in types and every stored CRD's resources with the store.
  Status Start();
  http::Handler Handler();
  ResourceCatalog& catalog() { return catalog_; }

 private:
  struct Call;
  void Handle(http::Request request, http::Responder responder);
  void HandleUnchecked(http::Request request, http::Responder responder);
  http::Response Serve(Call& call);
  http::Response ServeResource(Call& call);
  http::Response ServeResourceValidated(Call& call);
  http::Response Collection(Call& call);
  http::Response Object(Call& call);
  http::Response Scale(Call& call);
  http::Response PodLog(Call& call);
  // pods/log with follow=true for a running container: streams until it exits.
  void StartLogFollow(Call& call, http::Responder responder);
  // Runs `body` on a thread of its own that ~ApiServer stops with `stop` and joins.
  void RunStreamThread(std::function<void()> body, std::function<void()> stop);
  http::Response Patch(Call& call, Subresource sub);
  http::Response Apply(Call& call);
  void StartWatch(Call& call, http::Responder responder);
  // Re-reads CRD `name` and (un)registers the resources it defines.
  void SyncCrd(const std::string& name);

  Store* store_;
  ApiServerOptions options_;
  ResourceCatalog catalog_;
  std::mutex crd_mu_;  // serializes SyncCrd

  // Watches and log follows: one thread each, reaped when they end.
  struct StreamThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
    std::function<void()> stop;
  };
  std::mutex streams_mu_;
  std::list<StreamThread> streams_;
  std::atomic<bool> stopping_{false};
};

}  // namespace mf::local
