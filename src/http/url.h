// Splits the absolute http(s) URLs the client accepts into what a connection needs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mf::http {

struct Url {
  bool tls = false;    // https
  std::string host;    // without brackets for IPv6 literals
  uint16_t port = 0;   // explicit or the scheme's default
  std::string target;  // "/path?query", "/" when the URL has no path
  // "host:port" as the Host header wants it (brackets for IPv6, port omitted when default).
  std::string HostHeader() const;
};

// "http://host[:port][/path][?query]" or "https://...". Fragments are dropped; userinfo is refused.
StatusOr<Url> ParseUrl(std::string_view url);

}  // namespace mf::http
