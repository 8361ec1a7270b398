#include "tools/local/kubelet_api/request_target.h"

namespace mf::local {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string> PathSegments(std::string_view path) {
  std::vector<std::string> segments;
  if (path.empty() || path.front() != '/') return segments;
  path.remove_prefix(1);
  while (true) {
    const size_t slash = path.find('/');
    segments.push_back(PercentDecode(path.substr(0, slash), /*plus_is_space=*/false));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return segments;
}

}  // namespace

std::string PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else if (c == '%' && i + 2 < text.size() && HexDigit(text[i + 1]) >= 0 && HexDigit(text[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexDigit(text[i + 1]) * 16 + HexDigit(text[i + 2])));
      i += 2;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

QueryParams ParseQuery(std::string_view raw) {
  QueryParams params;
  while (!raw.empty()) {
    const size_t amp = raw.find('&');
    std::string_view pair = raw.substr(0, amp);
    raw.remove_prefix(amp == std::string_view::npos ? raw.size() : amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    std::string name = PercentDecode(pair.substr(0, eq), true);
    std::string value = eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1), true);
    params.emplace_back(std::move(name), std::move(value));
  }
  return params;
}

std::optional<std::string> QueryValue(const QueryParams& query, std::string_view name) {
  for (const auto& [n, v] : query) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::vector<std::string> QueryValues(const QueryParams& query, std::string_view name) {
  std::vector<std::string> values;
  for (const auto& [n, v] : query) {
    if (n == name) values.push_back(v);
  }
  return values;
}

KubeletTarget ParseKubeletTarget(std::string_view path) {
  using Kind = KubeletTarget::Kind;
  KubeletTarget target;
  const std::vector<std::string> s = PathSegments(path);
  for (const auto& segment : s) {
    if (segment.empty()) return target;
  }
  if (s.size() == 1 && s[0] == "healthz") {
    target.kind = Kind::kHealthz;
  } else if (s.size() == 4 && s[0] == "containerLogs") {
    target = {Kind::kContainerLogs, s[1], s[2], "", s[3]};
  } else if ((s.size() == 4 || s.size() == 5) && (s[0] == "exec" || s[0] == "attach")) {
    const Kind kind = s[0] == "exec" ? Kind::kExec : Kind::kAttach;
    target = s.size() == 4 ? KubeletTarget{kind, s[1], s[2], "", s[3]} : KubeletTarget{kind, s[1], s[2], s[3], s[4]};
  } else if ((s.size() == 3 || s.size() == 4) && s[0] == "portForward") {
    target = {Kind::kPortForward, s[1], s[2], s.size() == 4 ? s[3] : "", ""};
  }
  return target;
}

}  // namespace mf::local
