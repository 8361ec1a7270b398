#include "server/sync/publish.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

#include "common/logging.h"
#include "server/sync/file_util.h"

namespace mf::sync {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxMarkerBytes = 16 * 1024;

std::string SiblingName(const fs::path& dest, std::string_view kind, pid_t pid) {
  return "." + dest.filename().string() + "." + std::string(kind) + "-" + std::to_string(pid);
}

// A staging (".tmp-") or set-aside (".old-") sibling of `dest` whose sync is gone: its pid is
// not running here, or is ours (a container restarted with the same pid).
bool IsStaleSibling(const fs::path& dest, const std::string& name) {
  for (std::string_view kind : {"tmp", "old"}) {
    std::string prefix = "." + dest.filename().string() + "." + std::string(kind) + "-";
    if (!name.starts_with(prefix)) continue;
    std::string_view digits = std::string_view(name).substr(prefix.size());
    pid_t pid = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (ec != std::errc() || end != digits.data() + digits.size() || pid <= 0) return false;
    return pid == ::getpid() || (::kill(pid, 0) != 0 && errno == ESRCH);
  }
  return false;
}

void RemoveStaleSiblings(const fs::path& dest) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dest.parent_path(), ec)) {
    std::string name = entry.path().filename().string();
    if (!IsStaleSibling(dest, name)) continue;
    std::error_code remove_ec;
    fs::remove_all(entry.path(), remove_ec);
    if (remove_ec) {
      log::Warning("cannot remove what an earlier sync left",
                   {{"path", entry.path().string()}, {"error", remove_ec.message()}});
    } else {
      log::Info("removed what an earlier sync left", {{"path", entry.path().string()}});
    }
  }
}

std::string FormatMarker(const Marker& marker) {
  return "source=" + marker.source + "\nsha256=" + marker.content.sha256 +
         "\nbytes=" + std::to_string(marker.content.bytes) + "\nfile=" + marker.content.file_name + "\n";
}

Status WriteMarker(const fs::path& dir, const Marker& marker) {
  fs::path path = dir / kMarkerName;
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus("creating " + path.string(), errno);
  MF_RETURN_IF_ERROR(WriteAll(fd.get(), FormatMarker(marker), path.string()));
  if (::fsync(fd.get()) != 0) return ErrnoStatus("fsync of " + path.string(), errno);
  return fd.Close(path.string());
}

// Files are fsynced as they are written; their directory entries need the directories synced.
Status FsyncDirectories(const fs::path& root) {
  MF_RETURN_IF_ERROR(FsyncPath(root));
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->is_directory(ec) && !it->is_symlink(ec)) MF_RETURN_IF_ERROR(FsyncPath(it->path()));
  }
  if (ec) return Unavailable("listing " + root.string() + " to fsync it: " + ec.message());
  return Status::Ok();
}

void RemoveOld(const fs::path& old) {
  std::error_code ec;
  fs::remove_all(old, ec);
  if (ec) log::Warning("cannot remove the replaced version", {{"path", old.string()}, {"error", ec.message()}});
}

}  // namespace

bool SameContent(const Content& a, const Content& b) {
  return a.sha256 == b.sha256 && a.file_name == b.file_name && a.bytes == b.bytes;
}

std::optional<Marker> ReadMarker(const fs::path& dir) {
  std::ifstream in(dir / kMarkerName, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxMarkerBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  Marker marker;
  bool has_sha = false;
  bool has_bytes = false;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) return std::nullopt;
    std::string_view key = std::string_view(line).substr(0, eq);
    std::string value = line.substr(eq + 1);
    if (key == "source") {
      marker.source = std::move(value);
    } else if (key == "sha256") {
      has_sha = value.size() == 64;
      marker.content.sha256 = std::move(value);
    } else if (key == "bytes") {
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), marker.content.bytes);
      has_bytes = ec == std::errc() && end == value.data() + value.size();
    } else if (key == "file") {
      marker.content.file_name = std::move(value);
    }
  }
  if (!has_sha || !has_bytes) return std::nullopt;
  return marker;
}

StatusOr<Staging> Staging::Create(const fs::path& dest) {
  std::error_code ec;
  fs::create_directories(dest.parent_path(), ec);
  if (ec) return ErrnoStatus("creating " + dest.parent_path().string(), ec.value());
  RemoveStaleSiblings(dest);
  fs::path path = dest.parent_path() / SiblingName(dest, "tmp", ::getpid());
  if (::mkdir(path.c_str(), 0755) != 0) return ErrnoStatus("creating " + path.string(), errno);
  return Staging(std::move(path), dest);
}

Staging::Staging(fs::path path, fs::path dest) : path_(std::move(path)), dest_(std::move(dest)) {}

Staging::Staging(Staging&& other) noexcept
    : path_(std::exchange(other.path_, fs::path())), dest_(std::move(other.dest_)) {}

Staging::~Staging() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
  if (ec) log::Warning("cannot remove the staging directory", {{"path", path_.string()}, {"error", ec.message()}});
}

Status Staging::Publish(const Marker& marker) {
  MF_RETURN_IF_ERROR(WriteMarker(path_, marker));
  MF_RETURN_IF_ERROR(FsyncDirectories(path_));
  MF_RETURN_IF_ERROR(ReplaceDirectory(path_, dest_));
  path_.clear();
  return Status::Ok();
}

Status ReplaceDirectory(const fs::path& staged, const fs::path& dest, bool allow_exchange) {
  const fs::path parent = dest.parent_path();
  auto published = [&]() -> Status { return FsyncPath(parent); };
  // Absent or an empty directory: a plain rename replaces it in one step.
  if (::rename(staged.c_str(), dest.c_str()) == 0) return published();
  if (errno != ENOTEMPTY && errno != EEXIST && errno != ENOTDIR && errno != EISDIR) {
    return ErrnoStatus("renaming " + staged.string() + " to " + dest.string(), errno);
  }
  if (allow_exchange) {
    if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, dest.c_str(), RENAME_EXCHANGE) == 0) {
      RemoveOld(staged);  // holds the old content now
      return published();
    }
    if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
      return ErrnoStatus("exchanging " + staged.string() + " with " + dest.string(), errno);
    }
  }
  const fs::path aside = parent / SiblingName(dest, "old", ::getpid());
  std::error_code ec;
  fs::remove_all(aside, ec);
  if (::rename(dest.c_str(), aside.c_str()) != 0) {
    return ErrnoStatus("renaming the old " + dest.string() + " aside to " + aside.string(), errno);
  }
  if (::rename(staged.c_str(), dest.c_str()) != 0) {
    Status failed = ErrnoStatus("renaming " + staged.string() + " to " + dest.string(), errno);
    if (::rename(aside.c_str(), dest.c_str()) != 0) {
      return Status(failed.code(), failed.message() + "; renaming the old version back from " + aside.string() +
                                       " failed too: " + std::strerror(errno));
    }
    return failed;
  }
  RemoveOld(aside);
  return published();
}

}  // namespace mf::sync
