// A terminated container's message, as the kubelet reads it (kuberuntime's
// getTerminationMessage): the container writes it to terminationMessagePath (default
// /dev/termination-log), which the node agent backs with a file of the pod's own, rewritten for
// the process like a volume mount and named by MODELFLEET_TERMINATION_MESSAGE_PATH. The message is
// the last 4096 bytes of that file; with terminationMessagePolicy FallbackToLogsOnError, a
// non-zero exit and an empty (or missing) file, it is the last 80 lines of the container's log,
// at most their last 2048 bytes.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "tools/local/kubelet/object_fields.h"

namespace mf::local {

inline constexpr char kDefaultTerminationMessagePath[] = "/dev/termination-log";
inline constexpr size_t kMaxTerminationMessageBytes = 4096;
inline constexpr size_t kMaxTerminationLogLines = 80;
inline constexpr size_t kMaxTerminationLogBytes = 2048;

// The container's terminationMessagePath, or the default.
std::string TerminationMessagePath(const Json& container);

// The last `max_lines` lines of `text`, then at most its last `max_bytes` bytes.
std::string_view LastLines(std::string_view text, size_t max_lines, size_t max_bytes);

// The message for a container of spec `container` that exited with `exit_code`; "" when none.
std::string ReadTerminationMessage(const Json& container, int exit_code, const std::filesystem::path& message_file,
                                   const std::filesystem::path& log_file);

}  // namespace mf::local
