#include "server/repository/version_scanner.h"

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace mf::server {
namespace {

Status ErrnoStatus(int err, const std::string& what) {
  std::string message = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return NotFound(message);
    case EACCES:
    case EPERM:
      return PermissionDenied(message);
    default:
      return Unavailable(message);
  }
}

struct DirCloser {
  void operator()(DIR* d) const { closedir(d); }
};

}  // namespace

bool ParseVersionDirName(const std::string& name, int64_t* version) {
  if (name.empty() || name.size() > 19) return false;
  int64_t value = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
    int digit = c - '0';
    if (value > (INT64_MAX - digit) / 10) return false;
    value = value * 10 + digit;
  }
  *version = value;
  return true;
}

StatusOr<std::map<int64_t, ScannedVersion>> VersionScanner::Scan() {
  std::unique_ptr<DIR, DirCloser> dir(opendir(base_path_.c_str()));
  if (!dir) return ErrnoStatus(errno, "cannot list model base path " + base_path_);

  std::map<int64_t, ScannedVersion> found;
  std::map<int64_t, Seen> seen;
  const auto now = std::chrono::steady_clock::now();
  errno = 0;
  while (const dirent* entry = readdir(dir.get())) {
    int64_t version = 0;
    if (!ParseVersionDirName(entry->d_name, &version)) continue;
    std::string model_path = base_path_ + "/" + entry->d_name + "/" + kModelFileName;
    struct stat st {};
    if (stat(model_path.c_str(), &st) != 0) {
      int err = errno;
      // A version directory without its model file yet is being written: not an error.
      if (err == ENOENT || err == ENOTDIR) continue;
      return ErrnoStatus(err, "cannot stat " + model_path);
    }
    if (!S_ISREG(st.st_mode)) continue;
    FileFingerprint fp{static_cast<uint64_t>(st.st_size),
                       int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec};
    auto prev = previous_.find(version);
    const bool unchanged = prev != previous_.end() && prev->second.fingerprint == fp;
    const auto since = unchanged ? prev->second.since : now;
    seen.emplace(version, Seen{fp, since});
    found.emplace(version, ScannedVersion{std::move(model_path), fp, unchanged && now - since >= min_stable_age_});
    errno = 0;
  }
  if (errno != 0) return ErrnoStatus(errno, "cannot list model base path " + base_path_);

  previous_ = std::move(seen);
  return found;
}

}  // namespace mf::server
