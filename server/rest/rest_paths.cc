#include "server/rest/rest_paths.h"

#include <optional>
#include <vector>

#include "common/flags.h"

namespace mf::server::rest {
namespace {

bool StartsWithIgnoreCase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    char a = text[i], b = prefix[i];
    if (a >= 'A' && a <= 'Z') a = static_cast<char>(a - 'A' + 'a');
    if (a != b) return false;
  }
  return true;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view lower) {
  return a.size() == lower.size() && StartsWithIgnoreCase(a, lower);
}

// A run of characters up to the next '/' or ':' (TF Serving's [^/:]+).
std::string_view TakeName(std::string_view* rest) {
  size_t end = rest->find_first_of("/:");
  std::string_view name = rest->substr(0, end);
  rest->remove_prefix(name.size());
  return name;
}

bool ParseVersionNumber(std::string_view digits, int64_t* version) {
  if (digits.empty()) return false;
  for (char c : digits) {
    if (c < '0' || c > '9') return false;
  }
  return ParseInt64(digits, version);
}

}  // namespace

StatusOr<std::string> PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    int hi = i + 1 < text.size() ? hex(text[i + 1]) : -1;
    int lo = i + 2 < text.size() ? hex(text[i + 2]) : -1;
    if (hi < 0 || lo < 0) return InvalidArgument("bad percent-escape in URL path");
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

StatusOr<TfServingPath> ParseTfServingPath(std::string_view method, std::string_view path) {
  const Status malformed = InvalidArgument("Malformed request: " + std::string(method) + " " + std::string(path));
  const bool is_post = method == "POST";
  if (!is_post && method != "GET") return malformed;
  constexpr std::string_view kPrefix = "/v1/models";
  if (!StartsWithIgnoreCase(path, kPrefix)) return malformed;
  std::string_view rest = path.substr(kPrefix.size());
  // TF Serving's GET grammar makes the name optional (its status handler then answers "Missing
  // model name"); its POST grammar needs one, so a POST without one is malformed.
  if (rest.empty()) return is_post ? malformed : InvalidArgument("Missing model name in request.");
  if (rest.front() != '/') return malformed;
  rest.remove_prefix(1);

  TfServingPath parsed;
  std::string_view model = TakeName(&rest);
  if (model.empty()) return malformed;
  MF_ASSIGN_OR_RETURN(parsed.model, PercentDecode(model));

  // Digits that do not fit an int64 match TF Serving's grammar, which only then fails to convert
  // them: that error is returned once the rest of the path is known to match.
  std::optional<std::string_view> unconvertible_version;
  if (StartsWithIgnoreCase(rest, "/versions/")) {
    rest.remove_prefix(10);
    std::string_view digits = TakeName(&rest);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return malformed;
    int64_t version = 0;
    if (ParseVersionNumber(digits, &version)) {
      parsed.version = version;
    } else {
      unconvertible_version = digits;
    }
  } else if (StartsWithIgnoreCase(rest, "/labels/")) {
    rest.remove_prefix(8);
    std::string_view label = TakeName(&rest);
    if (label.empty()) return malformed;
    MF_ASSIGN_OR_RETURN(std::string decoded, PercentDecode(label));
    parsed.label = std::move(decoded);
  }

  if (is_post) {
    if (rest.empty() || rest.front() != ':') return malformed;
    rest.remove_prefix(1);
    if (EqualsIgnoreCase(rest, "predict")) {
      parsed.kind = TfServingPath::Kind::kPredict;
    } else if (EqualsIgnoreCase(rest, "classify")) {
      parsed.kind = TfServingPath::Kind::kClassify;
    } else if (EqualsIgnoreCase(rest, "regress")) {
      parsed.kind = TfServingPath::Kind::kRegress;
    } else {
      return malformed;
    }
  } else if (rest.empty()) {
    parsed.kind = TfServingPath::Kind::kStatus;
  } else if (EqualsIgnoreCase(rest, "/metadata")) {
    parsed.kind = TfServingPath::Kind::kMetadata;
  } else {
    return malformed;  // e.g. both a version and a label, or an unknown sub-resource
  }
  if (unconvertible_version) {
    return InvalidArgument("Failed to convert version: " + std::string(*unconvertible_version) + " to numeric.");
  }
  return parsed;
}

StatusOr<V2Path> ParseV2Path(std::string_view method, std::string_view path) {
  const Status not_found = NotFound("no KServe v2 endpoint " + std::string(method) + " " + std::string(path));
  std::vector<std::string_view> segments;
  std::string_view rest = path;
  while (!rest.empty()) {
    if (rest.front() != '/') return not_found;
    rest.remove_prefix(1);
    size_t end = rest.find('/');
    segments.push_back(rest.substr(0, end));
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  }
  if (!segments.empty() && segments.back().empty()) segments.pop_back();  // trailing slash
  if (segments.empty() || segments[0] != "v2") return not_found;
  V2Path parsed;
  const bool get = method == "GET";
  if (segments.size() == 1) {
    if (!get) return not_found;
    parsed.kind = V2Path::Kind::kServerMetadata;
    return parsed;
  }
  if (segments[1] == "health" && segments.size() == 3 && get) {
    if (segments[2] == "live")
      parsed.kind = V2Path::Kind::kLive;
    else if (segments[2] == "ready")
      parsed.kind = V2Path::Kind::kReady;
    else
      return not_found;
    return parsed;
  }
  if (segments[1] != "models" || segments.size() < 3 || segments[2].empty()) return not_found;
  MF_ASSIGN_OR_RETURN(parsed.model, PercentDecode(segments[2]));
  size_t next = 3;
  if (segments.size() > next + 1 && segments[next] == "versions") {
    int64_t version = 0;
    if (!ParseVersionNumber(segments[next + 1], &version)) {
      return InvalidArgument("model version '" + std::string(segments[next + 1]) + "' is not a non-negative integer");
    }
    parsed.version = version;
    next += 2;
  }
  if (segments.size() == next) {
    if (!get) return not_found;
    parsed.kind = V2Path::Kind::kModelMetadata;
  } else if (segments.size() == next + 1 && segments[next] == "ready" && get) {
    parsed.kind = V2Path::Kind::kModelReady;
  } else if (segments.size() == next + 1 && segments[next] == "config" && get) {
    parsed.kind = V2Path::Kind::kModelConfig;  // Triton's model configuration extension
  } else if (segments.size() == next + 1 && segments[next] == "infer" && method == "POST") {
    parsed.kind = V2Path::Kind::kInfer;
  } else {
    return not_found;
  }
  return parsed;
}

}  // namespace mf::server::rest
