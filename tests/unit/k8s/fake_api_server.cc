#include "tests/unit/k8s/fake_api_server.h"

#include <sstream>

namespace mf::k8s::testing {

using Json = nlohmann::json;

namespace {

std::string PercentDecode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

HttpResponse StatusResponse(int code, const std::string& reason, const std::string& message) {
  HttpResponse r;
  r.status = code;
  r.headers["content-type"] = "application/json";
  r.body = Json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                {"reason", reason}, {"message", message}, {"code", code}}
               .dump();
  return r;
}

HttpResponse JsonResponse(int code, const Json& body) {
  HttpResponse r;
  r.status = code;
  r.headers["content-type"] = "application/json";
  r.body = body.dump();
  return r;
}

std::string Key(const std::string& ns, const std::string& name) { return ns.empty() ? name : ns + "/" + name; }

std::string RvOf(const Json& o) {
  return o.contains("metadata") && o["metadata"].contains("resourceVersion")
             ? o["metadata"]["resourceVersion"].get<std::string>()
             : "";
}

}  // namespace

StatusOr<FakeApiServer::Target> FakeApiServer::ParseTarget(const std::string& target) {
  Target t;
  const auto q = target.find('?');
  const std::string path = target.substr(0, q);
  if (q != std::string::npos) {
    std::stringstream in(target.substr(q + 1));
    for (std::string kv; std::getline(in, kv, '&');) {
      const auto eq = kv.find('=');
      t.query[kv.substr(0, eq)] = eq == std::string::npos ? "" : PercentDecode(kv.substr(eq + 1));
    }
  }
  std::vector<std::string> segs;
  std::stringstream in(path);
  for (std::string seg; std::getline(in, seg, '/');) {
    if (!seg.empty()) segs.push_back(seg);
  }
  size_t i;
  if (segs.size() >= 2 && segs[0] == "api") {
    t.collection = "/api/" + segs[1];
    i = 2;
  } else if (segs.size() >= 3 && segs[0] == "apis") {
    t.collection = "/apis/" + segs[1] + "/" + segs[2];
    i = 3;
  } else {
    return NotFound("no such API path " + path);
  }
  if (segs.size() >= i + 3 && segs[i] == "namespaces") {
    t.ns = segs[i + 1];
    i += 2;
  }
  if (i >= segs.size()) return NotFound("no resource in " + path);
  t.collection += "/" + segs[i++];
  if (i < segs.size()) t.name = segs[i++];
  if (i < segs.size()) t.subresource = segs[i++];
  if (i < segs.size()) return NotFound("path too long: " + path);
  return t;
}

void FakeApiServer::FailNext(int count, int http_status, std::optional<int> retry_after, const std::string& method) {
  std::lock_guard lock(mu_);
  for (int i = 0; i < count; ++i) injected_.push_back({method, http_status, retry_after});
}

void FakeApiServer::DropWatches() {
  std::lock_guard lock(mu_);
  ++drop_generation_;
  cv_.notify_all();
}

void FakeApiServer::Compact() {
  std::lock_guard lock(mu_);
  compacted_rv_ = rv_;
  history_.clear();
}

void FakeApiServer::SendBookmarks() {
  std::lock_guard lock(mu_);
  ++bookmark_generation_;
  cv_.notify_all();
}

void FakeApiServer::SetPodLog(const std::string& ns, const std::string& pod, const std::string& text) {
  std::lock_guard lock(mu_);
  pod_logs_[Key(ns, pod)] = text;
}

void FakeApiServer::set_unavailable(bool unavailable) {
  std::lock_guard lock(mu_);
  unavailable_ = unavailable;
}

int64_t FakeApiServer::resource_version() {
  std::lock_guard lock(mu_);
  return rv_;
}

std::vector<HttpRequest> FakeApiServer::requests() {
  std::lock_guard lock(mu_);
  return requests_;
}

int FakeApiServer::open_watches() {
  std::lock_guard lock(mu_);
  return open_watches_;
}

Json FakeApiServer::Put(const std::string& collection_path, Json object) {
  std::lock_guard lock(mu_);
  const std::string key = Key(object["metadata"].value("namespace", ""), object["metadata"]["name"]);
  const bool exists = objects_[collection_path].count(key) > 0;
  return StoreLocked(collection_path, std::move(object), exists ? "MODIFIED" : "ADDED");
}

bool FakeApiServer::Remove(const std::string& collection_path, const std::string& ns, const std::string& name) {
  std::lock_guard lock(mu_);
  auto& objects = objects_[collection_path];
  auto it = objects.find(Key(ns, name));
  if (it == objects.end()) return false;
  StoreLocked(collection_path, it->second, "DELETED");
  return true;
}

std::optional<Json> FakeApiServer::Object(const std::string& collection_path, const std::string& ns,
                                          const std::string& name) {
  std::lock_guard lock(mu_);
  auto& objects = objects_[collection_path];
  auto it = objects.find(Key(ns, name));
  if (it == objects.end()) return std::nullopt;
  return it->second;
}

Json FakeApiServer::StoreLocked(const std::string& collection, Json object, const std::string& type) {
  Json& meta = object["metadata"];
  meta["resourceVersion"] = std::to_string(++rv_);
  const std::string key = Key(meta.value("namespace", ""), meta["name"].get<std::string>());
  if (type == "ADDED") {
    meta["uid"] = "uid-" + std::to_string(++uid_counter_);
    meta["creationTimestamp"] = "2026-11-22T20:00:00Z";
  }
  if (type == "DELETED") {
    objects_[collection].erase(key);
  } else {
    objects_[collection][key] = object;
  }
  history_.push_back({rv_, collection, meta.value("namespace", ""), type, object});
  cv_.notify_all();
  return object;
}

StatusOr<HttpResponse> FakeApiServer::Send(const HttpRequest& request) {
  std::lock_guard lock(mu_);
  requests_.push_back(request);
  if (unavailable_) return Unavailable("connection refused");
  for (auto it = injected_.begin(); it != injected_.end(); ++it) {
    if (!it->method.empty() && it->method != request.method) continue;
    HttpResponse r = StatusResponse(it->status, it->status == 429 ? "TooManyRequests" : "InternalError",
                                    "injected failure " + std::to_string(it->status));
    if (it->retry_after) r.headers["retry-after"] = std::to_string(*it->retry_after);
    injected_.erase(it);
    return r;
  }
  auto target = ParseTarget(request.target);
  if (!target.ok()) return StatusResponse(404, "NotFound", target.status().message());
  return HandleLocked(request, *target);
}

HttpResponse FakeApiServer::HandleLocked(const HttpRequest& request, const Target& t) {
  auto& objects = objects_[t.collection];
  const std::string key = Key(t.ns, t.name);
  const std::string what = t.collection.substr(t.collection.rfind('/') + 1) + " \"" + t.name + "\"";
  const std::string& m = request.method;

  if (t.name.empty()) {
    if (m == "GET") {
      Json items = Json::array();
      for (const auto& [k, o] : objects) {
        if (t.ns.empty() || o["metadata"].value("namespace", "") == t.ns) items.push_back(o);
      }
      return JsonResponse(200, {{"kind", "List"},
                                {"apiVersion", "v1"},
                                {"metadata", {{"resourceVersion", std::to_string(rv_)}}},
                                {"items", items}});
    }
    if (m == "POST") {
      Json body = Json::parse(request.body, nullptr, false);
      if (!body.is_object() || !body.contains("metadata") || !body["metadata"].contains("name")) {
        return StatusResponse(422, "Invalid", "metadata.name: Required value");
      }
      if (!t.ns.empty()) body["metadata"]["namespace"] = t.ns;
      const std::string name = body["metadata"]["name"];
      if (objects.count(Key(t.ns, name))) {
        return StatusResponse(409, "AlreadyExists",
                              t.collection.substr(t.collection.rfind('/') + 1) + " \"" + name + "\" already exists");
      }
      return JsonResponse(201, StoreLocked(t.collection, std::move(body), "ADDED"));
    }
    return StatusResponse(405, "MethodNotAllowed", m + " not allowed on a collection");
  }

  if (t.subresource == "log") {
    auto it = pod_logs_.find(key);
    if (it == pod_logs_.end()) return StatusResponse(404, "NotFound", "pods \"" + t.name + "\" not found");
    HttpResponse r;
    r.status = 200;
    r.body = it->second;
    return r;
  }
  auto it = objects.find(key);
  if (m == "PATCH" && it == objects.end() && request.headers.count("Content-Type") &&
      request.headers.at("Content-Type") == "application/apply-patch+yaml") {
    if (!t.query.count("fieldManager")) return StatusResponse(422, "Invalid", "fieldManager is required for apply");
    Json body = Json::parse(request.body, nullptr, false);
    body["metadata"]["namespace"] = t.ns;
    return JsonResponse(201, StoreLocked(t.collection, std::move(body), "ADDED"));
  }
  if (it == objects.end()) return StatusResponse(404, "NotFound", what + " not found");
  Json current = it->second;

  if (t.subresource == "scale") {
    if (m == "GET") {
      const int replicas = current["spec"].value("replicas", 1);
      return JsonResponse(200,
                          {{"kind", "Scale"},
                           {"apiVersion", "autoscaling/v1"},
                           {"metadata", {{"name", t.name}, {"namespace", t.ns}, {"resourceVersion", RvOf(current)}}},
                           {"spec", {{"replicas", replicas}}},
                           {"status", {{"replicas", replicas}}}});
    }
    if (m == "PUT") {
      Json body = Json::parse(request.body, nullptr, false);
      if (RvOf(body) != "" && RvOf(body) != RvOf(current)) {
        return StatusResponse(409, "Conflict",
                              "Operation cannot be fulfilled on " + what +
                                  ": the object has been modified; please apply your changes to "
                                  "the latest version and try again");
      }
      current["spec"]["replicas"] = body["spec"]["replicas"];
      Json stored = StoreLocked(t.collection, current, "MODIFIED");
      return JsonResponse(200, {{"kind", "Scale"},
                                {"spec", {{"replicas", stored["spec"]["replicas"]}}},
                                {"metadata", {{"resourceVersion", RvOf(stored)}}}});
    }
  }
  if (m == "GET") return JsonResponse(200, current);
  if (m == "DELETE") {
    Json body = Json::parse(request.body.empty() ? "{}" : request.body, nullptr, false);
    if (body.contains("preconditions") && body["preconditions"].value("uid", "") != current["metadata"]["uid"]) {
      return StatusResponse(409, "Conflict", "Precondition failed: UID in precondition does not match");
    }
    StoreLocked(t.collection, current, "DELETED");
    return JsonResponse(200, {{"kind", "Status"}, {"status", "Success"}});
  }
  if (m == "PUT") {
    Json body = Json::parse(request.body, nullptr, false);
    if (!body.is_object()) return StatusResponse(400, "BadRequest", "body is not a JSON object");
    if (RvOf(body) != "" && RvOf(body) != RvOf(current)) {
      return StatusResponse(409, "Conflict",
                            "Operation cannot be fulfilled on " + what +
                                ": the object has been modified; please apply your changes to the "
                                "latest version and try again");
    }
    Json next = current;
    if (t.subresource == "status") {
      next["status"] = body.value("status", Json::object());
    } else {
      next = body;
      next["metadata"]["uid"] = current["metadata"]["uid"];
      next["metadata"]["namespace"] = t.ns;
      if (current.contains("status")) next["status"] = current["status"];  // status only via /status
    }
    return JsonResponse(200, StoreLocked(t.collection, next, "MODIFIED"));
  }
  if (m == "PATCH") {
    const std::string type = request.headers.count("Content-Type") ? request.headers.at("Content-Type") : "";
    Json patch = Json::parse(request.body, nullptr, false);
    if (patch.is_discarded()) return StatusResponse(400, "BadRequest", "patch is not JSON");
    Json next = current;
    try {
      if (type == "application/json-patch+json") {
        next = current.patch(patch);
      } else if (type == "application/merge-patch+json" || type == "application/strategic-merge-patch+json" ||
                 type == "application/apply-patch+yaml") {
        if (type == "application/apply-patch+yaml" && !t.query.count("fieldManager")) {
          return StatusResponse(422, "Invalid", "fieldManager is required for apply");
        }
        next.merge_patch(patch);
      } else {
        return StatusResponse(415, "UnsupportedMediaType", "the body of the request was in an unknown format");
      }
    } catch (const Json::exception& e) {
      return StatusResponse(422, "Invalid", std::string("the patch could not be applied: ") + e.what());
    }
    next["metadata"]["resourceVersion"] = RvOf(current);
    return JsonResponse(200, StoreLocked(t.collection, next, "MODIFIED"));
  }
  return StatusResponse(405, "MethodNotAllowed", m + " is not supported");
}

StatusOr<HttpResponse> FakeApiServer::Stream(const HttpRequest& request, const ChunkHandler& on_chunk,
                                             std::stop_token stop) {
  StatusOr<Target> target = ParseTarget(request.target);
  {
    std::lock_guard lock(mu_);
    requests_.push_back(request);
    if (unavailable_) return Unavailable("connection refused");
    for (auto it = injected_.begin(); it != injected_.end(); ++it) {
      if (!it->method.empty() && it->method != request.method) continue;
      HttpResponse r = StatusResponse(it->status, "InternalError", "injected failure");
      if (it->retry_after) r.headers["retry-after"] = std::to_string(*it->retry_after);
      injected_.erase(it);
      return r;
    }
  }
  if (!target.ok()) return StatusResponse(404, "NotFound", target.status().message());
  if (target->query["watch"] != "true") return StatusResponse(400, "BadRequest", "fake streams only watches");
  HttpResponse r = Watch(*target, on_chunk, stop);
  if (r.status == -1) return Unavailable("connection reset by peer");
  return r;
}

HttpResponse FakeApiServer::Watch(const Target& t, const ChunkHandler& on_chunk, std::stop_token stop) {
  std::unique_lock lock(mu_);
  const int64_t from = t.query.count("resourceVersion") && !t.query.at("resourceVersion").empty()
                           ? std::stoll(t.query.at("resourceVersion"))
                           : rv_;
  const bool bookmarks = t.query.count("allowWatchBookmarks") && t.query.at("allowWatchBookmarks") == "true";
  const int timeout_s = t.query.count("timeoutSeconds") ? std::stoi(t.query.at("timeoutSeconds")) : 1800;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  const int drop_generation = drop_generation_;
  int bookmark_generation = bookmark_generation_;
  ++open_watches_;
  struct Closer {
    int& n;
    ~Closer() { --n; }
  } closer{open_watches_};

  // Writes one event line with the lock released (the handler may call back into us).
  const auto send = [&](const Json& event) {
    std::string line = event.dump() + "\n";
    const bool split = split_chunks_;
    lock.unlock();
    bool more;
    if (split && line.size() > 2) {
      more = on_chunk(std::string_view(line).substr(0, line.size() / 2)) &&
             on_chunk(std::string_view(line).substr(line.size() / 2));
    } else {
      more = on_chunk(line);
    }
    lock.lock();
    return more;
  };
  HttpResponse ok;
  ok.status = 200;
  if (from < compacted_rv_) {
    send({{"type", "ERROR"},
          {"object",
           {{"kind", "Status"},
            {"apiVersion", "v1"},
            {"status", "Failure"},
            {"reason", "Expired"},
            {"message",
             "too old resource version: " + std::to_string(from) + " (" + std::to_string(compacted_rv_) + ")"},
            {"code", 410}}}});
    return ok;
  }
  int64_t sent = from;
  while (true) {
    for (size_t i = 0; i < history_.size() && drop_generation_ == drop_generation; ++i) {
      const Event e = history_[i];
      if (e.rv <= sent || e.collection != t.collection || (!t.ns.empty() && e.ns != t.ns)) continue;
      sent = e.rv;
      if (!send({{"type", e.type}, {"object", e.object}})) return ok;
    }
    if (!history_.empty()) sent = std::max(sent, history_.back().rv);
    if (drop_generation_ != drop_generation) {
      ok.status = -1;  // the caller sees a transport failure, like a reset connection
      return ok;
    }
    if (bookmarks && bookmark_generation != bookmark_generation_) {
      bookmark_generation = bookmark_generation_;
      if (!send({{"type", "BOOKMARK"},
                 {"object", {{"kind", "Bookmark"}, {"metadata", {{"resourceVersion", std::to_string(rv_)}}}}}})) {
        return ok;
      }
      continue;
    }
    if (stop.stop_requested() || std::chrono::steady_clock::now() >= deadline) return ok;
    const int64_t seen_rv = rv_;
    cv_.wait_until(lock, stop, deadline, [&] {
      return rv_ != seen_rv || drop_generation_ != drop_generation || bookmark_generation != bookmark_generation_;
    });
  }
}

}  // namespace mf::k8s::testing
