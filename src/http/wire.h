// Internal to src/http: the bytes-level half of the server shared with the fuzz target. Reads a
// request with Beast's parser under our limits, converts it into mf::http::Request (inflating
// gzip/deflate bodies), and serializes response heads. Nothing here does I/O.
#pragma once

// GCC 12 with -fsanitize=address reports a false "maybe uninitialized" boost::optional inside
// Beast's parser (a known Boost.Optional/GCC interaction); it is not in our code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
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

// Feeds the buffered bytes to a Beast parser and consumes what it takes (the one way both the
// server and the client call parser.put()).
//
// Beast 1.74 asserts (and our builds keep assertions) when a chunked body whose first chunk is
// the last one ("0\r\n") arrives split so that a later put() sees exactly 4 bytes
// (boostorg/beast#2861, fixed in Boost 1.86): a remote peer could abort the process. A chunked
// body is therefore fed only once at least 5 bytes are buffered. That never stalls a message:
// the parser consumes the last chunk only as a whole ("0\r\n\r\n" at least), so while a chunked
// message is incomplete at least 5 more bytes must arrive.
template <class Parser>
size_t PutBuffered(Parser& parser, boost::beast::flat_buffer& buffer, boost::beast::error_code& ec) {
  if (parser.is_header_done() && parser.chunked() && !parser.is_done() && buffer.size() < 5) {
    ec = boost::beast::http::error::need_more;
    return 0;
  }
  size_t used = parser.put(buffer.data(), ec);
  buffer.consume(used);
  return used;
}

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
