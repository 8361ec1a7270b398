// ModelManager: owns the loaded versions of every configured model and decides, on each poll
// of the model repository, which versions to load and unload (see version_transitions.h).
//
// Request handlers only call GetServable(), which reads an immutable per-model snapshot and
// returns a shared_ptr handle: a request holding a handle keeps that version alive through an
// unload. All loading, unloading and bookkeeping happens on one poll thread (or in PollOnce()),
// so the decision logic needs no locking; the snapshot map is the only shared state.
//
// Storage glitches (base path missing or unreadable, or suddenly empty) never unload a serving
// version: the model keeps its versions, its status carries the error, a warning is logged and
// modelfleet_model_storage_errors_total counts it. A version that fails to load ends in END
// with its error in the status; it is retried with exponential backoff, or at once when its
// file changes, and the previous version keeps serving meanwhile.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/status.h"
#include "server/repository/loader.h"
#include "server/repository/model_config.h"
#include "server/repository/servable.h"
#include "server/repository/version_scanner.h"
#include "server/repository/version_state.h"
#include "server/repository/version_transitions.h"

namespace mf::server {

struct ManagerOptions {
  // --file_system_poll_wait_seconds. 0: TF Serving's "poll once": base paths are scanned until
  // every model has an AVAILABLE version (files settle, failed loads retry, unloads finish),
  // then only after a config change.
  std::chrono::milliseconds poll_interval{1000};
  SwapMode swap_mode = SwapMode::kAvailabilityPreserving;
  std::chrono::milliseconds retry_initial{1000};  // first retry delay after a failed load
  std::chrono::milliseconds retry_max{60000};     // backoff cap
  // Failed loads retried at most this many times (TF Serving's --max_num_load_retries), after
  // which only a rewritten file is tried again; -1: retried for as long as it fails.
  int max_load_retries = -1;
  // Re-check sooner than poll_interval while a new file waits to prove it is complete, or an
  // unload waits for its last request, so versions go live without a full poll period.
  std::chrono::milliseconds recheck_interval{250};
  // A model file counts as complete once unchanged for this long across scans (VersionScanner);
  // 0: two consecutive scans, however close. main uses 200 ms.
  std::chrono::milliseconds min_stable_age{0};
  // Called after a load attempt (its transient copies are gone) and after a version's last
  // request let go of it: where main returns freed heap to the OS. Once Start() ran it is
  // called on a housekeeping thread of its own, which keeps the priority of the thread that
  // called Start(), while the loop thread waits for it: returning memory (malloc_trim) takes
  // every malloc arena's lock in turn, and a low-priority thread preempted while holding one
  // would stall the requests that allocate from it. Without Start() (PollOnce() driven by a
  // test) it is called inline.
  std::function<void()> memory_released;
  // Called once no load attempt or unload has finished for `quiet_after` (on the housekeeping
  // thread; inline right after memory_released without Start()): where main gives back the
  // weight mappings it keeps for the next load to reuse (runtime/weight_mappings.h). While
  // versions keep arriving (a rollout, back-to-back swaps) they are kept; then they go.
  std::function<void()> loads_quiet;
  std::chrono::milliseconds quiet_after{2000};
  // Runs first on the thread that polls, loads and unloads (before any load), e.g. to lower
  // its scheduling priority so loads yield the cores to requests.
  std::function<void()> on_loop_thread_start;
};

// Which version a request asks for: the latest, a number, or a label.
struct VersionRequest {
  enum class Kind { kLatest, kNumber, kLabel };
  Kind kind = Kind::kLatest;
  int64_t number = 0;
  std::string label;

  static VersionRequest Latest() { return {}; }
  static VersionRequest Number(int64_t v) { return {Kind::kNumber, v, {}}; }
  static VersionRequest Label(std::string l) { return {Kind::kLabel, 0, std::move(l)}; }
};

struct ServableHandle {
  std::string model;
  int64_t version = 0;
  std::shared_ptr<const Servable> servable;
};

class ModelManager {
 public:
  ModelManager(std::shared_ptr<Loader> loader, ManagerOptions options);
  ~ModelManager();
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  // Replaces the whole set of models (TF Serving's config reload semantics): new models are
  // added, removed ones are dropped (their versions freed when in-flight requests finish),
  // changed policies and labels apply on the next poll. A model moved to another base path
  // keeps serving its old versions until one from the new path is AVAILABLE (in the resource
  // preserving mode they are unloaded first). Invalid or duplicate configs are refused as a
  // whole and change nothing. Returns the config's generation, for ConfigOutcome().
  StatusOr<uint64_t> SetModels(std::vector<ModelConfig> models);

  // Runs the poll loop on a background thread until Stop() or destruction.
  void Start();
  void Stop();
  // One synchronous reconcile pass over every model (what the loop runs each period).
  void PollOnce();

  StatusOr<ServableHandle> GetServable(std::string_view model, const VersionRequest& request) const;
  // All versions of a model, or one (`version`); NOT_FOUND as TF Serving words it.
  StatusOr<std::vector<VersionStatus>> GetModelStatus(std::string_view model, std::optional<int64_t> version) const;
  // The model's AVAILABLE versions, ascending (KServe v2 metadata lists them so, as Triton).
  std::vector<int64_t> AvailableVersions(std::string_view model) const;
  // The version a label names, loaded or not (status by label shows a canary still loading).
  // NOT_FOUND for an unknown model, INVALID_ARGUMENT for a label the model's config lacks.
  StatusOr<int64_t> ResolveLabel(std::string_view model, const std::string& label) const;
  // The version policy of the model's config (what Triton's model configuration reports).
  StatusOr<VersionPolicy> GetVersionPolicy(std::string_view model) const;
  // The storage error of a model's last scan (OK when its base path reads fine).
  Status StorageStatus(std::string_view model) const;
  // The models of the newest config (as readiness counts them), polled yet or not.
  std::vector<std::string> ModelNames() const;
  // True when every model of the newest config has at least one AVAILABLE version (readiness).
  bool AllModelsAvailable() const;
  // Where a model of config `generation` stands: OK once a version from its configured base
  // path is AVAILABLE, the error when it cannot get one, nullopt while it may still (or the
  // config is not applied yet). What ReloadConfig waits for.
  std::optional<Status> ConfigOutcome(std::string_view model, uint64_t generation) const;

 private:
  struct TrackedVersion;
  struct ModelState;
  struct Snapshot;
  // The model's current snapshot (null when it has none), read under the shared lock.
  std::shared_ptr<const Snapshot> SnapshotOf(std::string_view model) const;

  void PollModel(ModelState& model);
  // Unloads the versions of a model's previous base path once the new path serves (at once in
  // the resource preserving mode), and forgets them once released.
  void AdvanceRetirement(ModelState& model);
  // Removes the version metrics of a state that goes, except for versions `keep` also tracks.
  static void ForgetMetrics(const std::string& model, const ModelState& dropped, const ModelState* keep);
  void ApplyPendingConfig();
  void LoadVersion(ModelState& model, int64_t version);
  void UnloadVersion(ModelState& model, int64_t version);
  void Publish(const ModelState& model);
  static std::optional<Status> OutcomeOf(const ModelState& model);
  void FinishUnloadIfReleased(const std::string& model, int64_t version, TrackedVersion& tracked);
  bool NeedsRecheck(const ModelState& model) const;
  void Loop();
  // options_.memory_released, on the housekeeping thread once Start() ran, else inline.
  void ReleaseMemory();
  void HousekeepingLoop();

  const std::shared_ptr<Loader> loader_;
  const ManagerOptions options_;

  // Serializes PollOnce() (the loop and tests); guards models_.
  std::mutex poll_mu_;
  std::map<std::string, std::unique_ptr<ModelState>, std::less<>> models_;
  bool recheck_soon_ = false;
  bool all_serving_ = false;  // every model had an AVAILABLE version at the end of the last poll

  std::mutex config_mu_;
  std::optional<std::vector<ModelConfig>> pending_config_;
  uint64_t config_generation_ = 0;   // of the newest SetModels(); guarded by config_mu_
  uint64_t pending_generation_ = 0;  // of pending_config_
  std::atomic<uint64_t> applied_generation_{0};

  mutable std::shared_mutex snapshots_mu_;
  std::map<std::string, std::shared_ptr<const Snapshot>, std::less<>> snapshots_;
  std::set<std::string, std::less<>> configured_;  // the newest config's models (readiness)

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stopping_ = false;
  bool wake_ = false;
  std::thread loop_thread_;

  // The housekeeping thread's state (memory_released off the loop thread). Requests and
  // completions are counted so a caller can wait for the call that covers its request.
  std::mutex release_mu_;
  std::condition_variable release_cv_;       // a request was made, or stopping
  std::condition_variable release_done_cv_;  // release_done_ advanced
  uint64_t release_requested_ = 0;
  uint64_t release_done_ = 0;
  bool housekeeping_running_ = false;
  bool housekeeping_stopping_ = false;
  std::thread housekeeping_thread_;
};

}  // namespace mf::server
