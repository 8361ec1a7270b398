#include "http2/request_fields.h"

#include <array>
#include <charconv>

namespace mf::http2 {
namespace {

enum Pseudo : uint8_t { kMethod = 1, kScheme = 2, kPath = 4, kAuthority = 8 };

// RFC 9110 5.6.2 token characters, lowercase only (RFC 9113 8.2.1).
constexpr std::array<bool, 256> kNameChars = [] {
  std::array<bool, 256> table{};
  for (char c = 'a'; c <= 'z'; ++c) table[static_cast<uint8_t>(c)] = true;
  for (char c = '0'; c <= '9'; ++c) table[static_cast<uint8_t>(c)] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) table[static_cast<uint8_t>(c)] = true;
  return table;
}();

bool ValidName(std::string_view name) {
  for (char c : name) {
    if (!kNameChars[static_cast<uint8_t>(c)]) return false;
  }
  return !name.empty();
}

bool ValidValue(std::string_view value) {
  if (!value.empty() &&
      (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' || value.back() == '\t')) {
    return false;
  }
  // One pass, no memchr per character (what find_first_of on a set does).
  for (char c : value) {
    if (c == '\0' || c == '\r' || c == '\n') return false;
  }
  return true;
}

// Fields that only mean something on one HTTP/1.1 hop (RFC 9113 8.2.2).
bool ConnectionSpecific(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" || name == "transfer-encoding" ||
         name == "upgrade";
}

}  // namespace

void RequestFields::OnField(std::string_view name, std::string_view value) {
  list_bytes_ += name.size() + value.size();
  if (list_bytes_ > max_list_bytes_) {
    too_large_ = true;
    return;
  }
  if (malformed_ || too_large_) return;
  if (!name.empty() && name[0] == ':') return OnPseudo(name, value);
  regular_seen_ = true;
  if (!ValidName(name) || !ValidValue(value) || ConnectionSpecific(name) || (name == "te" && value != "trailers")) {
    malformed_ = true;
    return;
  }
  if (block_ == Block::kTrailers) {
    request_->trailers.emplace_back(name, value);
    return;
  }
  if (name == "content-length") {
    int64_t length = -1;
    auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), length);
    if (error != std::errc() || end != value.data() + value.size() || length < 0 ||
        (content_length_ >= 0 && content_length_ != length)) {
      malformed_ = true;
      return;
    }
    content_length_ = length;
  }
  request_->headers.emplace_back(name, value);
}

void RequestFields::OnPseudo(std::string_view name, std::string_view value) {
  uint8_t bit = 0;
  std::string* field = nullptr;
  if (name == ":method") {
    bit = kMethod, field = &request_->method;
  } else if (name == ":path") {
    bit = kPath, field = &request_->path;
  } else if (name == ":scheme") {
    bit = kScheme, field = &request_->scheme;
  } else if (name == ":authority") {
    bit = kAuthority, field = &request_->authority;
  }
  // Unknown, repeated, after a regular field, in trailers, or an empty value.
  if (bit == 0 || (pseudo_seen_ & bit) != 0 || regular_seen_ || block_ == Block::kTrailers || value.empty() ||
      !ValidValue(value)) {
    malformed_ = true;
    return;
  }
  if (bit == kPath && value[0] != '/' && value != "*") {
    malformed_ = true;
    return;
  }
  pseudo_seen_ |= bit;
  field->assign(value);
}

bool RequestFields::malformed() const {
  if (malformed_) return true;
  if (block_ == Block::kTrailers) return false;
  constexpr uint8_t kRequired = kMethod | kScheme | kPath;
  return (pseudo_seen_ & kRequired) != kRequired;
}

}  // namespace mf::http2
