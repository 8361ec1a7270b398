// An in-memory Kubernetes API server behind the Transport seam, for unit tests of the client,
// informers, leader election and events. It keeps real API semantics where the tests depend on
// them: one global resourceVersion counter, compare-and-swap updates (409 Conflict),
// AlreadyExists/NotFound Status bodies, watch streams that replay from a resourceVersion and
// answer 410 Gone (an ERROR event) once history was compacted, bookmarks, and
// status/scale/log subresources. Faults are injected explicitly: failed responses,
// dropped watch connections, compaction.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "k8s/transport.h"

namespace mf::k8s::testing {

class FakeApiServer : public Transport {
 public:
  StatusOr<HttpResponse> Send(const HttpRequest& request) override;
  StatusOr<HttpResponse> Stream(const HttpRequest& request, const ChunkHandler& on_chunk,
                                std::stop_token stop) override;

  // The next `count` unary requests (whose method matches, "" = any) answer `http_status`
  // with a Status body, and a Retry-After header when given.
  void FailNext(int count, int http_status, std::optional<int> retry_after_seconds = std::nullopt,
                const std::string& method = "");
  // Ends every open watch stream as a dropped connection would.
  void DropWatches();
  // Forgets the change history: watches from an older resourceVersion get 410 Gone.
  void Compact();
  // Sends a BOOKMARK with the current resourceVersion on every watch that asked for bookmarks.
  void SendBookmarks();
  // Splits every watch event line across two chunks (exercises the client's line reassembly).
  void set_split_chunks(bool split) { split_chunks_ = split; }
  void SetPodLog(const std::string& ns, const std::string& pod, const std::string& text);
  // While set, every request fails as if the connection were refused (a partition).
  void set_unavailable(bool unavailable);

  // Direct access for test setup and assertions, bypassing the request path.
  nlohmann::json Put(const std::string& collection_path, nlohmann::json object);
  // Deletes directly (a DELETED event); false when absent.
  bool Remove(const std::string& collection_path, const std::string& ns, const std::string& name);
  std::optional<nlohmann::json> Object(const std::string& collection_path, const std::string& ns,
                                       const std::string& name);
  int64_t resource_version();
  std::vector<HttpRequest> requests();
  int open_watches();

 private:
  struct Target {
    std::string collection;  // "/api/v1/pods", "/apis/apps/v1/deployments"
    std::string ns, name, subresource;
    std::map<std::string, std::string> query;
  };
  struct Event {
    int64_t rv;
    std::string collection, ns, type;
    nlohmann::json object;
  };
  struct Injected {
    std::string method;
    int status;
    std::optional<int> retry_after;
  };

  static StatusOr<Target> ParseTarget(const std::string& target);
  HttpResponse HandleLocked(const HttpRequest& request, const Target& t);
  nlohmann::json StoreLocked(const std::string& collection, nlohmann::json object, const std::string& type);
  HttpResponse Watch(const Target& t, const ChunkHandler& on_chunk, std::stop_token stop);

  std::mutex mu_;
  std::condition_variable_any cv_;
  int64_t rv_ = 100;
  int64_t compacted_rv_ = 0;
  int64_t uid_counter_ = 0;
  int drop_generation_ = 0;
  int bookmark_generation_ = 0;
  int open_watches_ = 0;
  bool split_chunks_ = false;
  bool unavailable_ = false;
  std::map<std::string, std::map<std::string, nlohmann::json>> objects_;  // collection -> ns/name -> object
  std::vector<Event> history_;
  std::deque<Injected> injected_;
  std::vector<HttpRequest> requests_;
  std::map<std::string, std::string> pod_logs_;
};

}  // namespace mf::k8s::testing
