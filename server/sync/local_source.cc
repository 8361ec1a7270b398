#include "server/sync/local_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "server/sync/file_util.h"
#include "server/sync/sha256.h"

namespace mf::sync {
namespace {

namespace fs = std::filesystem;

constexpr size_t kChunkBytes = 1 << 20;

struct FileDigest {
  uint64_t bytes = 0;
  std::string sha256;
};

bool IsWithin(const fs::path& path, const fs::path& root) {
  fs::path relative = path.lexically_relative(root);
  return !relative.empty() && *relative.begin() != "..";
}

bool SameStat(const struct stat& a, const struct stat& b) {
  return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

// Reads `from` once, hashing it and, unless `to` is empty, writing it to a new file `to`.
StatusOr<FileDigest> CopyFile(const fs::path& from, const fs::path& to, const Cancellation& cancellation) {
  Fd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return ErrnoStatus("opening " + from.string(), errno);
  struct stat before {};
  if (::fstat(in.get(), &before) != 0) return ErrnoStatus("stat of " + from.string(), errno);
  Fd out;
  if (!to.empty()) {
    out = Fd(::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!out.valid()) return ErrnoStatus("creating " + to.string(), errno);
  }
  Sha256 sha;
  FileDigest digest;
  std::vector<char> buffer(kChunkBytes);
  while (true) {
    if (cancellation.cancelled()) return Cancelled("stopped while copying " + from.string());
    ssize_t n = ::read(in.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("reading " + from.string(), errno);
    if (n == 0) break;
    std::string_view chunk(buffer.data(), static_cast<size_t>(n));
    sha.Update(chunk);
    if (out.valid()) MF_RETURN_IF_ERROR(WriteAll(out.get(), chunk, to.string()));
    digest.bytes += static_cast<uint64_t>(n);
  }
  struct stat after {};
  if (::fstat(in.get(), &after) != 0) return ErrnoStatus("stat of " + from.string(), errno);
  if (!SameStat(before, after) || digest.bytes != static_cast<uint64_t>(after.st_size)) {
    return Unavailable(from.string() + " changed while it was read (is it still being written?)");
  }
  if (out.valid()) {
    if (::fsync(out.get()) != 0) return ErrnoStatus("fsync of " + to.string(), errno);
    MF_RETURN_IF_ERROR(out.Close(to.string()));
  }
  digest.sha256 = sha.HexDigest();
  return digest;
}

// Walks a directory source in sorted order, feeding the tree digest and copying when asked.
class TreeReader {
 public:
  TreeReader(const Source& source, fs::path real_root, const fs::path* staging, const Cancellation& cancellation)
      : source_(source), real_root_(std::move(real_root)), staging_(staging), cancellation_(cancellation) {}

  StatusOr<Content> Read() {
    MF_RETURN_IF_ERROR(ReadDirectory(fs::path()));
    if (files_ == 0) {
      return Unavailable("source " + source_.uri + " is a directory without files (is it still being uploaded?)");
    }
    Content content;
    content.bytes = bytes_;
    content.sha256 = tree_.HexDigest();
    return content;
  }

 private:
  Status ReadDirectory(const fs::path& relative) {
    const fs::path directory = real_root_ / relative;
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(directory, ec)) names.push_back(entry.path().filename().string());
    if (ec) return ErrnoStatus("listing " + directory.string(), ec.value());
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      if (relative.empty() && name == kMarkerName) {
        return InvalidArgument("source " + source_.uri + " holds a file named " + kMarkerName +
                               ", which modelfleet-sync writes itself; remove or rename it");
      }
      MF_RETURN_IF_ERROR(ReadEntry(relative / name));
    }
    return Status::Ok();
  }

  Status ReadEntry(const fs::path& relative) {
    const fs::path path = real_root_ / relative;
    const fs::path target = staging_ ? *staging_ / relative : fs::path();
    std::error_code ec;
    fs::file_status status = fs::symlink_status(path, ec);
    if (ec) return ErrnoStatus("stat of " + path.string(), ec.value());
    if (fs::is_directory(status)) {
      Add('d', relative, "");
      if (staging_ && ::mkdir(target.c_str(), 0755) != 0) return ErrnoStatus("creating " + target.string(), errno);
      return ReadDirectory(relative);
    }
    if (fs::is_regular_file(status)) {
      MF_ASSIGN_OR_RETURN(FileDigest digest, CopyFile(path, target, cancellation_));
      Add('f', relative, std::to_string(digest.bytes) + " " + digest.sha256);
      bytes_ += digest.bytes;
      ++files_;
      return Status::Ok();
    }
    if (fs::is_symlink(status)) {
      fs::path resolved = fs::canonical(path, ec);
      if (ec) return InvalidArgument("source " + source_.uri + ": symlink " + path.string() + " is broken");
      if (!IsWithin(resolved, real_root_)) {
        return InvalidArgument("source " + source_.uri + ": symlink " + path.string() + " points outside it, to " +
                               resolved.string());
      }
      // Relative, so it keeps pointing inside the copy wherever the copy lands.
      fs::path link = resolved.lexically_relative(path.parent_path());
      Add('l', relative, link.string());
      if (staging_) {
        fs::create_symlink(link, target, ec);
        if (ec) return ErrnoStatus("creating symlink " + target.string(), ec.value());
      }
      return Status::Ok();
    }
    return InvalidArgument("source " + source_.uri + ": " + path.string() +
                           " is not a regular file, directory or symlink");
  }

  void Add(char kind, const fs::path& relative, const std::string& payload) {
    std::string entry(1, kind);
    entry += relative.string();
    entry += '\0';
    entry += payload;
    entry += '\0';
    tree_.Update(entry);
  }

  const Source& source_;
  const fs::path real_root_;
  const fs::path* staging_;
  const Cancellation& cancellation_;
  Sha256 tree_;
  uint64_t bytes_ = 0;
  uint64_t files_ = 0;
};

}  // namespace

StatusOr<Content> ReadLocalSource(const Source& source, const fs::path* staging, const Cancellation& cancellation) {
  std::error_code ec;
  fs::path real_root = fs::canonical(source.root, ec);
  if (ec) return ErrnoStatus("source " + source.uri + ": " + source.root.string(), ec.value());
  fs::path real = fs::canonical(source.path, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) {
      return NotFound("source " + source.uri + ": " + source.path.string() +
                      " does not exist (is it still being uploaded?)");
    }
    return ErrnoStatus("source " + source.uri + ": " + source.path.string(), ec.value());
  }
  if (real != real_root && !IsWithin(real, real_root)) {
    return InvalidArgument("source " + source.uri + " resolves to " + real.string() + ", outside " +
                           source.root.string() + " (a symlink points out of it)");
  }
  fs::file_status status = fs::status(real, ec);
  if (ec) return ErrnoStatus("source " + source.uri + ": stat of " + real.string(), ec.value());
  if (fs::is_directory(status)) return TreeReader(source, real, staging, cancellation).Read();
  if (!fs::is_regular_file(status)) {
    return InvalidArgument("source " + source.uri + " is neither a regular file nor a directory");
  }
  Content content;
  content.file_name = source.path.filename().string();
  MF_ASSIGN_OR_RETURN(FileDigest digest,
                      CopyFile(real, staging ? *staging / content.file_name : fs::path(), cancellation));
  content.bytes = digest.bytes;
  content.sha256 = std::move(digest.sha256);
  return content;
}

}  // namespace mf::sync
