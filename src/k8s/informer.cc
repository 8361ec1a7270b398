#include "k8s/informer.h"

#include <set>

#include "common/logging.h"
#include "k8s/api_error.h"

namespace mf::k8s {

namespace {

// A list's items carry no apiVersion/kind; derive them from the list ("PodList" -> "Pod") so
// handlers see the same shape a GET or a watch event returns.
void FillTypeMeta(const Json& list, Json* item) {
  const std::string list_kind = StringAt(list, "kind");
  if (!item->contains("kind") && list_kind.size() > 4 && list_kind.ends_with("List")) {
    (*item)["kind"] = list_kind.substr(0, list_kind.size() - 4);
  }
  if (!item->contains("apiVersion") && !StringAt(list, "apiVersion").empty())
    (*item)["apiVersion"] = list["apiVersion"];
}

// Transient failures of a watch are retried from the same resourceVersion; anything else
// (Gone, or an error that may mean our view is wrong) relists.
bool RewatchAfter(const Status& s) {
  switch (s.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kResourceExhausted:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kInternal:
      return true;
    default:
      return false;
  }
}

}  // namespace

Informer::Informer(Client& client, InformerOptions options) : client_(client), options_(std::move(options)) {}

Informer::~Informer() { Stop(); }

void Informer::AddEventHandlers(EventHandlers handlers) { handlers_.push_back(std::move(handlers)); }

Status Informer::Start() {
  if (!options_.collection.name.empty()) return InvalidArgument("an informer watches a collection; name must be empty");
  MF_RETURN_IF_ERROR(options_.collection.Path().status());
  if (reflector_.joinable()) return FailedPrecondition("informer already started");
  dispatcher_ = std::jthread([this](std::stop_token stop) { RunDispatcher(stop); });
  reflector_ = std::jthread([this](std::stop_token stop) { RunReflector(stop); });
  return Status::Ok();
}

void Informer::Stop() {
  reflector_.request_stop();
  dispatcher_.request_stop();
  if (reflector_.joinable()) reflector_.join();
  if (dispatcher_.joinable()) dispatcher_.join();
}

bool Informer::WaitForSync(std::chrono::milliseconds timeout) const {
  std::unique_lock lock(sync_mu_);
  return sync_cv_.wait_for(lock, timeout, [this] { return synced_.load(); });
}

bool Informer::Backoff(int failures, std::stop_token stop) {
  return SleepFor(ExponentialBackoff(options_.error_backoff_base, options_.error_backoff_cap, failures - 1), stop);
}

void Informer::RunReflector(std::stop_token stop) {
  const std::string what = options_.collection.gvr.ToString();
  int failures = 0;
  while (!stop.stop_requested()) {
    std::string resource_version;
    Status listed;
    try {
      listed = ListAndReplace(&resource_version);
    } catch (const std::exception& e) {
      // An index function threw on some object; the cache is unchanged for it. Retry later.
      listed = Internal(std::string("storing the list failed: ") + e.what());
    }
    if (Status s = listed; !s.ok()) {
      log::Warning("informer list failed", {{"resource", what}, {"error", s.message()}});
      if (!Backoff(++failures, stop)) return;
      continue;
    }
    failures = 0;
    while (!stop.stop_requested()) {
      const std::string watched_from = resource_version;
      Status s = WatchOnce(&resource_version, stop);
      if (s.ok()) {
        failures = 0;
        // Server timeout or dropped connection: resume from resource_version. A watch that
        // ended without a single event is paced, so a misbehaving server cannot make us spin.
        if (resource_version == watched_from && !SleepFor(options_.error_backoff_base, stop)) return;
        continue;
      }
      if (stop.stop_requested()) return;
      if (IsGone(s)) {
        log::Info("informer watch expired, relisting", {{"resource", what}, {"resource_version", resource_version}});
        break;
      }
      log::Warning("informer watch failed", {{"resource", what}, {"error", s.message()}});
      if (!Backoff(++failures, stop)) return;
      if (!RewatchAfter(s)) break;
    }
  }
}

Status Informer::ListAndReplace(std::string* resource_version) {
  ListOptions list_options;
  list_options.label_selector = options_.label_selector;
  list_options.field_selector = options_.field_selector;
  MF_ASSIGN_OR_RETURN(Json list, client_.List(options_.collection, list_options));
  *resource_version = ResourceVersion(list);
  if (resource_version->empty())
    return DataLoss("list of " + options_.collection.gvr.ToString() + " has no resourceVersion");

  std::lock_guard lock(mu_);
  std::set<std::string> listed;
  for (Json& item : list["items"]) {
    std::string key = ObjectKey(item);
    if (key.empty()) continue;  // not an object with a name: nothing a handler could use
    FillTypeMeta(list, &item);
    if (options_.transform) options_.transform(&item);
    listed.insert(key);
    ObjectPtr previous = store_.Get(key);
    if (previous && ResourceVersion(*previous) == ResourceVersion(item)) continue;  // unchanged
    auto object = std::make_shared<const Json>(std::move(item));
    store_.Upsert(key, *object);
    EnqueueLocked(previous ? Kind::kUpdate : Kind::kAdd, previous, object);
  }
  for (const std::string& key : store_.Keys()) {
    if (!listed.count(key)) EnqueueLocked(Kind::kDelete, store_.Erase(key), nullptr);
  }
  if (!synced_.load()) EnqueueLocked(Kind::kSynced, nullptr, nullptr);
  ++lists_;
  return Status::Ok();
}

Status Informer::WatchOnce(std::string* resource_version, std::stop_token stop) {
  ++watches_;
  WatchOptions watch_options;
  watch_options.label_selector = options_.label_selector;
  watch_options.field_selector = options_.field_selector;
  watch_options.resource_version = *resource_version;
  watch_options.allow_bookmarks = true;
  watch_options.timeout = options_.watch_timeout;
  Status handler_error;
  Status watched = client_.Watch(
      options_.collection, watch_options,
      [&](WatchEvent&& event) {
        try {
          ApplyEvent(std::move(event), resource_version);
        } catch (const std::exception& e) {
          handler_error = Internal(std::string("storing a watch event failed: ") + e.what());
          return false;
        }
        return !stop.stop_requested();
      },
      stop);
  return handler_error.ok() ? watched : handler_error;
}

void Informer::ApplyEvent(WatchEvent&& event, std::string* resource_version) {
  const std::string version = ResourceVersion(event.object);
  if (event.type == WatchEventType::kBookmark) {
    if (!version.empty()) *resource_version = version;
    return;
  }
  const std::string key = ObjectKey(event.object);
  if (key.empty()) {
    log::Warning("informer ignored a watch event without metadata.name",
                 {{"resource", options_.collection.gvr.ToString()}});
    return;
  }
  if (options_.transform) options_.transform(&event.object);
  {
    std::lock_guard lock(mu_);
    ObjectPtr previous = store_.Get(key);
    if (event.type == WatchEventType::kDeleted) {
      // The event carries the object's final state; report that rather than our older copy.
      if (previous) {
        store_.Erase(key);
        EnqueueLocked(Kind::kDelete, std::make_shared<const Json>(std::move(event.object)), nullptr);
      }
    } else if (!previous || ResourceVersion(*previous) != version) {
      // Same resourceVersion means the cache already holds this state (a replayed event).
      auto object = std::make_shared<const Json>(std::move(event.object));
      store_.Upsert(key, *object);
      EnqueueLocked(previous ? Kind::kUpdate : Kind::kAdd, previous, object);
    }
  }
  if (!version.empty()) *resource_version = version;
}

void Informer::EnqueueLocked(Kind kind, ObjectPtr old_object, ObjectPtr new_object) {
  queue_.push_back(Notification{kind, std::move(old_object), std::move(new_object)});
  queue_cv_.notify_one();
}

void Informer::RunDispatcher(std::stop_token stop) {
  const bool resync = options_.resync_period.count() > 0;
  Clock::time_point next_resync = Clock::now() + options_.resync_period;
  while (!stop.stop_requested()) {
    Notification n;
    {
      std::unique_lock lock(mu_);
      const auto ready = [&] { return !queue_.empty(); };
      if (resync) {
        queue_cv_.wait_until(lock, stop, next_resync, ready);
      } else {
        queue_cv_.wait(lock, stop, ready);
      }
      if (stop.stop_requested()) return;
      if (queue_.empty()) {
        // Resync: re-announce the cache while holding the lock, so it slots in between
        // changes and never reorders them.
        if (synced_.load()) {
          for (std::string& key : store_.Keys())
            queue_.push_back(Notification{Kind::kResync, nullptr, nullptr, std::move(key)});
        }
        next_resync = Clock::now() + options_.resync_period;
        continue;
      }
      n = std::move(queue_.front());
      queue_.pop_front();
    }
    if (n.kind == Kind::kResync) {
      n.new_object = n.old_object = store_.Get(n.key);
      if (!n.new_object) continue;  // deleted since the resync began
    }
    if (n.kind == Kind::kSynced) {
      std::lock_guard lock(sync_mu_);
      synced_ = true;
      sync_cv_.notify_all();
      continue;
    }
    for (const EventHandlers& h : handlers_) {
      try {
        Deliver(h, n);
      } catch (const std::exception& e) {
        // A handler's bug must not take the informer (or the process) down with it.
        log::Error("informer event handler threw",
                   {{"resource", options_.collection.gvr.ToString()}, {"error", e.what()}});
      }
    }
  }
}

void Informer::Deliver(const EventHandlers& h, const Notification& n) {
  switch (n.kind) {
    case Kind::kAdd:
      if (h.on_add) h.on_add(n.new_object);
      break;
    case Kind::kUpdate:
    case Kind::kResync:
      if (h.on_update) h.on_update(n.old_object, n.new_object);
      break;
    case Kind::kDelete:
      if (h.on_delete) h.on_delete(n.old_object);
      break;
    case Kind::kSynced:
      break;
  }
}

}  // namespace mf::k8s
