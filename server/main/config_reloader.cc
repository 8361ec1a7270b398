#include "server/main/config_reloader.h"

#include "common/logging.h"
#include "server/config/model_server_config.h"

namespace mf::server {

ConfigReloader::ConfigReloader(std::string path, std::chrono::seconds interval, std::shared_ptr<ModelManager> manager)
    : path_(std::move(path)), interval_(interval), manager_(std::move(manager)) {
  if (auto initial = LoadModelServerConfigFile(path_); initial.ok()) current_ = *initial;
  thread_ = std::thread([this] {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, interval_, [this] { return stopping_; })) {
      lock.unlock();
      ReloadOnce();
      lock.lock();
    }
  });
}

ConfigReloader::~ConfigReloader() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool ConfigReloader::ReloadOnce() {
  auto loaded = LoadModelServerConfigFile(path_);
  if (!loaded.ok()) {
    log::Error("model config reload refused; models keep serving as configured before",
               {{"file", path_}, {"error", loaded.status().ToString()}});
    return false;
  }
  if (*loaded == current_) return false;
  if (auto set = manager_->SetModels(*loaded); !set.ok()) {
    log::Error("model config reload refused", {{"file", path_}, {"error", set.status().ToString()}});
    return false;
  }
  log::Info("model config reloaded", {{"file", path_}, {"models", std::to_string(loaded->size())}});
  current_ = std::move(*loaded);
  return true;
}

}  // namespace mf::server
