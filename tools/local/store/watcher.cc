#include "tools/local/store/store.h"

namespace mf::local {

std::string_view WatchEventTypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded: return "ADDED";
    case WatchEventType::kModified: return "MODIFIED";
    case WatchEventType::kDeleted: return "DELETED";
    case WatchEventType::kBookmark: return "BOOKMARK";
    case WatchEventType::kError: return "ERROR";
  }
  return "ERROR";
}

Watcher::Watcher(GroupVersionResource gvr, std::string kind, bool allow_bookmarks, size_t max_queued)
    : gvr_(std::move(gvr)), kind_(std::move(kind)), allow_bookmarks_(allow_bookmarks), max_queued_(max_queued) {}

std::optional<WatchEvent> Watcher::Next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || done_; });
  if (!queue_.empty()) {
    WatchEvent event = std::move(queue_.front());
    queue_.pop_front();
    if (event.type != WatchEventType::kError) last_sent_version_ = std::max(last_sent_version_, event.resource_version);
    if (overflowed_ && queue_.empty()) done_ = true;
    return event;
  }
  if (done_) return std::nullopt;
  if (allow_bookmarks_ && latest_version_ > last_sent_version_) {
    // Everything up to latest_version_ that matches was queued under the store lock, and the queue
    // is empty, so a client resuming from here misses nothing.
    last_sent_version_ = latest_version_;
    json object = {{"apiVersion", gvr_.ApiVersion()},
                   {"kind", kind_},
                   {"metadata", {{"resourceVersion", std::to_string(latest_version_)}}}};
    return WatchEvent{WatchEventType::kBookmark, std::move(object), latest_version_};
  }
  return std::nullopt;
}

void Watcher::Stop() {
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    done_ = true;
    notify = notify_;
  }
  cv_.notify_all();
  if (notify) notify();
}

bool Watcher::done() const {
  std::lock_guard lock(mu_);
  return done_ && queue_.empty();
}

void Watcher::SetNotify(std::function<void()> notify) {
  std::lock_guard lock(mu_);
  notify_ = std::move(notify);
}

void Watcher::Enqueue(WatchEvent event) {
  std::lock_guard lock(mu_);
  if (done_ || overflowed_) return;
  latest_version_ = std::max(latest_version_, event.resource_version);
  if (queue_.size() >= max_queued_) {
    // The consumer is too slow: end the watch with 410 so it relists, as kube-apiserver does.
    overflowed_ = true;
    queue_.clear();
    json status = {{"kind", "Status"},
                   {"apiVersion", "v1"},
                   {"metadata", json::object()},
                   {"status", "Failure"},
                   {"message", "the watch fell too far behind; relist and watch again"},
                   {"reason", "Expired"},
                   {"code", 410}};
    queue_.push_back(WatchEvent{WatchEventType::kError, std::move(status), 0});
    return;
  }
  queue_.push_back(std::move(event));
}

void Watcher::NoteVersion(uint64_t resource_version) {
  std::lock_guard lock(mu_);
  latest_version_ = std::max(latest_version_, resource_version);
}

void Watcher::NotifyOutsideLock() {
  std::function<void()> notify;
  {
    std::lock_guard lock(mu_);
    notify = notify_;
  }
  cv_.notify_all();
  if (notify) notify();
}

}  // namespace mf::local
