// The Kubernetes API client: typed-by-path CRUD on nlohmann::json objects, patches,
// server-side apply, subresources, pod logs and watches, with client-side rate limiting and
// retries of throttled (429) and unavailable (5xx) answers.
//
//   mf::k8s::Client client(transport, config);
//   auto pod = client.Get({resources::Pods(), "ml", "web-0"});
//   auto applied = client.Apply({resources::Deployments(), "ml", "web"}, desired, "modelfleet-operator");
//
// Thread-safe: one Client serves every controller in a process.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>

#include "common/status.h"
#include "k8s/config.h"
#include "k8s/rate_limit.h"
#include "k8s/resource.h"
#include "k8s/transport.h"

namespace mf::k8s {

using Json = nlohmann::json;

struct ClientOptions {
  // client-go's defaults are 5 QPS / burst 10; controllers usually raise them.
  double qps = 20;
  int burst = 40;
  // Retries of 429, 5xx and transport failures before the error is returned.
  int max_retries = 5;
  std::chrono::milliseconds backoff_base{200};
  std::chrono::milliseconds backoff_cap{10'000};
  std::chrono::milliseconds request_timeout{30'000};
  std::string user_agent = "modelfleet/0.1";
};

struct ListOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // "" = most recent (quorum read)
  int64_t limit = 0;             // 0 = no paging
  std::string continue_token;
};

struct WatchOptions {
  std::string label_selector;
  std::string field_selector;
  std::string resource_version;  // start after this version
  bool allow_bookmarks = true;
  // Server-side timeout; the server ends the watch after it and the caller re-watches.
  std::chrono::seconds timeout{300};
};

enum class WatchEventType { kAdded, kModified, kDeleted, kBookmark, kError };

struct WatchEvent {
  WatchEventType type;
  Json object;  // the object, or a Status object for kError
};

// Returns false to end the watch.
using WatchHandler = std::function<bool(WatchEvent&&)>;

enum class PatchType { kMerge, kJson, kStrategicMerge };

struct LogOptions {
  std::string container;
  std::optional<int64_t> tail_lines;
  std::optional<int64_t> since_seconds;
  bool previous = false;
  bool timestamps = false;
};

class Client {
 public:
  Client(std::shared_ptr<Transport> transport, ClusterConfig config, ClientOptions options = {});

  const ClusterConfig& config() const { return config_; }
  // The config's namespace, for callers that were given none.
  const std::string& default_namespace() const { return config_.ns; }

  // resource_version "0": any version the API server holds in its watch cache (no quorum read
  // from etcd; may lag by moments), as client-go's informers list; "" = the most recent.
  StatusOr<Json> Get(const ResourceRef& ref, const std::string& resource_version = "");
  // Follows `continue` tokens when options.limit > 0, returning one merged list whose
  // metadata.resourceVersion is the last page's.
  StatusOr<Json> List(const ResourceRef& collection, const ListOptions& options = {});
  // ref names the collection (ref.name empty) or the object (name must match the body).
  StatusOr<Json> Create(const ResourceRef& ref, const Json& object);
  // PUT; object.metadata.resourceVersion makes it a compare-and-swap (409 Conflict when stale).
  // ref.subresource "status" or "scale" updates that subresource.
  StatusOr<Json> Update(const ResourceRef& ref, const Json& object);
  StatusOr<Json> Patch(const ResourceRef& ref, PatchType type, const Json& patch);
  // Makes `status` the whole status of `object` (of `resource`) with one merge patch of its status
  // subresource: the fields of its current status that `status` lacks are sent as null, so they
  // are removed. The patched object, or nullopt without a request when the status is unchanged.
  StatusOr<std::optional<Json>> ReplaceStatus(const GroupVersionResource& resource, const Json& object,
                                              const Json& status);
  // Server-side apply: PATCH application/apply-patch+yaml (JSON is YAML) with fieldManager and
  // force, so the caller owns the fields it sets and conflicts with other managers are overridden
  // only when `force`.
  StatusOr<Json> Apply(const ResourceRef& ref, const Json& object, const std::string& field_manager, bool force = true);
  // Deletes; NotFound when already gone. `precondition_uid` guards against deleting a recreated object;
  // `grace_period_seconds` 0 is the kubelet's final delete of a pod whose containers have stopped.
  Status Delete(const ResourceRef& ref, const std::string& precondition_uid = "",
                std::optional<int64_t> grace_period_seconds = std::nullopt);
  // Pod logs as text (GET .../pods/NAME/log).
  StatusOr<std::string> Logs(const std::string& ns, const std::string& pod, const LogOptions& options = {});

  // Streams watch events of a collection until the server ends the stream (timeout), the
  // connection drops (both OK: re-watch from the last resourceVersion seen), `handler` returns
  // false, or `stop` is requested. An ERROR event becomes the returned Status (IsGone for 410).
  Status Watch(const ResourceRef& collection, const WatchOptions& options, const WatchHandler& handler,
               std::stop_token stop = {});

  // The raw call every method above goes through: rate limit, auth, retries, error mapping.
  // Returns the 2xx response body.
  StatusOr<std::string> Call(const std::string& method, const std::string& target, const std::string& body,
                             const std::string& content_type, std::stop_token stop = {});

 private:
  StatusOr<HttpRequest> NewRequest(const std::string& method, const std::string& target, const std::string& body,
                                   const std::string& content_type);
  StatusOr<Json> CallJson(const std::string& method, const std::string& target, const std::string& body,
                          const std::string& content_type);

  const std::shared_ptr<Transport> transport_;
  const ClusterConfig config_;
  const ClientOptions options_;
  TokenBucket limiter_;
};

// Runs `fn` (read the object, mutate, Update) again while it fails with a 409 Conflict, up to
// `attempts` times with a short backoff, like client-go's retry.RetryOnConflict. Each attempt
// must read the object afresh.
Status RetryOnConflict(const std::function<Status()>& fn, int attempts = 5,
                       std::chrono::milliseconds backoff = std::chrono::milliseconds(10));

// "ns/name" (or "name" for cluster-scoped objects): the key informers and work queues use.
std::string ObjectKey(const Json& object);
// metadata.resourceVersion, or "".
std::string ResourceVersion(const Json& object);
// object[key] when it is a string, else "" (never throws, whatever the server sent).
std::string StringAt(const Json& object, std::string_view key);
// object.metadata when it is an object, else an empty object.
const Json& MetadataOf(const Json& object);

}  // namespace mf::k8s
