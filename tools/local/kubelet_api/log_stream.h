// Sends a container log file as a chunked HTTP/1.1 response, following it if asked: bytes appended
// to the file are sent as they come (the file is polled every poll_interval) until the container
// stops running, or its log path comes to name another file (the instance was replaced), and then
// whatever it wrote last. A client that hangs up is noticed at once (a read
// stays pending on the connection while the log is sent), and every chunk is read from the file
// only after the previous one is on the wire, so a slow client holds one chunk in memory.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>

#include "tools/local/kubelet_api/container_log.h"
#include "tools/local/kubelet_api/tls_stream.h"

namespace mf::local {

struct LogStreamRequest {
  std::filesystem::path path;  // a file that does not exist (yet) reads as empty
  LogOptions options;
  // With follow: whether to keep following (the same container instance is still running).
  std::function<bool()> keep_following;
  std::chrono::milliseconds poll_interval{100};
};

// Writes the response head and the log on `stream`, then closes the connection (the response says
// "Connection: close").
void StreamContainerLog(std::unique_ptr<TlsStream> stream, LogStreamRequest request);

}  // namespace mf::local
