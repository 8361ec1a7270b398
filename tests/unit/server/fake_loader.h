// A Loader that needs no runtime: the "model file" is text; "bad..." fails to load, anything
// else loads as a servable whose single output is its own version number. Counts loads and
// live servables so tests can check swap order and memory use.
#pragma once

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>

#include "server/repository/loader.h"

namespace mf::server::testing {

class FakeServable : public Servable {
 public:
  FakeServable(int64_t version, std::string path, std::atomic<int>* live)
      : version_(version), path_(std::move(path)), live_(live) {
    ++*live_;
  }
  ~FakeServable() override { --*live_; }

  const runtime::Signature& signature() const override { return signature_; }
  Status Run(const std::vector<const runtime::Tensor*>&, Outputs* outputs) const override {
    auto t = runtime::Tensor::Allocate(runtime::DataType::kInt64, {1});
    if (!t.ok()) return t.status();
    t->data<int64_t>()[0] = version_;
    outputs->clear();
    outputs->push_back(std::move(t).value());
    return Status::Ok();
  }
  size_t memory_bytes() const override { return 1; }
  int64_t version() const { return version_; }
  const std::string& path() const { return path_; }  // the model file it was loaded from

 private:
  int64_t version_;
  std::string path_;
  std::atomic<int>* live_;
  runtime::Signature signature_;
};

class FakeLoader : public Loader {
 public:
  using Loader::Load;
  StatusOr<std::shared_ptr<const Servable>> Load(const LoadRequest& request) override {
    const int64_t version = request.version;
    const std::string& path = request.model_path;
    std::ifstream in(path);
    std::stringstream contents;
    contents << in.rdbuf();
    {
      std::lock_guard lock(mu_);
      ++loads_[version];
      last_device_[version] = request.device;
      max_live_at_load_ = std::max(max_live_at_load_, live_.load() + 1);
    }
    if (!in) return NotFound("cannot read " + path);
    if (contents.str().rfind("bad", 0) == 0) return InvalidArgument("malformed model " + path);
    // Stands in for a GPU-less machine: a strict cuda load is refused as the runtime would.
    if (refuse_cuda_ && request.device == DeviceChoice::kCuda) return Unavailable("no CUDA device");
    return std::shared_ptr<const Servable>(std::make_shared<FakeServable>(version, path, &live_));
  }

  int loads(int64_t version) {
    std::lock_guard lock(mu_);
    return loads_[version];
  }
  // The device the last load of `version` asked for (nullopt: the default).
  std::optional<DeviceChoice> last_device(int64_t version) {
    std::lock_guard lock(mu_);
    return last_device_[version];
  }
  void set_refuse_cuda(bool refuse) { refuse_cuda_ = refuse; }
  int live() const { return live_.load(); }
  int max_live_at_load() {
    std::lock_guard lock(mu_);
    return max_live_at_load_;
  }

 private:
  std::mutex mu_;
  std::map<int64_t, int> loads_;
  std::map<int64_t, std::optional<DeviceChoice>> last_device_;
  std::atomic<bool> refuse_cuda_{false};
  std::atomic<int> live_{0};
  int max_live_at_load_ = 0;
};

}  // namespace mf::server::testing
