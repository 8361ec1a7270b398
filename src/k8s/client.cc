#include "k8s/client.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/logging.h"
#include "k8s/api_error.h"

namespace mf::k8s {

namespace {

// Retry-After in seconds (the only form the API server sends); nullopt when absent or malformed.
std::optional<std::chrono::seconds> RetryAfter(const HttpResponse& r) {
  const std::string v = r.Header("retry-after");
  if (v.empty() || v.size() > 6 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::chrono::seconds(std::stoi(v));
}

// POST may have taken effect before a 5xx; it is retried only when the server says it was not
// processed (429, or Retry-After on 503). Every other verb here is idempotent.
bool Retriable(const std::string& method, const HttpResponse& r) {
  if (r.status == 429) return true;
  if (r.status < 500) return false;
  if (method != "POST") return true;
  return RetryAfter(r).has_value();
}

std::string AppendQuery(std::string target, const std::string& key, const std::string& value) {
  if (value.empty()) return target;
  target += target.find('?') == std::string::npos ? '?' : '&';
  return target + key + "=" + UrlEncode(value);
}

StatusOr<Json> ParseBody(const std::string& body, const std::string& what) {
  auto j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLoss(what + ": response is not JSON");
  return j;
}

StatusOr<WatchEventType> ParseEventType(const std::string& type) {
  if (type == "ADDED") return WatchEventType::kAdded;
  if (type == "MODIFIED") return WatchEventType::kModified;
  if (type == "DELETED") return WatchEventType::kDeleted;
  if (type == "BOOKMARK") return WatchEventType::kBookmark;
  if (type == "ERROR") return WatchEventType::kError;
  return DataLoss("watch event has unknown type '" + type + "'");
}

}  // namespace

Client::Client(std::shared_ptr<Transport> transport, ClusterConfig config, ClientOptions options)
    : transport_(std::move(transport)),
      config_(std::move(config)),
      options_(options),
      limiter_(options.qps, options.burst) {}

StatusOr<HttpRequest> Client::NewRequest(const std::string& method, const std::string& target, const std::string& body,
                                         const std::string& content_type) {
  HttpRequest request;
  request.method = method;
  request.target = target;
  request.body = body;
  request.timeout = options_.request_timeout;
  request.headers["Accept"] = "application/json";
  request.headers["User-Agent"] = options_.user_agent;
  if (!content_type.empty()) request.headers["Content-Type"] = content_type;
  if (config_.token) {
    // Fetched per request so a rotated service-account token is picked up without a restart.
    MF_ASSIGN_OR_RETURN(std::string token, config_.token->Token());
    request.headers["Authorization"] = "Bearer " + token;
  }
  return request;
}

StatusOr<std::string> Client::Call(const std::string& method, const std::string& target, const std::string& body,
                                   const std::string& content_type, std::stop_token stop) {
  const std::string what = method + " " + target;
  for (int attempt = 0;; ++attempt) {
    if (!limiter_.Wait(stop)) return Cancelled(what + ": cancelled");
    MF_ASSIGN_OR_RETURN(HttpRequest request, NewRequest(method, target, body, content_type));
    StatusOr<HttpResponse> response = transport_->Send(request);
    Clock::duration delay = ExponentialBackoff(options_.backoff_base, options_.backoff_cap, attempt);
    Status failure;
    if (!response.ok()) {
      failure = response.status().WithContext(what);
      // A connection failure on POST may still have created the object; let the caller decide.
      if (method == "POST" && response.status().code() != StatusCode::kUnavailable) return failure;
    } else if (response->status >= 200 && response->status < 300) {
      return std::move(response->body);
    } else {
      failure = StatusFromResponse(*response, what);
      if (!Retriable(method, *response)) return failure;
      if (auto after = RetryAfter(*response)) {
        delay = std::min<Clock::duration>(*after, options_.backoff_cap);
      }
    }
    if (attempt >= options_.max_retries) return failure;
    log::Warning("kubernetes request failed, retrying",
                 {{"request", what},
                  {"error", failure.message()},
                  {"attempt", std::to_string(attempt + 1)},
                  {"delay_ms", std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(delay).count())}});
    if (!SleepFor(delay, stop)) return Cancelled(what + ": cancelled");
  }
}

StatusOr<Json> Client::CallJson(const std::string& method, const std::string& target, const std::string& body,
                                const std::string& content_type) {
  MF_ASSIGN_OR_RETURN(std::string text, Call(method, target, body, content_type));
  return ParseBody(text, method + " " + target);
}

StatusOr<Json> Client::Get(const ResourceRef& ref, const std::string& resource_version) {
  if (ref.name.empty()) return InvalidArgument("Get needs an object name (use List for collections)");
  MF_ASSIGN_OR_RETURN(std::string path, ref.Path());
  return CallJson("GET", AppendQuery(path, "resourceVersion", resource_version), "", "");
}

StatusOr<Json> Client::List(const ResourceRef& collection, const ListOptions& options) {
  if (!collection.name.empty()) return InvalidArgument("List takes a collection, not object '" + collection.name + "'");
  MF_ASSIGN_OR_RETURN(std::string path, collection.Path());
  path = AppendQuery(path, "labelSelector", options.label_selector);
  path = AppendQuery(path, "fieldSelector", options.field_selector);
  path = AppendQuery(path, "resourceVersion", options.resource_version);
  if (options.limit > 0) path = AppendQuery(path, "limit", std::to_string(options.limit));
  Json merged;
  std::string continue_token = options.continue_token;
  while (true) {
    MF_ASSIGN_OR_RETURN(Json page, CallJson("GET", AppendQuery(path, "continue", continue_token), "", ""));
    if (!page.is_object() || !page.contains("items") || !page["items"].is_array()) {
      return DataLoss("LIST " + path + ": response has no items array");
    }
    if (merged.is_null()) {
      merged = std::move(page);
    } else {
      for (auto& item : page["items"]) merged["items"].push_back(std::move(item));
      merged["metadata"] = MetadataOf(page);
    }
    continue_token = StringAt(MetadataOf(merged), "continue");
    if (options.limit <= 0 || continue_token.empty()) break;
  }
  if (merged.contains("metadata") && merged["metadata"].is_object()) merged["metadata"].erase("continue");
  return merged;
}

StatusOr<Json> Client::Create(const ResourceRef& ref, const Json& object) {
  if (!object.is_object()) return InvalidArgument("Create needs a JSON object");
  ResourceRef collection = ref;
  if (!ref.name.empty()) {
    const std::string name = StringAt(MetadataOf(object), "name");
    if (!name.empty() && name != ref.name) {
      return InvalidArgument("Create: metadata.name does not match '" + ref.name + "'");
    }
    collection.name.clear();
  }
  MF_ASSIGN_OR_RETURN(std::string path, collection.Path());
  return CallJson("POST", path, object.dump(), "application/json");
}

StatusOr<Json> Client::Update(const ResourceRef& ref, const Json& object) {
  if (ref.name.empty()) return InvalidArgument("Update needs an object name");
  if (!object.is_object()) return InvalidArgument("Update needs a JSON object");
  MF_ASSIGN_OR_RETURN(std::string path, ref.Path());
  return CallJson("PUT", path, object.dump(), "application/json");
}

StatusOr<Json> Client::Patch(const ResourceRef& ref, PatchType type, const Json& patch) {
  if (ref.name.empty()) return InvalidArgument("Patch needs an object name");
  if (type == PatchType::kJson && !patch.is_array())
    return InvalidArgument("a JSON patch must be an array of operations");
  if (type != PatchType::kJson && !patch.is_object()) return InvalidArgument("a merge patch must be a JSON object");
  MF_ASSIGN_OR_RETURN(std::string path, ref.Path());
  const char* content_type = type == PatchType::kJson    ? "application/json-patch+json"
                             : type == PatchType::kMerge ? "application/merge-patch+json"
                                                         : "application/strategic-merge-patch+json";
  return CallJson("PATCH", path, patch.dump(), content_type);
}

StatusOr<std::optional<Json>> Client::ReplaceStatus(const GroupVersionResource& resource, const Json& object,
                                                    const Json& status) {
  const Json old_status = object.value("status", Json::object());
  if (old_status == status) return std::optional<Json>();
  Json patch_status = status;
  if (old_status.is_object()) {
    for (const auto& [key, value] : old_status.items()) {
      if (!status.contains(key)) patch_status[key] = nullptr;  // merge patch: null removes
    }
  }
  const ResourceRef ref{resource, StringAt(MetadataOf(object), "namespace"), StringAt(MetadataOf(object), "name"),
                        "status"};
  MF_ASSIGN_OR_RETURN(Json patched, Patch(ref, PatchType::kMerge, Json{{"status", patch_status}}));
  return std::optional<Json>(std::move(patched));
}

StatusOr<Json> Client::Apply(const ResourceRef& ref, const Json& object, const std::string& field_manager, bool force) {
  if (ref.name.empty()) return InvalidArgument("Apply needs an object name");
  if (field_manager.empty()) return InvalidArgument("server-side apply needs a field manager");
  if (!object.is_object() || !object.contains("apiVersion") || !object.contains("kind")) {
    return InvalidArgument("server-side apply needs an object with apiVersion and kind");
  }
  MF_ASSIGN_OR_RETURN(std::string path, ref.Path());
  path = AppendQuery(path, "fieldManager", field_manager);
  if (force) path = AppendQuery(path, "force", "true");
  return CallJson("PATCH", path, object.dump(), "application/apply-patch+yaml");
}

Status Client::Delete(const ResourceRef& ref, const std::string& precondition_uid,
                      std::optional<int64_t> grace_period_seconds) {
  if (ref.name.empty()) return InvalidArgument("Delete needs an object name");
  MF_ASSIGN_OR_RETURN(std::string path, ref.Path());
  std::string body;
  if (!precondition_uid.empty() || grace_period_seconds) {
    Json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
    if (!precondition_uid.empty()) options["preconditions"] = {{"uid", precondition_uid}};
    if (grace_period_seconds) options["gracePeriodSeconds"] = *grace_period_seconds;
    body = options.dump();
  }
  auto result = Call("DELETE", path, body, body.empty() ? "" : "application/json");
  return result.ok() ? Status::Ok() : result.status();
}

StatusOr<std::string> Client::Logs(const std::string& ns, const std::string& pod, const LogOptions& options) {
  MF_ASSIGN_OR_RETURN(std::string path, (ResourceRef{resources::Pods(), ns, pod, "log"}).Path());
  path = AppendQuery(path, "container", options.container);
  if (options.tail_lines) path = AppendQuery(path, "tailLines", std::to_string(*options.tail_lines));
  if (options.since_seconds) path = AppendQuery(path, "sinceSeconds", std::to_string(*options.since_seconds));
  if (options.previous) path = AppendQuery(path, "previous", "true");
  if (options.timestamps) path = AppendQuery(path, "timestamps", "true");
  return Call("GET", path, "", "");
}

Status Client::Watch(const ResourceRef& collection, const WatchOptions& options, const WatchHandler& handler,
                     std::stop_token stop) {
  if (!collection.name.empty())
    return InvalidArgument("Watch takes a collection, not object '" + collection.name + "'");
  MF_ASSIGN_OR_RETURN(std::string path, collection.Path());
  path = AppendQuery(path, "watch", "true");
  path = AppendQuery(path, "resourceVersion", options.resource_version);
  path = AppendQuery(path, "labelSelector", options.label_selector);
  path = AppendQuery(path, "fieldSelector", options.field_selector);
  if (options.allow_bookmarks) path = AppendQuery(path, "allowWatchBookmarks", "true");
  path = AppendQuery(path, "timeoutSeconds", std::to_string(options.timeout.count()));
  const std::string what = "WATCH " + path;

  if (!limiter_.Wait(stop)) return Cancelled(what + ": cancelled");
  MF_ASSIGN_OR_RETURN(HttpRequest request, NewRequest("GET", path, "", ""));
  // The server sends nothing while nothing changes; allow silence up to its own timeout.
  request.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout) + options_.request_timeout;

  std::string pending;  // bytes after the last newline
  Status result;
  bool received = false;
  const auto on_chunk = [&](std::string_view chunk) {
    received = true;
    pending.append(chunk);
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1) {
      const std::string_view line(pending.data() + start, nl - start);
      if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
      Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (!j.is_object() || !j.contains("type") || !j["type"].is_string() || !j.contains("object")) {
        result = DataLoss(what + ": malformed watch event");
        return false;
      }
      auto type = ParseEventType(j["type"].get<std::string>());
      if (!type.ok()) {
        result = type.status().WithContext(what);
        return false;
      }
      if (*type == WatchEventType::kError) {
        result = StatusFromStatusObject(j["object"].dump(), what);
        return false;
      }
      if (!handler(WatchEvent{*type, std::move(j["object"])})) return false;
    }
    pending.erase(0, start);
    return true;
  };
  StatusOr<HttpResponse> response = transport_->Stream(request, on_chunk, stop);
  if (!response.ok()) {
    // A connection that drops after events flowed ends the watch like a server timeout: the
    // caller re-watches from the last version it saw. Failing to connect at all is an error,
    // so the caller backs off instead of spinning.
    // (A connection cut mid-chunk reads as DataLoss; the partial line is simply dropped, since
    // the resume point is the last complete event.)
    const StatusCode code = response.status().code();
    if (received &&
        (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded || code == StatusCode::kDataLoss)) {
      return Status::Ok();
    }
    if (stop.stop_requested()) return Cancelled(what + ": cancelled");
    return response.status().WithContext(what);
  }
  if (response->status < 200 || response->status >= 300) return StatusFromResponse(*response, what);
  return result;
}

Status RetryOnConflict(const std::function<Status()>& fn, int attempts, std::chrono::milliseconds backoff) {
  Status s;
  for (int i = 0; i < std::max(1, attempts); ++i) {
    s = fn();
    if (!IsConflict(s)) return s;
    std::this_thread::sleep_for(ExponentialBackoff(backoff, std::chrono::seconds(1), i));
  }
  return s;
}

std::string StringAt(const Json& object, std::string_view key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

const Json& MetadataOf(const Json& object) {
  static const Json kEmpty = Json::object();
  if (!object.is_object()) return kEmpty;
  auto it = object.find("metadata");
  return it != object.end() && it->is_object() ? *it : kEmpty;
}

std::string ObjectKey(const Json& object) {
  const Json& meta = MetadataOf(object);
  const std::string name = StringAt(meta, "name");
  if (name.empty()) return "";
  const std::string ns = StringAt(meta, "namespace");
  return ns.empty() ? name : ns + "/" + name;
}

std::string ResourceVersion(const Json& object) { return StringAt(MetadataOf(object), "resourceVersion"); }

}  // namespace mf::k8s
