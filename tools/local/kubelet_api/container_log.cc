#include "tools/local/kubelet_api/container_log.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

namespace mf::local {
namespace {

StatusOr<bool> ParseBool(const QueryParams& query, std::string_view name) {
  std::optional<std::string> value = QueryValue(query, name);
  if (!value || value->empty() || *value == "false" || *value == "0") return false;
  if (*value == "true" || *value == "1") return true;
  return InvalidArgument("query parameter " + std::string(name) + "=" + *value + " is not a boolean");
}

StatusOr<std::optional<int64_t>> ParseInt(const QueryParams& query, std::string_view name, int64_t minimum) {
  std::optional<std::string> value = QueryValue(query, name);
  if (!value) return std::optional<int64_t>();
  int64_t n = 0;
  auto [end, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
  if (ec != std::errc() || end != value->data() + value->size()) {
    return InvalidArgument("query parameter " + std::string(name) + "=" + *value + " is not an integer");
  }
  if (n < minimum) {
    return InvalidArgument(std::string(name) + " must be at least " + std::to_string(minimum) + ", not " + *value);
  }
  return std::optional<int64_t>(n);
}

}  // namespace

StatusOr<LogOptions> ParseLogOptions(const QueryParams& query) {
  LogOptions options;
  MF_ASSIGN_OR_RETURN(options.follow, ParseBool(query, "follow"));
  MF_ASSIGN_OR_RETURN(options.previous, ParseBool(query, "previous"));
  MF_ASSIGN_OR_RETURN(bool timestamps, ParseBool(query, "timestamps"));
  if (timestamps) {
    return InvalidArgument(
        "timestamps=true is not supported by this node: its container logs are the processes' raw output, "
        "without a time per line; ask without --timestamps");
  }
  if (QueryValue(query, "sinceSeconds") || QueryValue(query, "sinceTime")) {
    return InvalidArgument(
        "sinceSeconds and sinceTime are not supported by this node: its container logs are the processes' raw "
        "output, without a time per line; use --tail (tailLines) instead");
  }
  std::optional<std::string> stream = QueryValue(query, "stream");
  if (stream && *stream != "All") {
    return InvalidArgument("stream=" + *stream +
                           " is not supported by this node: its container logs interleave stdout and stderr in "
                           "one file; ask for stream=All (the default)");
  }
  QueryParams effective = query;
  // The kubelet's legacy alias: tail=N is tailLines=N, tail=all is no limit.
  if (std::optional<std::string> tail = QueryValue(query, "tail"); tail && *tail != "all") {
    effective.emplace_back("tailLines", *tail);
  }
  MF_ASSIGN_OR_RETURN(options.tail_lines, ParseInt(effective, "tailLines", 0));
  MF_ASSIGN_OR_RETURN(options.limit_bytes, ParseInt(query, "limitBytes", 1));
  return options;
}

StatusOr<uint64_t> TailOffset(int fd, uint64_t size, int64_t lines) {
  if (lines <= 0) return size;
  constexpr size_t kBlock = 64 * 1024;
  std::vector<char> block(kBlock);
  uint64_t end = size;
  int64_t newlines_wanted = lines;  // the newline before the first wanted line ends the search
  bool last_byte = true;
  while (end > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, end));
    const uint64_t start = end - n;
    size_t got = 0;
    while (got < n) {
      ssize_t r = pread(fd, block.data() + got, n - got, static_cast<off_t>(start + got));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Internal(std::string("cannot read the log file: ") + std::strerror(errno));
      if (r == 0) return Internal("the log file shrank while its tail was read");
      got += static_cast<size_t>(r);
    }
    for (size_t i = n; i-- > 0;) {
      if (block[i] != '\n') {
        last_byte = false;
        continue;
      }
      // A newline that ends the file closes the last line rather than starting a new one.
      if (last_byte) {
        last_byte = false;
        continue;
      }
      if (--newlines_wanted == 0) return start + i + 1;
    }
    end = start;
  }
  return uint64_t{0};
}

}  // namespace mf::local
