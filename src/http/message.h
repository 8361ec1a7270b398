// The request and response values handlers and the client exchange. They are plain data with
// no Boost types, so code that uses the HTTP library compiles without Beast; the server and the
// client convert to and from the wire format internally.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace mf::http {

// An ordered multimap of header fields with case-insensitive names (RFC 9110 §5.1).
class Headers {
 public:
  using Field = std::pair<std::string, std::string>;

  // The first value of `name`, or nullopt.
  std::optional<std::string_view> Get(std::string_view name) const;
  bool Has(std::string_view name) const { return Get(name).has_value(); }
  // Replaces every field called `name` by one field.
  void Set(std::string_view name, std::string_view value);
  // Appends a field, keeping existing ones (Set-Cookie, Warning, ...).
  void Add(std::string_view name, std::string_view value);
  void Reserve(size_t fields) { fields_.reserve(fields); }
  void Remove(std::string_view name);
  // Removes every field for which drop(name) is true, in one pass.
  template <class Pred>
  void RemoveIf(Pred drop) {
    std::erase_if(fields_, [&](const Field& f) { return drop(std::string_view(f.first)); });
  }

  const std::vector<Field>& fields() const { return fields_; }
  bool empty() const { return fields_.empty(); }
  void clear() { fields_.clear(); }

 private:
  std::vector<Field> fields_;
};

// True when a and b are equal ignoring ASCII case. Inline: header lookups call it for every field,
// and most calls end at the length check.
inline bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

struct Request {
  std::string method = "GET";  // as sent: "GET", "POST", ...
  std::string target = "/";    // origin-form: path plus optional "?query"
  Headers headers;
  std::string body;  // decoded: a gzip/deflate body arrives here inflated
  // Set by the server: the incoming x-request-id or a fresh one; echoed in the response.
  std::string request_id;
  std::string remote_address;  // "ip:port" of the peer (server side only)

  // The target up to '?' (not percent-decoded) and the part after it ("" when none).
  std::string_view path() const;
  std::string_view query() const;
};

struct Response {
  int status = 200;
  Headers headers;
  std::string body;

  // A body with its Content-Type.
  static Response Text(int status, std::string body, std::string_view content_type = "text/plain; charset=utf-8");
  static Response Json(int status, std::string body);
  // {"error": "<message>"} with the HTTP status TF Serving uses for the code.
  static Response FromStatus(const Status& status);
};

// "OK", "Not Found", ...; "Unknown" for codes without a standard reason phrase.
std::string_view ReasonPhrase(int status);

}  // namespace mf::http
