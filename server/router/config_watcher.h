// Where snapshots come from. A SnapshotPublisher owns the latest valid config and endpoints and
// turns every change into a new snapshot (logging what changed); a bad config is refused with a
// clear log line and modelfleet_router_config_errors_total, and the previous snapshot stays.
// Two sources feed it: FileConfigWatcher (--config: a file polled for changes each second,
// endpoints from the file) and ClusterWatcher (--configmap: informers on the ConfigMap and on
// the namespace's EndpointSlices, changes debounced into one rebuild).
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>

#include "common/status.h"
#include "k8s/client.h"
#include "k8s/informer.h"
#include "server/router/snapshot.h"

namespace mf::router {

class SnapshotPublisher {
 public:
  // `cluster_mode`: endpoints come from UpdateEndpoints(); otherwise from the config itself.
  SnapshotPublisher(SnapshotStore& store, bool cluster_mode, RouterMetrics* metrics = &RouterMetrics::Get());

  // Parses `text` and publishes a snapshot when it differs from the config in force. A bad config
  // keeps the previous snapshot: the error is logged, counted and returned.
  Status UpdateConfig(std::string_view text, std::string_view source);
  // Cluster mode: the namespace's EndpointSlices, as ServiceEndpointsFromSlices reads them.
  void UpdateEndpoints(ServiceEndpoints endpoints);
  // Counts and logs a config problem found before parsing (ConfigMap or key missing).
  void ReportConfigError(const std::string& message);

  bool ready() const;  // a valid config has been published
  uint64_t generation() const;

 private:
  void PublishLocked(const std::vector<std::string>& config_changes);

  SnapshotStore& store_;
  const bool cluster_mode_;
  RouterMetrics* metrics_;
  EndpointRegistry registry_;
  mutable std::mutex mu_;
  std::string last_text_;  // last text seen, valid or not: unchanged text is not re-reported
  std::optional<RouterConfig> config_;
  ServiceEndpoints endpoints_;
  std::shared_ptr<const Snapshot> current_;
  uint64_t generation_ = 0;
};

class FileConfigWatcher {
 public:
  FileConfigWatcher(std::filesystem::path path, SnapshotPublisher& publisher,
                    std::chrono::milliseconds poll_interval = std::chrono::seconds(1));
  ~FileConfigWatcher();

  // Reads the file once (an unreadable or bad file is an error), then polls it in the background.
  Status Start();
  void Stop();

 private:
  // Re-reads the file when its modification time, size or inode changed.
  void Poll();

  const std::filesystem::path path_;
  SnapshotPublisher& publisher_;
  const std::chrono::milliseconds poll_interval_;
  std::optional<std::tuple<std::filesystem::file_time_type, uintmax_t, uint64_t>> seen_;
  std::string last_error_;
  std::jthread thread_;
};

class ClusterWatcher {
 public:
  // Watches ConfigMap `ns/name` (key router.yaml) and the EndpointSlices of `ns`.
  ClusterWatcher(k8s::Client& client, std::string ns, std::string name, SnapshotPublisher& publisher,
                 std::chrono::milliseconds debounce = std::chrono::milliseconds(20));
  ~ClusterWatcher();

  Status Start();
  // Waits until both informers listed once and the first rebuild ran; false on timeout. Nothing
  // needs to wait: until then the router answers 503 and /readyz says not ready.
  bool WaitForSync(std::chrono::milliseconds timeout);
  void Stop();

  static constexpr const char* kConfigKey = "router.yaml";

 private:
  void Changed();
  void RunRebuilds(std::stop_token stop);
  void Rebuild();

  const std::string ns_, name_;
  SnapshotPublisher& publisher_;
  const std::chrono::milliseconds debounce_;
  k8s::Informer configmaps_, slices_;
  std::mutex mu_;
  std::condition_variable_any changed_cv_;
  bool dirty_ = false;
  bool rebuilt_once_ = false;
  std::condition_variable rebuilt_cv_;
  std::jthread thread_;
};

}  // namespace mf::router
