// Structured logging: one line per event, as text (`2026-11-22T20:00:00.123Z INFO msg k=v`)
// or as JSON lines (`{"ts":...,"level":"info","msg":...,"k":"v"}`) for log pipelines.
// A RequestIdScope tags every line its thread writes with the request being served.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mf::log {

enum class Level { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

using Fields = std::vector<std::pair<std::string, std::string>>;

void SetLevel(Level level);
Level GetLevel();
void SetJson(bool json);
// Parses "debug" | "info" | "warning" | "error"; false when the name is unknown.
bool ParseLevel(std::string_view name, Level* level);

bool Enabled(Level level);
void Write(Level level, std::string_view message, const Fields& fields = {});

inline void Debug(std::string_view m, const Fields& f = {}) {
  if (Enabled(Level::kDebug)) Write(Level::kDebug, m, f);
}
inline void Info(std::string_view m, const Fields& f = {}) {
  if (Enabled(Level::kInfo)) Write(Level::kInfo, m, f);
}
inline void Warning(std::string_view m, const Fields& f = {}) {
  if (Enabled(Level::kWarning)) Write(Level::kWarning, m, f);
}
inline void Error(std::string_view m, const Fields& f = {}) { Write(Level::kError, m, f); }

// Sets the current thread's request id for the lifetime of the scope (restores the previous one).
class RequestIdScope {
 public:
  explicit RequestIdScope(std::string request_id);
  ~RequestIdScope();
  RequestIdScope(const RequestIdScope&) = delete;
  RequestIdScope& operator=(const RequestIdScope&) = delete;

 private:
  std::string previous_;
};
const std::string& CurrentRequestId();
// A fresh random 16-hex-digit id for requests that arrive without an x-request-id.
std::string NewRequestId();

// Redirects output (default stderr) into a string, for tests.
void CaptureForTest(std::string* sink);

}  // namespace mf::log
