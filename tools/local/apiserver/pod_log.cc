#include "tools/local/apiserver/pod_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>

namespace mf::local {
namespace {

bool IsTrue(const std::string& v) { return v == "true" || v == "True" || v == "TRUE" || v == "1"; }
bool IsFalse(const std::string& v) { return v.empty() || v == "false" || v == "False" || v == "FALSE" || v == "0"; }

// Booleans as Go's strconv.ParseBool reads them (what kube-apiserver's query decoding uses).
StatusOr<bool> ParseBool(const std::map<std::string, std::string>& query, const std::string& key) {
  auto it = query.find(key);
  if (it == query.end()) return false;
  if (IsTrue(it->second)) return true;
  if (IsFalse(it->second)) return false;
  return FailedPrecondition(key + ": strconv.ParseBool: parsing \"" + it->second + "\": invalid syntax");
}

StatusOr<int64_t> ParseInt(const std::map<std::string, std::string>& query, const std::string& key, int64_t absent) {
  auto it = query.find(key);
  if (it == query.end()) return absent;
  const std::string& text = it->second;
  int64_t value = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) {
    return FailedPrecondition(key + ": strconv.ParseInt: parsing \"" + text + "\": invalid syntax");
  }
  return value;
}

Status ErrnoStatus(const std::string& what) { return Internal(what + ": " + std::strerror(errno)); }

constexpr size_t kBlock = 64 * 1024;

}  // namespace

StatusOr<PodLogOptions> ParsePodLogOptions(const std::map<std::string, std::string>& query) {
  PodLogOptions options;
  if (auto it = query.find("container"); it != query.end()) options.container = it->second;
  MF_ASSIGN_OR_RETURN(options.follow, ParseBool(query, "follow"));
  MF_ASSIGN_OR_RETURN(options.previous, ParseBool(query, "previous"));
  MF_ASSIGN_OR_RETURN(options.tail_lines, ParseInt(query, "tailLines", -1));
  MF_ASSIGN_OR_RETURN(options.limit_bytes, ParseInt(query, "limitBytes", -1));
  MF_ASSIGN_OR_RETURN(bool timestamps, ParseBool(query, "timestamps"));
  if (query.count("tailLines") && options.tail_lines < 0) {
    return InvalidArgument("tailLines: Invalid value: " + std::to_string(options.tail_lines) +
                           ": must be greater than or equal to 0");
  }
  if (query.count("limitBytes") && options.limit_bytes < 1) {
    return InvalidArgument("limitBytes: Invalid value: " + std::to_string(options.limit_bytes) +
                           ": must be greater than 0");
  }
  if (timestamps) {
    return FailedPrecondition(
        "timestamps=true is not supported by modelfleet-local: the local kubelet stores container output "
        "without per-line times");
  }
  for (const char* key : {"sinceSeconds", "sinceTime"}) {
    if (query.count(key)) {
      return FailedPrecondition(std::string(key) +
                                " is not supported by modelfleet-local: the local kubelet stores container "
                                "output without per-line times");
    }
  }
  return options;
}

StatusOr<LogFile> LogFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound("no log file " + path);
    return ErrnoStatus("cannot open " + path);
  }
  return LogFile(fd);
}

LogFile::LogFile(LogFile&& other) noexcept : fd_(std::exchange(other.fd_, -1)), offset_(other.offset_) {}

LogFile& LogFile::operator=(LogFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    offset_ = other.offset_;
  }
  return *this;
}

LogFile::~LogFile() {
  if (fd_ >= 0) ::close(fd_);
}

StatusOr<std::string> LogFile::ReadRange(uint64_t begin, uint64_t end) {
  std::string out;
  out.resize(end - begin);
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(begin + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot read a container log");
    }
    if (n == 0) break;  // truncated under us: return what was there
    done += static_cast<size_t>(n);
  }
  out.resize(done);
  return out;
}

StatusOr<std::string> LogFile::ReadInitial(int64_t tail_lines, int64_t limit_bytes) {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return ErrnoStatus("cannot stat a container log");
  const uint64_t end = static_cast<uint64_t>(st.st_size);
  uint64_t begin = 0;
  if (tail_lines >= 0) {
    // Scan backwards block by block for the newline before the last `tail_lines` lines; a final
    // line without its newline counts as a line, as the kubelet counts them.
    begin = end;
    int64_t newlines_needed = tail_lines;
    bool skip_final_newline = true;
    std::string block;
    uint64_t pos = end;
    bool found = tail_lines == 0;
    while (!found && pos > 0) {
      uint64_t from = pos > kBlock ? pos - kBlock : 0;
      MF_ASSIGN_OR_RETURN(block, ReadRange(from, pos));
      for (size_t i = block.size(); i-- > 0;) {
        if (block[i] != '\n') {
          skip_final_newline = false;
          continue;
        }
        if (skip_final_newline) {  // the newline ending the last line
          skip_final_newline = false;
          continue;
        }
        if (--newlines_needed == 0) {
          begin = from + i + 1;
          found = true;
          break;
        }
      }
      pos = from;
    }
    if (!found) begin = 0;  // fewer lines than asked for: all of them
  }
  uint64_t stop = end;
  if (limit_bytes >= 0) stop = std::min<uint64_t>(end, begin + static_cast<uint64_t>(limit_bytes));
  offset_ = end;
  return ReadRange(begin, stop);
}

StatusOr<std::string> LogFile::ReadNew(size_t max_bytes) {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return ErrnoStatus("cannot stat a container log");
  uint64_t end = static_cast<uint64_t>(st.st_size);
  if (end < offset_) offset_ = end;  // truncated: continue from its new end
  end = std::min<uint64_t>(end, offset_ + max_bytes);
  if (end == offset_) return std::string();
  MF_ASSIGN_OR_RETURN(std::string text, ReadRange(offset_, end));
  offset_ += text.size();
  return text;
}

void FollowLog(LogFile file, std::shared_ptr<http::Stream> stream, std::function<bool()> still_running,
               const std::atomic<bool>& stopping, const LogFollowOptions& options, uint64_t sent) {
  const uint64_t limit = options.limit_bytes < 0 ? UINT64_MAX : static_cast<uint64_t>(options.limit_bytes);
  // Keep at most this much queued for a slow reader: the file is the buffer, not our memory.
  constexpr size_t kMaxQueued = 1 << 20;
  bool last_round = false;
  while (!stream->closed() && !stopping.load() && sent < limit) {
    if (!last_round && !still_running()) last_round = true;  // drain what the process wrote, then end
    bool wrote = false;
    while (sent < limit && stream->buffered_bytes() < kMaxQueued) {
      auto text = file.ReadNew(static_cast<size_t>(std::min<uint64_t>(kBlock, limit - sent)));
      if (!text.ok() || text->empty()) break;
      sent += text->size();
      wrote = true;
      if (!stream->Write(std::move(text).value())) break;
    }
    if (last_round && !wrote) break;
    if (!wrote) std::this_thread::sleep_for(options.poll_interval);
    else if (stream->buffered_bytes() >= kMaxQueued) std::this_thread::sleep_for(options.poll_interval);
  }
  stream->Close();
}

}  // namespace mf::local
