#include "server/router/config_watcher.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "common/logging.h"

namespace mf::router {
namespace {

// "v1 2/3 ready" per version whose endpoint counts differ between two snapshots.
std::vector<std::string> DescribeEndpointChanges(const Snapshot* before, const Snapshot& after) {
  std::vector<std::string> changes;
  for (size_t i = 0; i < after.versions.size(); ++i) {
    const VersionTargets& v = after.versions[i];
    std::string now = std::to_string(after.rest_ready[i]) + "/" + std::to_string(after.rest_total[i]) + " ready";
    int old = before ? before->config.VersionIndex(v.name) : -1;
    if (old >= 0) {
      const VersionTargets& was = before->versions[old];
      bool same =
          was.rest.size() == v.rest.size() && was.grpc.size() == v.grpc.size() && was.rest_total == v.rest_total;
      for (size_t e = 0; same && e < v.rest.size(); ++e) same = was.rest[e] == v.rest[e];
      for (size_t e = 0; same && e < v.grpc.size(); ++e) same = was.grpc[e] == v.grpc[e];
      if (same) continue;
      changes.push_back("endpoints of " + v.name + ": " + std::to_string(before->rest_ready[old]) + "/" +
                        std::to_string(before->rest_total[old]) + " ready -> " + now);
    } else {
      changes.push_back("endpoints of " + v.name + ": " + now);
    }
  }
  return changes;
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

}  // namespace

SnapshotPublisher::SnapshotPublisher(SnapshotStore& store, bool cluster_mode, RouterMetrics* metrics)
    : store_(store), cluster_mode_(cluster_mode), metrics_(metrics) {}

Status SnapshotPublisher::UpdateConfig(std::string_view text, std::string_view source) {
  std::lock_guard lock(mu_);
  if (text == last_text_ && config_) return Status::Ok();
  const bool repeated = text == last_text_;
  last_text_ = std::string(text);
  StatusOr<RouterConfig> parsed = ParseRouterConfig(text, source);
  if (!parsed.ok()) {
    if (!repeated) {
      if (metrics_) metrics_->config_errors().Increment();
      log::Error(config_ ? "refused the new router config; the previous one stays in force"
                         : "refused the router config; not ready until a valid one arrives",
                 {{"error", parsed.status().message()}});
    }
    return parsed.status();
  }
  if (config_ && *config_ == *parsed) return Status::Ok();
  std::vector<std::string> changes =
      config_ ? DescribeConfigChanges(*config_, *parsed) : std::vector<std::string>{"first config"};
  config_ = std::move(parsed).value();
  PublishLocked(changes);
  return Status::Ok();
}

void SnapshotPublisher::UpdateEndpoints(ServiceEndpoints endpoints) {
  std::lock_guard lock(mu_);
  if (endpoints == endpoints_) return;
  endpoints_ = std::move(endpoints);
  if (config_) PublishLocked({});
}

void SnapshotPublisher::ReportConfigError(const std::string& message) {
  std::lock_guard lock(mu_);
  if (last_text_ == "\x01" + message) return;  // the same problem, seen again: said once
  last_text_ = "\x01" + message;
  if (metrics_) metrics_->config_errors().Increment();
  log::Error(config_ ? "router config unusable; the previous one stays in force" : "router config unusable",
             {{"error", message}});
}

void SnapshotPublisher::PublishLocked(const std::vector<std::string>& config_changes) {
  std::shared_ptr<const Snapshot> next =
      BuildSnapshot(*config_, cluster_mode_ ? &endpoints_ : nullptr, generation_ + 1, registry_, metrics_);
  std::vector<std::string> changes = config_changes;
  for (std::string& c : DescribeEndpointChanges(current_.get(), *next)) changes.push_back(std::move(c));
  if (changes.empty() && current_) return;  // endpoints of services no version uses changed
  ++generation_;
  if (metrics_) {
    for (const VersionTargets& v : next->versions) {
      v.metrics->ready_endpoints(Protocol::kRest).Set(static_cast<double>(v.rest.size()));
      v.metrics->ready_endpoints(Protocol::kGrpc).Set(static_cast<double>(v.grpc.size()));
    }
    if (current_) {
      for (const VersionTargets& v : current_->versions) {
        if (next->config.VersionIndex(v.name) >= 0) continue;
        v.metrics->ready_endpoints(Protocol::kRest).Set(0);
        v.metrics->ready_endpoints(Protocol::kGrpc).Set(0);
      }
    }
    metrics_->config_generation().Set(static_cast<double>(generation_));
  }
  current_ = next;
  store_.Store(std::move(next));
  log::Info("router snapshot applied", {{"generation", std::to_string(generation_)}, {"changes", Join(changes)}});
}

bool SnapshotPublisher::ready() const {
  std::lock_guard lock(mu_);
  return current_ != nullptr;
}

uint64_t SnapshotPublisher::generation() const {
  std::lock_guard lock(mu_);
  return generation_;
}

FileConfigWatcher::FileConfigWatcher(std::filesystem::path path, SnapshotPublisher& publisher,
                                     std::chrono::milliseconds poll_interval)
    : path_(std::move(path)), publisher_(publisher), poll_interval_(poll_interval) {}

FileConfigWatcher::~FileConfigWatcher() { Stop(); }

Status FileConfigWatcher::Start() {
  std::ifstream in(path_, std::ios::binary);
  if (!in) return NotFound("cannot read router config " + path_.string() + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0) {
    seen_ = std::make_tuple(std::filesystem::last_write_time(path_), static_cast<uintmax_t>(st.st_size),
                            static_cast<uint64_t>(st.st_ino));
  }
  MF_RETURN_IF_ERROR(publisher_.UpdateConfig(text.str(), path_.string()));
  thread_ = std::jthread([this](std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    while (!stop.stop_requested()) {
      std::unique_lock lock(mu);
      cv.wait_for(lock, stop, poll_interval_, [] { return false; });
      if (stop.stop_requested()) break;
      Poll();
    }
  });
  return Status::Ok();
}

void FileConfigWatcher::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
}

void FileConfigWatcher::Poll() {
  struct stat st {};
  std::error_code ec;
  if (::stat(path_.c_str(), &st) != 0) {
    std::string error = "cannot stat router config " + path_.string() + ": " + std::strerror(errno);
    if (error != last_error_) publisher_.ReportConfigError(error);
    last_error_ = error;
    return;
  }
  auto mtime = std::filesystem::last_write_time(path_, ec);
  if (ec) return;
  auto now = std::make_tuple(mtime, static_cast<uintmax_t>(st.st_size), static_cast<uint64_t>(st.st_ino));
  if (seen_ && *seen_ == now) return;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return;  // replaced between stat and open: the next poll sees the new file
  std::stringstream text;
  text << in.rdbuf();
  seen_ = now;
  last_error_.clear();
  (void)publisher_.UpdateConfig(text.str(), path_.string());  // errors are logged and counted there
}

ClusterWatcher::ClusterWatcher(k8s::Client& client, std::string ns, std::string name, SnapshotPublisher& publisher,
                               std::chrono::milliseconds debounce)
    : ns_(std::move(ns)),
      name_(std::move(name)),
      publisher_(publisher),
      debounce_(debounce),
      configmaps_(client, {.collection = {k8s::resources::ConfigMaps(), ns_, "", ""},
                           .field_selector = "metadata.name=" + name_}),
      slices_(client, {.collection = {k8s::resources::EndpointSlices(), ns_, "", ""},
                       .label_selector = "kubernetes.io/service-name"}) {
  k8s::EventHandlers handlers{.on_add = [this](const k8s::ObjectPtr&) { Changed(); },
                              .on_update = [this](const k8s::ObjectPtr&, const k8s::ObjectPtr&) { Changed(); },
                              .on_delete = [this](const k8s::ObjectPtr&) { Changed(); }};
  configmaps_.AddEventHandlers(handlers);
  slices_.AddEventHandlers(handlers);
}

ClusterWatcher::~ClusterWatcher() { Stop(); }

Status ClusterWatcher::Start() {
  MF_RETURN_IF_ERROR(configmaps_.Start());
  MF_RETURN_IF_ERROR(slices_.Start());
  thread_ = std::jthread([this](std::stop_token stop) { RunRebuilds(stop); });
  return Status::Ok();
}

bool ClusterWatcher::WaitForSync(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return rebuilt_cv_.wait_for(lock, timeout, [&] { return rebuilt_once_; });
}

void ClusterWatcher::Stop() {
  if (thread_.joinable()) {
    thread_.request_stop();
    thread_.join();
  }
  configmaps_.Stop();
  slices_.Stop();
}

void ClusterWatcher::Changed() {
  {
    std::lock_guard lock(mu_);
    dirty_ = true;
  }
  changed_cv_.notify_one();
}

void ClusterWatcher::RunRebuilds(std::stop_token stop) {
  // The first rebuild runs once both informers listed, even when nothing was announced (a
  // ConfigMap that does not exist produces no event, and must still be reported).
  while (!(configmaps_.HasSynced() && slices_.HasSynced())) {
    std::unique_lock lock(mu_);
    changed_cv_.wait_for(lock, stop, std::chrono::milliseconds(10), [] { return false; });
    if (stop.stop_requested()) return;
  }
  Changed();
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (!changed_cv_.wait(lock, stop, [&] { return dirty_; })) return;
    }
    // A burst of changes (a rollout moving many pods) becomes one rebuild, at most debounce_ late.
    std::this_thread::sleep_for(debounce_);
    {
      std::lock_guard lock(mu_);
      dirty_ = false;
    }
    if (!configmaps_.HasSynced() || !slices_.HasSynced()) continue;
    Rebuild();
    {
      std::lock_guard lock(mu_);
      rebuilt_once_ = true;
    }
    rebuilt_cv_.notify_all();
  }
}

void ClusterWatcher::Rebuild() {
  publisher_.UpdateEndpoints(ServiceEndpointsFromSlices(slices_.store().List()));
  k8s::ObjectPtr configmap = configmaps_.store().Get(ns_ + "/" + name_);
  const std::string where = "ConfigMap " + ns_ + "/" + name_;
  if (!configmap) return publisher_.ReportConfigError(where + " does not exist");
  const nlohmann::json* text = nullptr;
  if (auto data = configmap->find("data"); data != configmap->end() && data->is_object()) {
    if (auto it = data->find(kConfigKey); it != data->end() && it->is_string()) text = &*it;
  }
  if (!text) return publisher_.ReportConfigError(where + " has no data key " + kConfigKey);
  (void)publisher_.UpdateConfig(text->get_ref<const std::string&>(), where + " " + kConfigKey);
}

}  // namespace mf::router
