// A model base path in a fresh temporary directory, removed at the end of the test.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace mf::server::testing {

class TempRepository {
 public:
  TempRepository() {
    std::string pattern = (std::filesystem::temp_directory_path() / "mf-repo-XXXXXX").string();
    root_ = mkdtemp(pattern.data());
    base_ = root_ / "model";
    std::filesystem::create_directory(base_);
  }
  ~TempRepository() {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }
  TempRepository(const TempRepository&) = delete;
  TempRepository& operator=(const TempRepository&) = delete;

  std::string base() const { return base_.string(); }
  std::filesystem::path root() const { return root_; }

  void WriteVersion(int64_t version, const std::string& contents) const {
    auto dir = base_ / std::to_string(version);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "model.onnx", std::ios::binary | std::ios::trunc) << contents;
  }
  void RemoveVersion(int64_t version) const { std::filesystem::remove_all(base_ / std::to_string(version)); }

 private:
  std::filesystem::path root_;
  std::filesystem::path base_;
};

}  // namespace mf::server::testing
