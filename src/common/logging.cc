#include "common/logging.h"

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

namespace mf::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
std::atomic<bool> g_json{false};
std::mutex g_mu;  // keeps lines whole when threads log at once
std::string* g_capture = nullptr;
thread_local std::string t_request_id;

std::string_view LevelName(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarning:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "info";
}

std::string Timestamp() {
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t secs = system_clock::to_time_t(now);
  int millis = static_cast<int>(duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
  return buf;
}

// Quotes a text-format value only when it needs it, so plain values stay grep-friendly.
std::string TextValue(const std::string& v) {
  bool plain = !v.empty() && v.find_first_of(" \"=\n\t") == std::string::npos;
  return plain ? v : nlohmann::json(v).dump();
}

}  // namespace

void SetLevel(Level level) { g_level = static_cast<int>(level); }
Level GetLevel() { return static_cast<Level>(g_level.load()); }
void SetJson(bool json) { g_json = json; }
bool Enabled(Level level) { return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed); }

bool ParseLevel(std::string_view name, Level* level) {
  for (Level l : {Level::kDebug, Level::kInfo, Level::kWarning, Level::kError}) {
    if (name == LevelName(l)) {
      *level = l;
      return true;
    }
  }
  if (name == "warn") {
    *level = Level::kWarning;
    return true;
  }
  return false;
}

void Write(Level level, std::string_view message, const Fields& fields) {
  std::string line;
  if (g_json) {
    nlohmann::json j;
    j["ts"] = Timestamp();
    j["level"] = LevelName(level);
    j["msg"] = message;
    if (!t_request_id.empty()) j["request_id"] = t_request_id;
    for (const auto& [k, v] : fields) j[k] = v;
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = Timestamp();
    line += ' ';
    std::string upper(LevelName(level));
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    line += upper;
    line += ' ';
    line += message;
    if (!t_request_id.empty()) line += " request_id=" + t_request_id;
    for (const auto& [k, v] : fields) line += " " + k + "=" + TextValue(v);
  }
  line += '\n';
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_capture) {
    *g_capture += line;
  } else {
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
}

RequestIdScope::RequestIdScope(std::string request_id) : previous_(std::move(t_request_id)) {
  t_request_id = std::move(request_id);
}
RequestIdScope::~RequestIdScope() { t_request_id = std::move(previous_); }
const std::string& CurrentRequestId() { return t_request_id; }

std::string NewRequestId() {
  // Called for every request the servers and the router take: hex digits by hand, not snprintf.
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t bits = rng();
  std::string id(16, '0');
  for (int i = 15; i >= 0; --i, bits >>= 4) id[static_cast<size_t>(i)] = kHex[bits & 0xf];
  return id;
}

void CaptureForTest(std::string* sink) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_capture = sink;
}

}  // namespace mf::log
