#include "server/sync/source_uri.h"

#include <algorithm>
#include <cctype>

#include "http/url.h"

namespace mf::sync {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxUriBytes = 8192;
constexpr size_t kMaxClaimBytes = 253;  // a DNS-1123 subdomain, as Kubernetes names claims

bool IsControl(unsigned char c) { return c < 0x20 || c == 0x7f; }

// The URI as messages show it: control characters masked, long ones cut, so a hostile value
// cannot forge log lines or flood the termination message.
std::string Printable(std::string_view text) {
  constexpr size_t kShown = 256;
  std::string out;
  for (char c : text.substr(0, kShown)) out += IsControl(static_cast<unsigned char>(c)) ? '?' : c;
  if (text.size() > kShown) out += "...";
  return out;
}

Status Refuse(std::string_view uri, std::string_view why) {
  return InvalidArgument("source URI '" + Printable(uri) + "' " + std::string(why));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes one path segment. Refuses escapes that would change the path's shape once
// decoded ("%2F", "%2e%2e") or smuggle in control characters.
StatusOr<std::string> DecodeSegment(std::string_view segment) {
  std::string out;
  for (size_t i = 0; i < segment.size(); ++i) {
    if (segment[i] != '%') {
      out += segment[i];
      continue;
    }
    int high = i + 2 < segment.size() ? HexValue(segment[i + 1]) : -1;
    int low = i + 2 < segment.size() ? HexValue(segment[i + 2]) : -1;
    if (high < 0 || low < 0) return InvalidArgument("has a malformed percent-escape in '" + Printable(segment) + "'");
    char decoded = static_cast<char>(high * 16 + low);
    if (decoded == '/' || IsControl(static_cast<unsigned char>(decoded))) {
      return InvalidArgument("encodes '/' or a control character in '" + Printable(segment) + "'");
    }
    out += decoded;
    i += 2;
  }
  if (out == "." || out == "..") {
    return InvalidArgument("has a '" + out + "' segment; name the path without '.' and '..'");
  }
  return out;
}

// Appends the '/'-separated, percent-encoded `encoded` to `base` segment by segment; empty
// segments ("a//b", a trailing '/') are dropped.
StatusOr<fs::path> AppendEncodedPath(std::string_view uri, fs::path base, std::string_view encoded) {
  if (encoded.find_first_of("?#") != std::string_view::npos) {
    return Refuse(uri, "has '?' or '#'; a path has neither (percent-encode them as %3F and %23)");
  }
  size_t start = 0;
  while (start <= encoded.size()) {
    size_t slash = std::min(encoded.find('/', start), encoded.size());
    std::string_view segment = encoded.substr(start, slash - start);
    if (!segment.empty()) {
      auto decoded = DecodeSegment(segment);
      if (!decoded.ok()) return Refuse(uri, decoded.status().message());
      base /= *decoded;
    }
    start = slash + 1;
  }
  return base;
}

bool IsClaimName(std::string_view name) {
  if (name.empty() || name.size() > kMaxClaimBytes) return false;
  size_t start = 0;
  while (start <= name.size()) {  // dot-separated DNS-1123 labels
    size_t dot = std::min(name.find('.', start), name.size());
    std::string_view label = name.substr(start, dot - start);
    if (label.empty() || label.front() == '-' || label.back() == '-') return false;
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
    start = dot + 1;
  }
  return true;
}

StatusOr<Source> ParseFile(std::string_view uri, std::string_view rest) {
  if (rest.starts_with("localhost/")) rest.remove_prefix(std::string_view("localhost").size());
  if (!rest.starts_with('/')) {
    return Refuse(uri, "names a host or a relative path; a local path is written file:///abs/path");
  }
  MF_ASSIGN_OR_RETURN(fs::path path, AppendEncodedPath(uri, "/", rest));
  if (path == "/") return Refuse(uri, "names the filesystem root; name the model's file or directory");
  Source source;
  source.kind = Source::Kind::kLocal;
  source.uri = std::string(uri);
  source.path = std::move(path);
  source.root = "/";
  return source;
}

StatusOr<Source> ParsePvc(std::string_view uri, std::string_view rest, std::string_view pvc_root) {
  if (pvc_root.empty() || pvc_root.front() != '/') {
    return InvalidArgument("--pvc-root must be an absolute path, got '" + Printable(pvc_root) + "'");
  }
  size_t slash = std::min(rest.find('/'), rest.size());
  std::string_view claim = rest.substr(0, slash);
  if (!IsClaimName(claim)) {
    return Refuse(uri,
                  "does not start with a PersistentVolumeClaim name (pvc://CLAIM/sub/path; lowercase letters, "
                  "digits, '-' and '.')");
  }
  fs::path root = fs::path(pvc_root).lexically_normal() / std::string(claim);
  MF_ASSIGN_OR_RETURN(fs::path path, AppendEncodedPath(uri, root, rest.substr(slash)));
  Source source;
  source.kind = Source::Kind::kLocal;
  source.uri = std::string(uri);
  source.path = std::move(path);
  source.root = std::move(root);
  return source;
}

StatusOr<Source> ParseHttp(std::string_view uri, std::string normalized) {
  auto url = http::ParseUrl(normalized);
  if (!url.ok()) return Refuse(uri, "is not a valid URL: " + url.status().message());
  std::string_view path = url->target;
  path = path.substr(0, path.find('?'));
  std::string_view last = path.substr(path.rfind('/') + 1);
  if (last.empty()) {
    return Refuse(uri, "names no file; an http(s) source ends in the file's name, e.g. .../model.onnx");
  }
  auto name = DecodeSegment(last);
  if (!name.ok()) return Refuse(uri, name.status().message());
  Source source;
  source.kind = Source::Kind::kHttp;
  source.uri = std::string(uri);
  source.url = std::move(normalized);
  source.file_name = std::move(*name);
  return source;
}

}  // namespace

StatusOr<Source> ParseSource(std::string_view uri, std::string_view pvc_root) {
  if (uri.empty()) return InvalidArgument("--source is empty; give one of " + std::string(kSupportedSources));
  if (uri.size() > kMaxUriBytes) {
    return Refuse(uri, "is longer than " + std::to_string(kMaxUriBytes) + " bytes");
  }
  if (std::any_of(uri.begin(), uri.end(), [](char c) { return IsControl(static_cast<unsigned char>(c)); })) {
    return Refuse(uri, "contains a control character");
  }
  size_t separator = uri.find("://");
  if (separator == std::string_view::npos) {
    return Refuse(uri, "has no scheme; supported: " + std::string(kSupportedSources));
  }
  std::string scheme(uri.substr(0, separator));
  std::transform(scheme.begin(), scheme.end(), scheme.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string_view rest = uri.substr(separator + 3);
  if (scheme == "file") return ParseFile(uri, rest);
  if (scheme == "pvc") return ParsePvc(uri, rest, pvc_root);
  if (scheme == "http" || scheme == "https") return ParseHttp(uri, scheme + "://" + std::string(rest));
  return Refuse(uri,
                "has the unsupported scheme '" + Printable(scheme) + "'; supported: " + std::string(kSupportedSources));
}

StatusOr<fs::path> ParseDestination(std::string_view dest) {
  if (dest.empty()) return InvalidArgument("--dest is empty; give the model version directory to write");
  auto refuse = [&](std::string_view why) {
    return InvalidArgument("--dest '" + Printable(dest) + "' " + std::string(why));
  };
  if (std::any_of(dest.begin(), dest.end(), [](char c) { return IsControl(static_cast<unsigned char>(c)); })) {
    return refuse("contains a control character");
  }
  if (dest.front() != '/') return refuse("must be an absolute path");
  fs::path path = "/";
  for (const fs::path& segment : fs::path(dest)) {
    if (segment == "/" || segment.empty()) continue;
    if (segment == "." || segment == "..") return refuse("must not have '.' or '..' segments");
    path /= segment;
  }
  if (path == "/") return refuse("must name a directory below /");
  return path;
}

}  // namespace mf::sync
