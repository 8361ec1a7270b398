// The few POSIX file operations the sync needs with durable, checked results: errno mapped to a
// Status that names the path, a file descriptor owner, full writes, fsync of a path.
#pragma once

#include <filesystem>
#include <string_view>

#include "common/status.h"

namespace mf::sync {

// "<what>: <strerror>" with a code by errno: NotFound, PermissionDenied, ResourceExhausted (disk
// or quota full), Unavailable otherwise (worth a retry).
Status ErrnoStatus(std::string_view what, int error);

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes now and reports the error close(2) saw (NFS reports write errors there).
  Status Close(std::string_view what);

 private:
  int fd_;
};

Status WriteAll(int fd, std::string_view data, std::string_view what);

// fsync(2) of a file or directory (directories: so renames and new entries are durable).
Status FsyncPath(const std::filesystem::path& path);

}  // namespace mf::sync
