#include "http/url.h"

#include <charconv>

namespace mf::http {

std::string Url::HostHeader() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port != (tls ? 443 : 80)) h += ":" + std::to_string(port);
  return h;
}

StatusOr<Url> ParseUrl(std::string_view url) {
  Url out;
  std::string_view rest;
  if (url.starts_with("http://")) {
    rest = url.substr(7);
  } else if (url.starts_with("https://")) {
    out.tls = true;
    rest = url.substr(8);
  } else {
    return InvalidArgument("URL '" + std::string(url) + "' must start with http:// or https://");
  }
  if (size_t hash = rest.find('#'); hash != std::string_view::npos) rest = rest.substr(0, hash);
  size_t path_start = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, path_start);
  std::string_view target = path_start == std::string_view::npos ? "" : rest.substr(path_start);
  if (authority.find('@') != std::string_view::npos) {
    return InvalidArgument("URL '" + std::string(url) + "' has user info; send credentials in a header");
  }
  std::string_view port_text;
  if (authority.starts_with("[")) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return InvalidArgument("URL '" + std::string(url) + "' has an unclosed IPv6 bracket");
    out.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':')
        return InvalidArgument("URL '" + std::string(url) + "' has junk after the IPv6 address");
      port_text = after.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return InvalidArgument("URL '" + std::string(url) + "' has no host");
  for (char c : out.host) {
    if (c <= ' ' || c == '/' || c == '\\' || c == '"' || c == 0x7f) {
      return InvalidArgument("URL '" + std::string(url) + "' has an invalid character in its host");
    }
  }
  if (port_text.empty()) {
    out.port = out.tls ? 443 : 80;
  } else {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), value);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || value == 0 || value > 65535) {
      return InvalidArgument("URL '" + std::string(url) + "' has an invalid port '" + std::string(port_text) + "'");
    }
    out.port = static_cast<uint16_t>(value);
  }
  if (target.empty()) {
    out.target = "/";
  } else if (target.front() == '?') {
    out.target = "/" + std::string(target);
  } else {
    out.target = std::string(target);
  }
  for (char c : out.target) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
      return InvalidArgument("URL '" + std::string(url) + "' has a space or control character; percent-encode it");
    }
  }
  return out;
}

}  // namespace mf::http
