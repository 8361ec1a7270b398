// `kubectl logs` on the kubelet side: GET /containerLogs/{ns}/{pod}/{container}. Our containers'
// log files hold their raw output (stdout and stderr interleaved, no timestamps), so the options
// that need per-line times or streams (timestamps, sinceSeconds, sinceTime, stream=Stdout/Stderr)
// are refused with a message saying so, rather than answered wrongly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"
#include "tools/local/kubelet_api/request_target.h"

namespace mf::local {

struct LogOptions {
  std::optional<int64_t> tail_lines;   // the last N lines only (0: none)
  std::optional<int64_t> limit_bytes;  // stop after N bytes, following included
  bool follow = false;                 // keep sending what is appended until the container stops
  bool previous = false;               // the previous instance's log
};

// The query as kube-apiserver sends it (v1.PodLogOptions: follow, previous, timestamps,
// sinceSeconds, sinceTime, tailLines, limitBytes, stream; `tail` as the kubelet's legacy alias).
// InvalidArgument for malformed values and for what raw logs cannot answer.
StatusOr<LogOptions> ParseLogOptions(const QueryParams& query);

// The offset in the open file `fd` (of `size` bytes) where its last `lines` lines begin. A final
// line without a newline counts as a line. Reads backwards in blocks: memory stays constant.
StatusOr<uint64_t> TailOffset(int fd, uint64_t size, int64_t lines);

}  // namespace mf::local
