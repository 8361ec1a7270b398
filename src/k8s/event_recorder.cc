#include "k8s/event_recorder.h"

#include <ctime>

#include "common/logging.h"
#include "k8s/api_error.h"

namespace mf::k8s {

namespace {

std::string Rfc3339Seconds(std::chrono::system_clock::time_point t) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string StringAt(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

EventRecorder::EventRecorder(Client& client, Options options) : client_(client), options_(std::move(options)) {
  thread_ = std::thread([this] { Run(); });
}

EventRecorder::~EventRecorder() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  thread_.join();
}

Status EventRecorder::Record(const Json& involved, EventType type, const std::string& reason,
                             const std::string& message) {
  if (!involved.is_object() || !involved.contains("metadata") || !involved["metadata"].is_object()) {
    return InvalidArgument("event: the involved object has no metadata");
  }
  const Json& meta = involved["metadata"];
  Pending p;
  p.involved_ref = {{"kind", StringAt(involved, "kind")},
                    {"apiVersion", StringAt(involved, "apiVersion")},
                    {"name", StringAt(meta, "name")}};
  if (p.involved_ref["kind"] == "" || p.involved_ref["name"] == "") {
    return InvalidArgument("event: the involved object needs kind and metadata.name");
  }
  for (const char* key : {"namespace", "uid", "resourceVersion"}) {
    if (std::string v = StringAt(meta, key); !v.empty()) p.involved_ref[key] = v;
  }
  if (reason.empty()) return InvalidArgument("event: reason must not be empty (UpperCamelCase, e.g. ScaledUp)");
  // Events of cluster-scoped objects live in "default", as kubectl expects.
  p.ns = StringAt(meta, "namespace").empty() ? "default" : StringAt(meta, "namespace");
  p.type = type == EventType::kWarning ? "Warning" : "Normal";
  p.reason = reason;
  p.message = message.size() > 1024 ? message.substr(0, 1024) : message;  // the API server's cap
  p.when = std::chrono::system_clock::now();
  std::lock_guard lock(mu_);
  if (stopping_) return FailedPrecondition("event recorder is shutting down");
  if (queue_.size() >= options_.max_queued) {
    return ResourceExhausted("event queue full (" + std::to_string(options_.max_queued) + "); event dropped");
  }
  queue_.push_back(std::move(p));
  cv_.notify_one();
  return Status::Ok();
}

void EventRecorder::Flush() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && !writing_; });
}

void EventRecorder::Run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) break;  // stopping, and everything written
    Pending p = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    lock.unlock();
    Write(p);
    lock.lock();
    writing_ = false;
    if (queue_.empty()) idle_cv_.notify_all();
  }
  idle_cv_.notify_all();
}

void EventRecorder::Remember(const std::string& key, Aggregate aggregate) {
  if (auto it = aggregates_.find(key); it != aggregates_.end()) {
    lru_.erase(it->second.lru);
    aggregates_.erase(it);
  }
  lru_.push_front(key);
  aggregate.lru = lru_.begin();
  aggregates_[key] = std::move(aggregate);
  while (aggregates_.size() > options_.max_aggregated) {
    aggregates_.erase(lru_.back());
    lru_.pop_back();
  }
}

void EventRecorder::Write(const Pending& p) {
  const std::string key = p.involved_ref.dump() + "\n" + p.type + "\n" + p.reason + "\n" + p.message;
  const std::string now = Rfc3339Seconds(p.when);
  if (auto it = aggregates_.find(key); it != aggregates_.end()) {
    Aggregate aggregate = it->second;
    const Json patch = {{"count", aggregate.count + 1}, {"lastTimestamp", now}};
    StatusOr<Json> patched = client_.Patch({resources::Events(), p.ns, aggregate.name, ""}, PatchType::kMerge, patch);
    if (patched.ok()) {
      aggregate.count += 1;
      Remember(key, std::move(aggregate));
      return;
    }
    if (!IsNotFound(patched.status())) {
      log::Warning("event update failed", {{"reason", p.reason}, {"error", patched.status().message()}});
      return;
    }
    // The Event expired (the API server keeps them an hour): start a new one.
  }
  char suffix[24];
  std::snprintf(suffix, sizeof suffix, "%llx",
                static_cast<unsigned long long>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(p.when.time_since_epoch()).count()) +
                    sequence_++);
  const std::string name = p.involved_ref["name"].get<std::string>() + "." + suffix;
  const Json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name}, {"namespace", p.ns}}},
      {"involvedObject", p.involved_ref},
      {"reason", p.reason},
      {"message", p.message},
      {"type", p.type},
      {"count", 1},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"source", {{"component", options_.component}, {"host", options_.instance}}},
      {"reportingComponent", options_.component},
      {"reportingInstance", options_.instance},
  };
  StatusOr<Json> created = client_.Create({resources::Events(), p.ns, "", ""}, event);
  if (!created.ok()) {
    log::Warning("event create failed", {{"reason", p.reason}, {"error", created.status().message()}});
    return;
  }
  Remember(key, Aggregate{name, 1, now, {}});
}

}  // namespace mf::k8s
