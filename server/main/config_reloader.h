// Re-reads --model_config_file every --model_config_file_poll_wait_seconds and hands a changed,
// valid config to the manager (TF Serving's reload: the new list replaces the old one). A file
// that does not parse or validate is logged and ignored: the models keep serving as they were.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/repository/model_manager.h"

namespace mf::server {

class ConfigReloader {
 public:
  ConfigReloader(std::string path, std::chrono::seconds interval, std::shared_ptr<ModelManager> manager);
  ~ConfigReloader();
  ConfigReloader(const ConfigReloader&) = delete;
  ConfigReloader& operator=(const ConfigReloader&) = delete;

  // One reload attempt; true when a new config was applied.
  bool ReloadOnce();

 private:
  const std::string path_;
  const std::chrono::seconds interval_;
  const std::shared_ptr<ModelManager> manager_;
  std::vector<ModelConfig> current_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace mf::server
