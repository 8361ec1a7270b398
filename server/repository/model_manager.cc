#include "server/repository/model_manager.h"

#include <algorithm>
#include <utility>

#include "common/logging.h"
#include "server/repository/repository_metrics.h"

namespace mf::server {

using Clock = std::chrono::steady_clock;

struct ModelManager::TrackedVersion {
  VersionState state = VersionState::kStart;
  Status status;
  std::string model_path;
  FileFingerprint fingerprint;  // as of the latest scan that saw the file
  bool on_disk = false;
  bool stable = false;
  std::shared_ptr<const Servable> servable;  // set while AVAILABLE
  std::weak_ptr<const Servable> releasing;   // set while UNLOADING

  // AVAILABLE -> UNLOADING: new requests no longer get it; requests in flight keep it alive.
  void StartUnload() {
    state = VersionState::kUnloading;
    releasing = servable;
    servable.reset();
  }
  // UNLOADING -> END once the last request let go of it; true when that happened now.
  bool EndUnloadIfReleased() {
    if (state != VersionState::kUnloading || !releasing.expired()) return false;
    state = VersionState::kEnd;
    releasing.reset();
    return true;
  }
  // Failed-load bookkeeping: the file that failed and when to try again.
  int failures = 0;
  FileFingerprint failed_fingerprint;
  Clock::time_point retry_at;
};

struct ModelManager::ModelState {
  ModelState(ModelConfig c, std::chrono::milliseconds min_stable_age)
      : config(std::move(c)), scanner(config.base_path, min_stable_age) {}
  ModelConfig config;
  VersionScanner scanner;
  std::map<int64_t, TrackedVersion> versions;
  std::set<int64_t> aspired;
  Status storage_status;
  uint64_t generation = 0;  // of the config this state follows
  // After a base path change: the previous path's versions, serving until the new path does.
  std::unique_ptr<ModelState> retiring;
};

// What request handlers read: immutable, replaced as a whole on every change.
struct ModelManager::Snapshot {
  std::map<int64_t, std::shared_ptr<const Servable>> available;
  // The version Latest requests get: the highest available aspired version, else the highest
  // available (so a rollback switches as soon as the older version is back).
  std::optional<int64_t> latest;
  std::map<std::string, int64_t> labels;
  VersionPolicy policy;
  std::vector<VersionStatus> statuses;  // newest version first (TF Serving's order)
  Status storage_status;
  uint64_t generation = 0;
  std::optional<Status> outcome;  // see ConfigOutcome()
};

namespace {

std::string LatestRequestString(std::string_view model) { return "Latest(" + std::string(model) + ")"; }

std::string SpecificRequestString(std::string_view model, int64_t version) {
  return "Specific(" + std::string(model) + ", " + std::to_string(version) + ")";
}

// The highest AVAILABLE version of `versions` among `aspired` (any, when `aspired` is null).
template <typename Versions>
std::optional<int64_t> HighestAvailable(const Versions& versions, const std::set<int64_t>* aspired = nullptr) {
  for (auto it = versions.rbegin(); it != versions.rend(); ++it) {
    if (it->second.state == VersionState::kAvailable && (aspired == nullptr || aspired->count(it->first) != 0)) {
      return it->first;
    }
  }
  return std::nullopt;
}

template <typename Versions>
bool AnyAvailable(const Versions& versions, const std::set<int64_t>* among = nullptr) {
  return HighestAvailable(versions, among).has_value();
}

}  // namespace

ModelManager::ModelManager(std::shared_ptr<Loader> loader, ManagerOptions options)
    : loader_(std::move(loader)), options_(options) {}

ModelManager::~ModelManager() { Stop(); }

// UNLOADING ends once the last request holding the version has let go of it.
void ModelManager::FinishUnloadIfReleased(const std::string& model, int64_t version, TrackedVersion& tracked) {
  if (!tracked.EndUnloadIfReleased()) return;
  repository_metrics::SetVersionState(model, version, tracked.state);
  repository_metrics::SetMemoryBytes(model, version, "cpu", 0);
  mf::log::Info("model version unloaded", {{"model", model}, {"version", std::to_string(version)}});
  ReleaseMemory();
}

StatusOr<uint64_t> ModelManager::SetModels(std::vector<ModelConfig> models) {
  std::set<std::string, std::less<>> names;
  for (const ModelConfig& config : models) {
    MF_RETURN_IF_ERROR(ValidateModelConfig(config));
    if (!names.insert(config.name).second) {
      return InvalidArgument("model config: model '" + config.name + "' is listed twice");
    }
  }
  uint64_t generation = 0;
  {
    std::lock_guard lock(config_mu_);
    generation = ++config_generation_;
    pending_config_ = std::move(models);
    pending_generation_ = generation;
    // Readiness follows the newest config at once: a model it adds counts before its first poll.
    std::unique_lock snapshots_lock(snapshots_mu_);
    configured_ = std::move(names);
  }
  {
    std::lock_guard lock(loop_mu_);
    wake_ = true;
  }
  loop_cv_.notify_all();
  return generation;
}

void ModelManager::ReleaseMemory() {
  if (!options_.memory_released && !options_.loads_quiet) return;
  std::unique_lock lock(release_mu_);
  if (!housekeeping_running_) {
    lock.unlock();
    if (options_.memory_released) options_.memory_released();
    if (options_.loads_quiet) options_.loads_quiet();
    return;
  }
  // Waits for it: the next load must start on a returned heap, as it would inline (a stale
  // free block the load cannot reuse would otherwise add to that load's peak).
  const uint64_t target = ++release_requested_;
  release_cv_.notify_all();
  release_done_cv_.wait(lock, [&] { return release_done_ >= target; });
}

void ModelManager::HousekeepingLoop() {
  std::unique_lock lock(release_mu_);
  bool quiet_pending = false;  // a release ran and loads_quiet has not followed it yet
  auto requested = [this] { return release_requested_ > release_done_ || housekeeping_stopping_; };
  while (true) {
    if (quiet_pending && options_.loads_quiet) {
      // No new request within quiet_after: loads have gone quiet.
      if (!release_cv_.wait_for(lock, options_.quiet_after, requested)) {
        quiet_pending = false;
        lock.unlock();
        options_.loads_quiet();
        lock.lock();
        continue;
      }
    } else {
      release_cv_.wait(lock, requested);
    }
    if (release_requested_ == release_done_) return;  // stopping, and nobody waits
    const uint64_t target = release_requested_;       // one call serves every request made so far
    lock.unlock();
    if (options_.memory_released) options_.memory_released();
    lock.lock();
    release_done_ = target;
    quiet_pending = true;
    release_done_cv_.notify_all();
  }
}

void ModelManager::Start() {
  std::lock_guard lock(loop_mu_);
  if (loop_thread_.joinable()) return;
  stopping_ = false;
  if (options_.memory_released || options_.loads_quiet) {
    // Created here, before the loop thread lowers its own priority: it keeps the caller's.
    std::lock_guard release_lock(release_mu_);
    housekeeping_running_ = true;
    housekeeping_stopping_ = false;
    housekeeping_thread_ = std::thread([this] { HousekeepingLoop(); });
  }
  loop_thread_ = std::thread([this] {
    if (options_.on_loop_thread_start) options_.on_loop_thread_start();
    Loop();
  });
}

void ModelManager::Stop() {
  {
    std::lock_guard lock(loop_mu_);
    stopping_ = true;
  }
  loop_cv_.notify_all();
  if (loop_thread_.joinable()) loop_thread_.join();
  if (housekeeping_thread_.joinable()) {
    {
      std::lock_guard lock(release_mu_);
      housekeeping_stopping_ = true;  // a release still pending runs first
      housekeeping_running_ = false;  // from here on releases run inline
    }
    release_cv_.notify_all();
    housekeeping_thread_.join();
  }
}

void ModelManager::Loop() {
  // With polling off, a model still without a version is scanned this often until it has one.
  constexpr std::chrono::milliseconds kUntilServing{1000};
  while (true) {
    PollOnce();
    std::unique_lock lock(loop_mu_);
    const bool poll_once = options_.poll_interval.count() == 0;
    const auto period = poll_once ? kUntilServing : options_.poll_interval;
    const auto wait = recheck_soon_ ? std::min(options_.recheck_interval, period) : period;
    const auto woken = [this] { return stopping_ || wake_; };
    if (poll_once && all_serving_ && !recheck_soon_) {
      loop_cv_.wait(lock, woken);  // settled: only a config change or Stop() wakes the loop
    } else {
      loop_cv_.wait_for(lock, wait, woken);
    }
    if (stopping_) return;
    wake_ = false;
  }
}

void ModelManager::ApplyPendingConfig() {
  std::optional<std::vector<ModelConfig>> pending;
  uint64_t generation = 0;
  {
    std::lock_guard lock(config_mu_);
    pending.swap(pending_config_);
    generation = pending_generation_;
  }
  if (!pending) return;

  std::set<std::string, std::less<>> wanted;
  for (ModelConfig& config : *pending) {
    wanted.insert(config.name);
    auto it = models_.find(config.name);
    if (it == models_.end()) {
      mf::log::Info("model added", {{"model", config.name}, {"base_path", config.base_path}});
      std::string name = config.name;
      auto added = std::make_unique<ModelState>(std::move(config), options_.min_stable_age);
      added->generation = generation;
      models_[name] = std::move(added);
    } else if (it->second->config.base_path != config.base_path) {
      mf::log::Info("model moved to another base path; its versions serve until the new path's do",
                    {{"model", config.name}, {"from", it->second->config.base_path}, {"to", config.base_path}});
      std::unique_ptr<ModelState> previous = std::move(it->second);
      std::unique_ptr<ModelState> older = std::move(previous->retiring);  // has none of its own
      // What keeps serving meanwhile: the previous path's versions, or, when none of them serves
      // yet, what that path was itself replacing (two moves in a row); else nothing.
      std::unique_ptr<ModelState> serving;
      if (AnyAvailable(previous->versions)) {
        serving = std::move(previous);
      } else if (older && AnyAvailable(older->versions)) {
        serving = std::move(older);
      }
      for (const ModelState* dropped : {previous.get(), older.get()}) {
        if (dropped != nullptr) ForgetMetrics(config.name, *dropped, serving.get());
      }
      it->second = std::make_unique<ModelState>(std::move(config), options_.min_stable_age);
      it->second->generation = generation;
      it->second->retiring = std::move(serving);
    } else {
      it->second->generation = generation;
      // A device change applies to loads from now on; a version that failed on the old device
      // is tried on the new one at once rather than after its backoff.
      for (auto& [v, tracked] : it->second->versions) {
        if (tracked.failures > 0 && DeviceFor(it->second->config, v) != DeviceFor(config, v)) {
          tracked.retry_at = Clock::now();
        }
      }
      it->second->config = std::move(config);
    }
  }
  for (auto it = models_.begin(); it != models_.end();) {
    if (wanted.count(it->first) != 0) {
      ++it;
      continue;
    }
    mf::log::Info("model removed from config; unloading all its versions", {{"model", it->first}});
    if (it->second->retiring) ForgetMetrics(it->first, *it->second->retiring, nullptr);
    ForgetMetrics(it->first, *it->second, nullptr);
    decltype(snapshots_)::node_type removed;  // destroyed after the lock (see Publish)
    {
      std::unique_lock lock(snapshots_mu_);
      removed = snapshots_.extract(it->first);
    }
    it = models_.erase(it);
  }
}

void ModelManager::PollOnce() {
  std::lock_guard lock(poll_mu_);
  ApplyPendingConfig();
  bool recheck = false;
  bool all_serving = true;
  for (auto& [name, model] : models_) {
    // Before: a previous base path released by now makes way for loads (resource preserving).
    // After: a new path that now serves retires the previous one's versions.
    AdvanceRetirement(*model);
    PollModel(*model);
    AdvanceRetirement(*model);
    recheck = recheck || NeedsRecheck(*model);
    all_serving = all_serving && AnyAvailable(model->versions);
  }
  recheck_soon_ = recheck;
  all_serving_ = all_serving;
  uint64_t generation = 0;
  {
    std::lock_guard config_lock(config_mu_);
    if (!pending_config_) generation = config_generation_;
  }
  if (generation != 0) applied_generation_ = generation;
}

void ModelManager::ForgetMetrics(const std::string& model, const ModelState& dropped, const ModelState* keep) {
  for (const auto& [v, tracked] : dropped.versions) {
    if (keep == nullptr || keep->versions.count(v) == 0) repository_metrics::RemoveVersion(model, v);
  }
}

void ModelManager::AdvanceRetirement(ModelState& model) {
  ModelState* old = model.retiring.get();
  if (old == nullptr) return;
  const std::string& name = model.config.name;
  const bool resource_preserving = options_.swap_mode == SwapMode::kResourcePreserving;
  bool changed = false;
  if (resource_preserving || AnyAvailable(model.versions, &model.aspired)) {
    for (auto& [v, tracked] : old->versions) {
      if (tracked.state != VersionState::kAvailable) continue;
      tracked.StartUnload();
      // The version metrics are the new path's where it has the same version number.
      if (model.versions.count(v) == 0) repository_metrics::SetVersionState(name, v, tracked.state);
      mf::log::Info("unloading model version of the previous base path",
                    {{"model", name}, {"version", std::to_string(v)}, {"path", old->config.base_path}});
      changed = true;
    }
  }
  if (changed) Publish(model);  // from here new requests get the new path's versions only
  bool done = true;
  for (auto& [v, tracked] : old->versions) {
    if (tracked.EndUnloadIfReleased()) {
      if (model.versions.count(v) == 0) repository_metrics::SetVersionState(name, v, tracked.state);
      changed = true;
    }
    done = done && tracked.state != VersionState::kAvailable && tracked.state != VersionState::kUnloading;
  }
  if (!done) return;
  ForgetMetrics(name, *old, &model);
  mf::log::Info("previous base path's versions unloaded", {{"model", name}, {"path", old->config.base_path}});
  model.retiring.reset();
  Publish(model);
  if (changed) ReleaseMemory();
}

bool ModelManager::NeedsRecheck(const ModelState& model) const {
  if (model.retiring) return true;  // waiting for the new path's first load or the old's release
  for (const auto& [v, tracked] : model.versions) {
    if (tracked.state == VersionState::kUnloading) return true;
    if (model.aspired.count(v) != 0 && tracked.state == VersionState::kStart && !tracked.stable) {
      return true;
    }
  }
  return false;
}

void ModelManager::PollModel(ModelState& model) {
  const std::string& name = model.config.name;
  auto scanned = model.scanner.Scan();
  const bool have_loaded = AnyAvailable(model.versions) || (model.retiring && AnyAvailable(model.retiring->versions));
  Status storage = scanned.status();
  if (storage.ok() && scanned->empty()) {
    storage = NotFound("no version directories with a " + std::string(VersionScanner::kModelFileName) + " under " +
                       model.config.base_path);
  }
  if (!storage.ok()) {
    if (model.storage_status.ok() && have_loaded) {
      mf::log::Warning("cannot read model base path; loaded versions keep serving",
                       {{"model", name}, {"error", storage.ToString()}});
    } else if (model.storage_status.ok()) {
      mf::log::Warning("cannot read model base path", {{"model", name}, {"error", storage.ToString()}});
    }
    repository_metrics::CountStorageError(name);
    model.storage_status = storage;
    // A glitch is not a deletion: keep every version as it is, only finish pending unloads.
    for (auto& [v, tracked] : model.versions) FinishUnloadIfReleased(name, v, tracked);
    Publish(model);
    return;
  }
  if (!model.storage_status.ok()) {
    mf::log::Info("model base path readable again", {{"model", name}});
    model.storage_status = Status::Ok();
  }

  // Fold the scan into the tracked versions.
  std::set<int64_t> on_disk;
  for (auto& [v, tracked] : model.versions) tracked.on_disk = false;
  for (const auto& [v, found] : *scanned) on_disk.insert(v);
  model.aspired = SelectVersions(model.config.policy, on_disk);
  const auto now = Clock::now();
  for (const auto& [v, found] : *scanned) {
    auto it = model.versions.find(v);
    if (it == model.versions.end()) {
      if (model.aspired.count(v) == 0) continue;  // not wanted and never loaded: not tracked
      it = model.versions.emplace(v, TrackedVersion{}).first;
      repository_metrics::SetVersionState(name, v, VersionState::kStart);
    }
    TrackedVersion& tracked = it->second;
    tracked.on_disk = true;
    tracked.stable = found.stable;
    tracked.model_path = found.model_path;
    tracked.fingerprint = found.fingerprint;
    if (tracked.failures > 0 && found.fingerprint != tracked.failed_fingerprint) {
      tracked.retry_at = now;  // the file was rewritten since it failed: try it again at once
    }
  }

  // Apply transitions one at a time until the plan says there is nothing to do now. Each load
  // either succeeds or sets a retry time in the future, and each unload removes an AVAILABLE
  // version, so this ends within two steps per version.
  // In the resource preserving mode a previous base path's versions go before any load.
  const bool wait_for_retiring = model.retiring && options_.swap_mode == SwapMode::kResourcePreserving;
  for (size_t step = 0; !wait_for_retiring && step < 2 * model.versions.size() + 2; ++step) {
    std::map<int64_t, VersionView> views;
    for (const auto& [v, tracked] : model.versions) {
      VersionView view;
      view.state = tracked.state;
      view.load_allowed = tracked.on_disk && tracked.stable && (tracked.failures == 0 || tracked.retry_at <= now);
      view.released = tracked.releasing.expired();
      views.emplace(v, view);
    }
    auto next = NextTransition(model.aspired, views, options_.swap_mode);
    if (!next) break;
    if (next->kind == Transition::Kind::kLoad) {
      LoadVersion(model, next->version);
    } else {
      UnloadVersion(model, next->version);
    }
  }

  // Housekeeping: finished unloads end; versions gone from disk and not loaded are forgotten.
  for (auto it = model.versions.begin(); it != model.versions.end();) {
    TrackedVersion& tracked = it->second;
    FinishUnloadIfReleased(name, it->first, tracked);
    bool idle = tracked.state == VersionState::kEnd || tracked.state == VersionState::kStart;
    if (idle && (!tracked.on_disk || model.aspired.count(it->first) == 0)) {
      repository_metrics::RemoveVersion(name, it->first);
      it = model.versions.erase(it);
    } else {
      ++it;
    }
  }
  Publish(model);
}

void ModelManager::LoadVersion(ModelState& model, int64_t version) {
  const std::string& name = model.config.name;
  TrackedVersion& tracked = model.versions.at(version);
  tracked.state = VersionState::kLoading;
  repository_metrics::SetVersionState(name, version, tracked.state);
  Publish(model);
  const std::optional<DeviceChoice> device = DeviceFor(model.config, version);
  const std::string device_name = device ? std::string(DeviceChoiceName(*device)) : "default";
  mf::log::Info("loading model version", {{"model", name},
                                          {"version", std::to_string(version)},
                                          {"path", tracked.model_path},
                                          {"requested_device", device_name}});

  const auto started = Clock::now();
  auto loaded = loader_->Load(LoadRequest{name, version, tracked.model_path, device});
  const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
  ReleaseMemory();
  if (!loaded.ok()) {
    tracked.state = VersionState::kEnd;
    tracked.status = loaded.status();
    tracked.failures += 1;
    tracked.failed_fingerprint = tracked.fingerprint;
    auto delay = options_.retry_initial * (int64_t{1} << std::min(tracked.failures - 1, 20));
    delay = std::min(delay, options_.retry_max);
    // Past max_load_retries only a rewritten file is tried again (see the scan above).
    const bool give_up = options_.max_load_retries >= 0 && tracked.failures > options_.max_load_retries;
    tracked.retry_at = give_up ? Clock::time_point::max() : Clock::now() + delay;
    repository_metrics::SetVersionState(name, version, tracked.state);
    repository_metrics::CountLoadFailure(name);
    mf::log::Error(
        "model version failed to load; previous versions keep serving",
        {{"model", name},
         {"version", std::to_string(version)},
         {"error", tracked.status.ToString()},
         {"retry_in_ms", give_up ? std::string("never (until the file changes)") : std::to_string(delay.count())}});
    return;
  }
  tracked.state = VersionState::kAvailable;
  tracked.status = Status::Ok();
  tracked.failures = 0;
  tracked.servable = std::move(loaded).value();
  repository_metrics::SetVersionState(name, version, tracked.state);
  repository_metrics::ObserveLoadSeconds(name, seconds);
  repository_metrics::SetMemoryBytes(name, version, tracked.servable->device(),
                                     static_cast<double>(tracked.servable->memory_bytes()));
  mf::log::Info("model version available", {{"model", name},
                                            {"version", std::to_string(version)},
                                            {"device", std::string(tracked.servable->device())},
                                            {"load_seconds", std::to_string(seconds)},
                                            {"memory_bytes", std::to_string(tracked.servable->memory_bytes())}});
  Publish(model);
}

void ModelManager::UnloadVersion(ModelState& model, int64_t version) {
  TrackedVersion& tracked = model.versions.at(version);
  tracked.StartUnload();
  repository_metrics::SetVersionState(model.config.name, version, tracked.state);
  mf::log::Info("unloading model version", {{"model", model.config.name}, {"version", std::to_string(version)}});
  Publish(model);  // from here new requests no longer get this version
}

// Where ReloadConfig stands for this model, from its configured base path alone.
std::optional<Status> ModelManager::OutcomeOf(const ModelState& model) {
  if (model.versions.empty()) {
    return model.storage_status.ok() ? std::nullopt : std::optional<Status>(model.storage_status);
  }
  std::optional<Status> failed;
  for (const auto& [v, tracked] : model.versions) {
    if (tracked.state == VersionState::kAvailable) return Status::Ok();
    if (tracked.state != VersionState::kEnd) return std::nullopt;  // still loading
    if (!tracked.status.ok()) failed = tracked.status;
  }
  return failed;
}

void ModelManager::Publish(const ModelState& model) {
  auto snapshot = std::make_shared<Snapshot>();
  // A previous base path's versions serve (and show) where the new path has no such version yet.
  std::map<int64_t, VersionStatus> statuses;
  for (const ModelState* state : std::initializer_list<const ModelState*>{model.retiring.get(), &model}) {
    if (state == nullptr) continue;
    for (const auto& [v, tracked] : state->versions) {
      if (tracked.state == VersionState::kAvailable) snapshot->available[v] = tracked.servable;
      if (state == &model || model.versions.count(v) == 0) statuses[v] = {v, tracked.state, tracked.status};
    }
  }
  // Newest first, as TF Serving lists them (its version map is ordered by std::greater): scripts
  // read model_version_status[0] as the latest.
  for (auto it = statuses.rbegin(); it != statuses.rend(); ++it) snapshot->statuses.push_back(it->second);
  // Latest requests get the highest available aspired version, else (while a new base path loads)
  // the previous path's, else the highest available: a rollback switches as soon as the older
  // version is back.
  snapshot->latest = HighestAvailable(model.versions, &model.aspired);
  if (!snapshot->latest && model.retiring) {
    snapshot->latest = HighestAvailable(model.retiring->versions, &model.retiring->aspired);
  }
  if (!snapshot->latest && !snapshot->available.empty()) snapshot->latest = snapshot->available.rbegin()->first;
  snapshot->labels = model.config.version_labels;
  snapshot->policy = model.config.policy;
  snapshot->storage_status = model.storage_status;
  snapshot->generation = model.generation;
  snapshot->outcome = OutcomeOf(model);
  // The old snapshot may hold the last reference to an unloaded version: swap it out under the
  // lock and let it (and the model's memory) go after, so that requests for other models never
  // wait on the lock while a model is torn down.
  std::shared_ptr<const Snapshot> previous = std::move(snapshot);
  {
    std::unique_lock lock(snapshots_mu_);
    snapshots_[model.config.name].swap(previous);
  }
}

std::shared_ptr<const ModelManager::Snapshot> ModelManager::SnapshotOf(std::string_view model) const {
  std::shared_lock lock(snapshots_mu_);
  auto it = snapshots_.find(model);
  return it != snapshots_.end() ? it->second : nullptr;
}

std::vector<int64_t> ModelManager::AvailableVersions(std::string_view model) const {
  std::vector<int64_t> versions;
  if (const auto snapshot = SnapshotOf(model)) {
    for (const auto& [version, servable] : snapshot->available) versions.push_back(version);
  }
  return versions;
}

StatusOr<int64_t> ModelManager::ResolveLabel(std::string_view model, const std::string& label) const {
  const std::shared_ptr<const Snapshot> snapshot = SnapshotOf(model);
  if (!snapshot) return NotFound("Could not find any versions of model " + std::string(model));
  auto found = snapshot->labels.find(label);
  if (found == snapshot->labels.end()) return InvalidArgument("Unrecognized servable version label: " + label);
  return found->second;
}

StatusOr<VersionPolicy> ModelManager::GetVersionPolicy(std::string_view model) const {
  const std::shared_ptr<const Snapshot> snapshot = SnapshotOf(model);
  if (!snapshot) return NotFound("Could not find any versions of model " + std::string(model));
  return snapshot->policy;
}

StatusOr<ServableHandle> ModelManager::GetServable(std::string_view model, const VersionRequest& request) const {
  const std::shared_ptr<const Snapshot> snapshot = SnapshotOf(model);
  int64_t version = 0;
  switch (request.kind) {
    case VersionRequest::Kind::kLatest:
      if (!snapshot || !snapshot->latest) {
        return NotFound("Servable not found for request: " + LatestRequestString(model));
      }
      version = *snapshot->latest;
      break;
    case VersionRequest::Kind::kNumber:
      version = request.number;
      break;
    case VersionRequest::Kind::kLabel: {
      if (!snapshot) return NotFound("Servable not found for request: " + LatestRequestString(model));
      auto label = snapshot->labels.find(request.label);
      if (label == snapshot->labels.end()) {
        return InvalidArgument("Unrecognized servable version label: " + request.label);
      }
      version = label->second;
      break;
    }
  }
  if (!snapshot) return NotFound("Servable not found for request: " + SpecificRequestString(model, version));
  auto found = snapshot->available.find(version);
  if (found == snapshot->available.end()) {
    return NotFound("Servable not found for request: " + SpecificRequestString(model, version));
  }
  return ServableHandle{std::string(model), version, found->second};
}

StatusOr<std::vector<VersionStatus>> ModelManager::GetModelStatus(std::string_view model,
                                                                  std::optional<int64_t> version) const {
  const std::shared_ptr<const Snapshot> snapshot = SnapshotOf(model);
  if (!snapshot || snapshot->statuses.empty()) {
    std::string message = "Could not find any versions of model " + std::string(model);
    if (snapshot && !snapshot->storage_status.ok()) message += ": " + snapshot->storage_status.message();
    return NotFound(message);
  }
  if (!version) {
    std::vector<VersionStatus> all = snapshot->statuses;
    // A storage glitch shows on every version that is still serving from memory.
    if (!snapshot->storage_status.ok()) {
      for (VersionStatus& s : all) {
        if (s.status.ok()) s.status = snapshot->storage_status;
      }
    }
    return all;
  }
  for (const VersionStatus& s : snapshot->statuses) {
    if (s.version != *version) continue;
    VersionStatus one = s;
    if (!snapshot->storage_status.ok() && one.status.ok()) one.status = snapshot->storage_status;
    return std::vector<VersionStatus>{one};
  }
  return NotFound("Could not find version " + std::to_string(*version) + " of model " + std::string(model));
}

Status ModelManager::StorageStatus(std::string_view model) const {
  std::shared_lock lock(snapshots_mu_);
  auto it = snapshots_.find(model);
  if (it == snapshots_.end()) return NotFound("no model named " + std::string(model));
  return it->second->storage_status;
}

std::vector<std::string> ModelManager::ModelNames() const {
  std::shared_lock lock(snapshots_mu_);
  return {configured_.begin(), configured_.end()};
}

bool ModelManager::AllModelsAvailable() const {
  std::shared_lock lock(snapshots_mu_);
  if (configured_.empty()) return false;
  for (const std::string& name : configured_) {
    auto it = snapshots_.find(name);
    if (it == snapshots_.end() || it->second->available.empty()) return false;
  }
  return true;
}

std::optional<Status> ModelManager::ConfigOutcome(std::string_view model, uint64_t generation) const {
  const std::shared_ptr<const Snapshot> snapshot = SnapshotOf(model);
  if (snapshot && snapshot->generation >= generation) return snapshot->outcome;
  if (!snapshot && applied_generation_ >= generation) {
    return NotFound("model '" + std::string(model) + "' was removed by a later config");
  }
  return std::nullopt;  // the config is not applied yet
}

}  // namespace mf::server
