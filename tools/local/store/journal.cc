#include "tools/local/store/journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace mf::local {
namespace {

Status Errno(const std::string& what) { return Internal(what + ": " + std::strerror(errno)); }

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("writing " + path);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Journal::Journal(std::filesystem::path dir, int wal_fd, size_t records, size_t wal_bytes)
    : dir_(std::move(dir)), wal_fd_(wal_fd), records_(records), wal_bytes_(wal_bytes) {}

Journal::~Journal() { ::close(wal_fd_); }

StatusOr<std::unique_ptr<Journal>> Journal::Open(const std::filesystem::path& dir, Loaded* loaded) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("cannot create data directory " + dir.string() + ": " + ec.message());
  loaded->snapshot = nullptr;
  loaded->records.clear();

  const auto snapshot_path = dir / "snapshot.json";
  if (std::filesystem::exists(snapshot_path)) {
    std::ifstream in(snapshot_path);
    std::stringstream buf;
    buf << in.rdbuf();
    loaded->snapshot = nlohmann::json::parse(buf.str(), nullptr, /*allow_exceptions=*/false);
    if (loaded->snapshot.is_discarded() || !loaded->snapshot.is_object()) {
      return DataLoss(snapshot_path.string() + " is not a valid snapshot; move it away to start empty");
    }
  }

  const auto wal_path = dir / "wal.jsonl";
  size_t valid_bytes = 0;
  if (std::filesystem::exists(wal_path)) {
    std::ifstream in(wal_path, std::ios::binary);
    std::string line;
    size_t offset = 0;
    while (std::getline(in, line)) {
      bool complete = !in.eof();  // getline hit '\n'
      auto record = nlohmann::json::parse(line, nullptr, false);
      if (record.is_discarded() || !record.is_object() || !complete) {
        if (in.peek() == EOF) break;  // a torn final record: the write never completed
        return DataLoss(wal_path.string() + " has a corrupt record at byte " + std::to_string(offset));
      }
      loaded->records.push_back(std::move(record));
      offset += line.size() + 1;
      valid_bytes = offset;
    }
  }
  int fd = ::open(wal_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("opening " + wal_path.string());
  if (::ftruncate(fd, static_cast<off_t>(valid_bytes)) != 0) {
    Status s = Errno("truncating the torn tail of " + wal_path.string());
    ::close(fd);
    return s;
  }
  return std::unique_ptr<Journal>(new Journal(dir, fd, loaded->records.size(), valid_bytes));
}

Status Journal::Append(const nlohmann::json& record) {
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line.push_back('\n');
  Status written = WriteAll(wal_fd_, line, (dir_ / "wal.jsonl").string());
  if (!written.ok()) {
    // A partial record in the middle of the log would make the next start fail; cut it off.
    if (::ftruncate(wal_fd_, static_cast<off_t>(wal_bytes_)) != 0) {
      return Internal(written.message() + "; and the partial record could not be removed: " + std::strerror(errno));
    }
    return written;
  }
  wal_bytes_ += line.size();
  ++records_;
  return Status::Ok();
}

Status Journal::WriteSnapshot(const nlohmann::json& snapshot) {
  const auto tmp = dir_ / "snapshot.json.tmp";
  const auto final_path = dir_ / "snapshot.json";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno("creating " + tmp.string());
  Status s = WriteAll(fd, snapshot.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), tmp.string());
  if (s.ok() && ::fsync(fd) != 0) s = Errno("syncing " + tmp.string());
  ::close(fd);
  if (!s.ok()) return s;
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) return Errno("renaming " + tmp.string());
  // The snapshot now holds everything the log held; a crash before this truncate only means the
  // replay skips records at or below the snapshot's version.
  if (::ftruncate(wal_fd_, 0) != 0) return Errno("truncating " + (dir_ / "wal.jsonl").string());
  records_ = 0;
  wal_bytes_ = 0;
  return Status::Ok();
}

}  // namespace mf::local
