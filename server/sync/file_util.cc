#include "server/sync/file_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace mf::sync {

Status ErrnoStatus(std::string_view what, int error) {
  std::string message = std::string(what) + ": " + std::strerror(error);
  switch (error) {
    case ENOENT:
    case ENOTDIR:
      return NotFound(std::move(message));
    case EACCES:
    case EPERM:
    case EROFS:
      return PermissionDenied(std::move(message));
    case ENOSPC:
    case EDQUOT:
      return ResourceExhausted(std::move(message));
    default:
      return Unavailable(std::move(message));
  }
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.release();
  }
  return *this;
}

Status Fd::Close(std::string_view what) {
  if (fd_ < 0) return Status::Ok();
  int rc = ::close(release());
  return rc == 0 ? Status::Ok() : ErrnoStatus(std::string("closing ") + std::string(what), errno);
}

Status WriteAll(int fd, std::string_view data, std::string_view what) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(std::string("writing ") + std::string(what), errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Status FsyncPath(const std::filesystem::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("opening " + path.string() + " to fsync it", errno);
  if (::fsync(fd.get()) != 0) return ErrnoStatus("fsync of " + path.string(), errno);
  return fd.Close(path.string());
}

}  // namespace mf::sync
