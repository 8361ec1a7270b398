// Internal to src/http: the bytes-level half of the server shared with the fuzz target. Reads a
// request with Beast's parser under our limits, converts it into mf::http::Request (inflating
// gzip/deflate bodies), and serializes response heads. Nothing here does I/O.
#pragma once

// GCC 12 with -fsanitize=address reports a false "maybe uninitialized" boost::optional inside
// Beast's parser (a known Boost.Optional/GCC interaction); it is not in our code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#pragma GCC diagnostic pop
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "http/message.h"

namespace mf::http::wire {

using BeastRequest = boost::beast::http::request<boost::beast::http::string_body>;
using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

struct Limits {
  size_t max_header_bytes = 64 * 1024;
  size_t max_body_bytes = 64 * 1024 * 1024;
  bool decode_bodies = true;
};

// A request the server refuses before any handler sees it.
struct Rejection {
  int status;
  std::string message;
};

// Beast 1.74 uses boost::string_view; we use std::string_view everywhere else.
inline std::string_view ToStd(boost::beast::string_view s) { return {s.data(), s.size()}; }

// Applies the header and body limits to a freshly constructed parser.
void ConfigureParser(const Limits& limits, RequestParser* parser);

// The answer to a read that failed with `ec` (header too large: 431, body too large: 413,
// anything else malformed: 400).
Rejection RejectionForParseError(boost::beast::error_code ec, const Limits& limits);

// Checks the header of a request whose body is still unread (Content-Encoding supported,
// Expect understood). nullopt when the body may be read.
std::optional<Rejection> CheckHeader(const BeastRequest& header);

// Feeds received bytes to Beast's parser, one request at a time, applying the limits and the
// header checks. The server and the fuzz target drive the same code.
class RequestReader {
 public:
  enum class Progress {
    kNeedMore,     // everything buffered was consumed; read more bytes
    kHeaderDone,   // the header just completed and passed CheckHeader; Feed() again for the body
    kMessageDone,  // a whole request is parsed: take it with parser().release()
    kRejected,     // see rejection()
  };

  explicit RequestReader(const Limits& limits) : limits_(limits) {}
  // Starts a new request (bytes of the next one may already be buffered).
  void Reset();
  // Consumes from `input` what the parser takes.
  Progress Feed(boost::beast::flat_buffer& input);
  // The header asked for "Expect: 100-continue" and its body has not started.
  bool WantsContinue() const;
  RequestParser& parser() { return *parser_; }
  const Rejection& rejection() const { return rejection_; }

 private:
  Limits limits_;
  std::optional<RequestParser> parser_;
  bool header_checked_ = false;
  Rejection rejection_{0, {}};
};

// Moves a fully parsed message into `out`, inflating an encoded body within the body limit.
std::optional<Rejection> ToRequest(BeastRequest&& message, const Limits& limits, Request* out);

// True when `name` is an RFC 9110 token and `value` holds no CR, LF or NUL: safe to emit.
bool IsValidHeaderField(std::string_view name, std::string_view value);

// Appends "HTTP/1.1 <status> <reason>\r\n" and the response's own headers (those the server
// manages itself — Content-Length, Transfer-Encoding, Connection, Date, Server — are skipped).
// False when a header is invalid (header injection); `out` is then unspecified.
bool AppendStatusAndHeaders(const Response& response, std::string* out);

// Appends "Content-Length: n\r\n" etc. Small helpers so the hot path builds one buffer.
void AppendHeader(std::string_view name, std::string_view value, std::string* out);
void AppendContentLength(size_t length, std::string* out);

}  // namespace mf::http::wire
