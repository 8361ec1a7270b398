#include "tools/local/controllers/controller_loop.h"

#include "common/logging.h"
#include "tools/local/controllers/object_meta.h"

namespace mf::local {

ControllerLoop::ControllerLoop(std::string name, Store* store, GroupVersionResource primary,
                               ReconcileFn reconcile, std::chrono::milliseconds resync)
    : name_(std::move(name)), store_(store), primary_(std::move(primary)),
      reconcile_(std::move(reconcile)), resync_(resync) {}

ControllerLoop::~ControllerLoop() { Stop(); }

void ControllerLoop::Watch(GroupVersionResource gvr, KeysFn keys) {
  sources_.emplace_back(std::move(gvr), std::move(keys));
}

Status ControllerLoop::Start() {
  WatchOptions options;
  options.send_initial_events = false;
  options.resource_version = store_->CurrentResourceVersion();
  for (const auto& [gvr, keys] : sources_) {
    MF_ASSIGN_OR_RETURN(auto watcher, store_->Watch(gvr, "", options));
    watcher->SetNotify([this] {
      {
        std::lock_guard lock(mu_);
        events_pending_ = true;
      }
      wake_.notify_all();
    });
    watchers_.push_back(std::move(watcher));
  }
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void ControllerLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : watchers_) w->Stop();
  if (thread_.joinable()) thread_.join();
}

void ControllerLoop::Run() {
  auto next_resync = std::chrono::steady_clock::now();
  while (true) {
    {
      std::unique_lock lock(mu_);
      wake_.wait_until(lock, next_resync, [this] { return stopping_ || events_pending_; });
      if (stopping_) return;
      events_pending_ = false;
    }
    std::set<std::string> keys;
    bool resync = std::chrono::steady_clock::now() >= next_resync;
    for (size_t i = 0; i < watchers_.size(); ++i) {
      if (watchers_[i]->done()) {
        // Fell behind (410) or ended: start over from now; the resync covers the gap.
        WatchOptions options;
        options.send_initial_events = false;
        options.resource_version = store_->CurrentResourceVersion();
        if (auto renewed = store_->Watch(sources_[i].first, "", options); renewed.ok()) {
          watchers_[i] = *renewed;
          watchers_[i]->SetNotify([this] {
            {
              std::lock_guard lock(mu_);
              events_pending_ = true;
            }
            wake_.notify_all();
          });
        }
        resync = true;
        continue;
      }
      while (auto event = watchers_[i]->Next(std::chrono::milliseconds(0))) {
        if (event->type == WatchEventType::kBookmark || event->type == WatchEventType::kError) continue;
        for (std::string& k : sources_[i].second(*event)) keys.insert(std::move(k));
      }
    }
    if (resync) {
      if (auto all = store_->List(primary_, ""); all.ok()) {
        for (const auto& obj : all->items) keys.insert(KeyOf(obj));
      }
      next_resync = std::chrono::steady_clock::now() + resync_;
    }
    for (const std::string& key : keys) {
      size_t slash = key.find('/');
      Status s = CatchMalformed(name_ + " " + key, [&] { return reconcile_(key.substr(0, slash), key.substr(slash + 1)); });
      if (!s.ok() && s.code() != StatusCode::kAborted) {
        log::Warning("reconcile failed", {{"controller", name_}, {"key", key}, {"error", s.message()}});
      }
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
  }
}

std::string KeyOf(const nlohmann::json& object) { return NamespaceOf(object) + "/" + NameOf(object); }

std::vector<std::string> ControllerKeyOf(const nlohmann::json& object, std::string_view kind) {
  const Json refs = ObjectAt(object, {"metadata"}).value("ownerReferences", Json::array());
  if (!refs.is_array()) return {};
  for (const Json& ref : refs) {
    if (ref.value("controller", false) && StringAt(ref, {"kind"}) == kind) {
      return {NamespaceOf(object) + "/" + StringAt(ref, {"name"})};
    }
  }
  return {};
}

StatusOr<nlohmann::json> CreateOrUpdate(Store* store, const GroupVersionResource& gvr,
                                        const nlohmann::json& desired) {
  const std::string ns = NamespaceOf(desired), name = NameOf(desired);
  auto current = store->Get({gvr, ns, name});
  if (!current.ok()) {
    if (current.status().code() != StatusCode::kNotFound) return current.status();
    return store->Create(gvr, ns, desired);
  }
  auto merge = [&](const Json& cur) {
    Json updated = cur;
    for (const auto& [k, v] : desired.items()) {
      if (k != "metadata" && k != "status") updated[k] = v;
    }
    for (const char* field : {"labels", "annotations", "ownerReferences"}) {
      if (desired["metadata"].contains(field)) updated["metadata"][field] = desired["metadata"][field];
    }
    return updated;
  };
  if (merge(*current) == *current) return current;
  return store->GuaranteedUpdate({gvr, ns, name}, Subresource::kMain,
                                 [&](const Json& cur) -> StatusOr<Json> { return merge(cur); });
}

Status UpdateStatusIfChanged(Store* store, const GroupVersionResource& gvr, const nlohmann::json& object,
                             const nlohmann::json& status) {
  if (object.contains("status") && object["status"] == status) return Status::Ok();
  auto written = store->GuaranteedUpdate(
      {gvr, NamespaceOf(object), NameOf(object)}, Subresource::kStatus,
      [&](const Json& current) -> StatusOr<Json> {
        if (Uid(current) != Uid(object)) return Aborted("replaced while reconciling");
        Json updated = current;
        updated["status"] = status;
        return updated;
      });
  return written.ok() || written.status().code() == StatusCode::kNotFound ? Status::Ok() : written.status();
}

}  // namespace mf::local
