// pods/{name}/log as the kubelet serves it, over the files the local kubelet writes: the
// container's whole output or its last lines (tailLines), capped (limitBytes), of the current or
// the previous instance, and with follow=true a stream of new output as it is written that ends
// when the container exits or the client goes away.
//
// The local kubelet points a container's stdout/stderr straight at its log file, so lines carry
// no time of their own: timestamps=true, sinceSeconds and sinceTime are refused with a clear 400
// rather than answered with invented times.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/status.h"
#include "http/server.h"

namespace mf::local {

struct PodLogOptions {
  std::string container;    // empty: the pod's only container
  bool follow = false;
  bool previous = false;    // the instance before the last restart
  int64_t tail_lines = -1;  // -1: every line
  int64_t limit_bytes = -1; // -1: no limit
};

// Parses the pods/log query. Malformed numbers and unsupported options are INVALID_ARGUMENT with
// kube-apiserver's wording where it has one.
StatusOr<PodLogOptions> ParsePodLogOptions(const std::map<std::string, std::string>& query);

// An open log file (a descriptor, so a follower keeps reading the same instance after the kubelet
// renames it to *.previous.log on a restart). Move-only.
class LogFile {
 public:
  static StatusOr<LogFile> Open(const std::string& path);
  LogFile(LogFile&& other) noexcept;
  LogFile& operator=(LogFile&& other) noexcept;
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;
  ~LogFile();

  // The bytes a non-following read returns, up to the file's current end: the last `tail_lines`
  // lines (-1: all), at most `limit_bytes` (-1: no limit) from the start of that part. Leaves the
  // read position at the end of the file, where ReadNew() continues.
  StatusOr<std::string> ReadInitial(int64_t tail_lines, int64_t limit_bytes);
  // What was appended since the last read, at most `max_bytes`.
  StatusOr<std::string> ReadNew(size_t max_bytes);

 private:
  explicit LogFile(int fd) : fd_(fd) {}
  StatusOr<std::string> ReadRange(uint64_t begin, uint64_t end);
  int fd_ = -1;
  uint64_t offset_ = 0;  // where ReadNew() continues
};

struct LogFollowOptions {
  std::chrono::milliseconds poll_interval{100};
  int64_t limit_bytes = -1;  // counts the initial part too; the stream ends when reached
};

// Writes what `file` gains to `stream` until the stream ends, `still_running` turns false (the
// output written up to then is still sent: the kubelet has reaped the process, so nothing is
// lost), `stopping` is set, or limit_bytes are sent; then closes the stream. Blocks: run it on a
// thread of its own. `sent` is what the initial part already wrote.
void FollowLog(LogFile file, std::shared_ptr<http::Stream> stream, std::function<bool()> still_running,
               const std::atomic<bool>& stopping, const LogFollowOptions& options, uint64_t sent);

}  // namespace mf::local
