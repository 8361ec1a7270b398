#include "tools/local/kubelet/termination_message.h"

#include <fstream>

namespace mf::local {
namespace {

// The last `max_bytes` bytes of the file ("" when it cannot be read).
std::string ReadTail(const std::filesystem::path& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes) ? size - max_bytes : 0;
  in.seekg(start);
  std::string out(static_cast<size_t>(size - start), '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

}  // namespace

std::string TerminationMessagePath(const Json& container) {
  std::string path = StringAt(container, {"terminationMessagePath"});
  return path.empty() ? kDefaultTerminationMessagePath : path;
}

std::string_view LastLines(std::string_view text, size_t max_lines, size_t max_bytes) {
  // Walk back over newlines; a final newline ends the last line rather than starting another.
  size_t pos = !text.empty() && text.back() == '\n' ? text.size() - 1 : text.size();
  size_t start = max_lines == 0 ? text.size() : 0;
  for (size_t lines = 0; lines < max_lines && pos > 0; ++lines) {
    const size_t newline = text.rfind('\n', pos - 1);
    if (newline == std::string_view::npos) break;
    if (lines + 1 == max_lines) start = newline + 1;
    pos = newline;
  }
  text.remove_prefix(start);
  if (text.size() > max_bytes) text.remove_prefix(text.size() - max_bytes);
  return text;
}

std::string ReadTerminationMessage(const Json& container, int exit_code, const std::filesystem::path& message_file,
                                   const std::filesystem::path& log_file) {
  std::string message = ReadTail(message_file, kMaxTerminationMessageBytes);
  if (!message.empty() || exit_code == 0 ||
      StringAt(container, {"terminationMessagePolicy"}, "File") != "FallbackToLogsOnError") {
    return message;
  }
  // The last 2048 bytes of the log hold the last 80 lines' last 2048 bytes.
  return std::string(
      LastLines(ReadTail(log_file, kMaxTerminationLogBytes), kMaxTerminationLogLines, kMaxTerminationLogBytes));
}

}  // namespace mf::local
