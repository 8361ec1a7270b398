// VersionScanner: the Source half of the repository. It lists <base_path>/<version>/model.onnx
// and reports which versions are complete. A version counts as complete only when its
// model.onnx had the same size and modification time on two consecutive scans at least
// `min_stable_age` apart (by this process's clock, not the file system's), so a file still being
// copied in is not loaded half-written, even when two scans follow each other closely (at
// start-up, or after a config change woke the manager).
//
// A scan that cannot read the base path (missing, permission denied, I/O error) returns an
// error instead of an empty list: callers must treat that as a storage glitch, never as "all
// versions were deleted".
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <map>
#include <string>

#include "common/status.h"

namespace mf::server {

// Identifies the bytes of a model file cheaply; a change means the file was rewritten.
struct FileFingerprint {
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  friend bool operator==(const FileFingerprint&, const FileFingerprint&) = default;
};

struct ScannedVersion {
  std::string model_path;  // <base>/<version>/model.onnx
  FileFingerprint fingerprint;
  bool stable = false;  // fingerprint unchanged since a scan at least min_stable_age ago
};

class VersionScanner {
 public:
  static constexpr const char* kModelFileName = "model.onnx";

  explicit VersionScanner(std::string base_path,
                          std::chrono::milliseconds min_stable_age = std::chrono::milliseconds(0))
      : base_path_(std::move(base_path)), min_stable_age_(min_stable_age) {}

  // Versions whose directory holds a model.onnx. Directories whose name is not a non-negative
  // decimal int64 are ignored (e.g. "tmp", "3.partial"), as are version directories without a
  // model.onnx yet. Errors: NOT_FOUND when the base path is missing, PERMISSION_DENIED /
  // UNAVAILABLE when it or a model file cannot be read.
  StatusOr<std::map<int64_t, ScannedVersion>> Scan();

  const std::string& base_path() const { return base_path_; }

 private:
  struct Seen {
    FileFingerprint fingerprint;
    std::chrono::steady_clock::time_point since;  // first scan that saw this fingerprint
  };
  std::string base_path_;
  std::chrono::milliseconds min_stable_age_;
  std::map<int64_t, Seen> previous_;  // what the last successful scan saw
};

// Parses a version directory name: decimal digits only, fits in int64.
bool ParseVersionDirName(const std::string& name, int64_t* version);

}  // namespace mf::server
