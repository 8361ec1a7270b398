#include "http/wire.h"

#include <array>
#include <charconv>

#include "http/body_codec.h"

namespace mf::http::wire {

namespace bhttp = boost::beast::http;

void ConfigureParser(const Limits& limits, RequestParser* parser) {
  parser->header_limit(static_cast<std::uint32_t>(std::min<size_t>(limits.max_header_bytes, UINT32_MAX)));
  parser->body_limit(limits.max_body_bytes);
}

Rejection RejectionForParseError(boost::beast::error_code ec, const Limits& limits) {
  if (ec == bhttp::error::header_limit) {
    return {431, "request header is larger than the server's limit of " + std::to_string(limits.max_header_bytes) +
                     " bytes"};
  }
  if (ec == bhttp::error::body_limit || ec == bhttp::error::buffer_overflow) {
    return {413,
            "request body is larger than the server's limit of " + std::to_string(limits.max_body_bytes) + " bytes"};
  }
  return {400, "malformed HTTP request: " + ec.message()};
}

namespace {

enum class Coding { kIdentity, kInflate, kUnsupported };

Coding ContentCoding(const BeastRequest& m) {
  auto it = m.find(bhttp::field::content_encoding);
  if (it == m.end()) return Coding::kIdentity;
  std::string_view v(it->value().data(), it->value().size());
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  if (v.empty() || EqualsIgnoreCase(v, "identity")) return Coding::kIdentity;
  if (EqualsIgnoreCase(v, "gzip") || EqualsIgnoreCase(v, "x-gzip") || EqualsIgnoreCase(v, "deflate")) {
    return Coding::kInflate;
  }
  return Coding::kUnsupported;
}

}  // namespace

std::optional<Rejection> CheckHeader(const BeastRequest& header) {
  if (ContentCoding(header) == Coding::kUnsupported) {
    auto v = header[bhttp::field::content_encoding];
    return Rejection{
        415, "unsupported Content-Encoding '" + std::string(v.data(), v.size()) + "': send identity, gzip or deflate"};
  }
  auto expect = header.find(bhttp::field::expect);
  if (expect != header.end() &&
      !EqualsIgnoreCase(std::string_view(expect->value().data(), expect->value().size()), "100-continue")) {
    return Rejection{417, "unsupported Expect header: only 100-continue is understood"};
  }
  return std::nullopt;
}

std::optional<Rejection> ToRequest(BeastRequest&& message, const Limits& limits, Request* out) {
  if (auto rejected = CheckHeader(message)) return rejected;
  out->method.assign(message.method_string().data(), message.method_string().size());
  out->target.assign(message.target().data(), message.target().size());
  if (out->target.empty() || (out->target.front() != '/' && out->target != "*")) {
    // Absolute-form targets are for proxies; we are an origin server.
    return Rejection{400, "request target must be an absolute path such as /v1/models"};
  }
  out->headers.clear();
  bool inflate = false;
  for (const auto& field : message) {
    std::string_view name(field.name_string().data(), field.name_string().size());
    std::string_view value(field.value().data(), field.value().size());
    if (limits.decode_bodies && field.name() == bhttp::field::content_encoding) {
      inflate = ContentCoding(message) == Coding::kInflate;
      continue;  // the handler sees the decoded body, so the encoding no longer applies
    }
    out->headers.Add(name, value);
  }
  if (inflate && !message.body().empty()) {
    switch (Inflate(message.body(), limits.max_body_bytes, &out->body)) {
      case InflateResult::kOk:
        break;
      case InflateResult::kTooLarge:
        return Rejection{413, "decompressed request body is larger than the server's limit of " +
                                  std::to_string(limits.max_body_bytes) + " bytes"};
      case InflateResult::kCorrupt:
        return Rejection{400, "request body is not valid gzip/deflate data (Content-Encoding says it is)"};
    }
    out->headers.Set("Content-Length", std::to_string(out->body.size()));
  } else {
    out->body = std::move(message.body());
  }
  return std::nullopt;
}

void RequestReader::Reset() {
  parser_.emplace();
  ConfigureParser(limits_, &*parser_);
  header_checked_ = false;
}

RequestReader::Progress RequestReader::Feed(boost::beast::flat_buffer& input) {
  if (!parser_) Reset();
  while (input.size() > 0) {
    boost::beast::error_code ec;
    size_t used = PutBuffered(*parser_, input, ec);
    if (ec == bhttp::error::need_more) return Progress::kNeedMore;
    if (ec) {
      rejection_ = RejectionForParseError(ec, limits_);
      return Progress::kRejected;
    }
    if (parser_->is_header_done() && !header_checked_) {
      header_checked_ = true;
      if (auto rejected = CheckHeader(parser_->get())) {
        rejection_ = std::move(*rejected);
        return Progress::kRejected;
      }
      parser_->eager(true);  // from here on, one put() takes as much body as is buffered
      if (!parser_->is_done()) return Progress::kHeaderDone;
    }
    if (parser_->is_done()) return Progress::kMessageDone;
    if (used == 0) break;
  }
  return Progress::kNeedMore;
}

bool RequestReader::WantsContinue() const {
  return parser_ && header_checked_ && !parser_->is_done() &&
         parser_->get().find(bhttp::field::expect) != parser_->get().end();
}

namespace {

// RFC 9110 tchar: the bytes a field name may hold.
constexpr std::array<bool, 256> kTokenChars = [] {
  std::array<bool, 256> table{};
  for (int c = 'a'; c <= 'z'; ++c) table[static_cast<size_t>(c)] = true;
  for (int c = 'A'; c <= 'Z'; ++c) table[static_cast<size_t>(c)] = true;
  for (int c = '0'; c <= '9'; ++c) table[static_cast<size_t>(c)] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) table[static_cast<unsigned char>(c)] = true;
  return table;
}();

}  // namespace

bool IsValidHeaderField(std::string_view name, std::string_view value) {
  if (name.empty()) return false;
  for (unsigned char c : name) {
    if (!kTokenChars[c]) return false;
  }
  for (unsigned char c : value) {
    if (c == '\r' || c == '\n' || c == '\0') return false;
  }
  return true;
}

void AppendHeader(std::string_view name, std::string_view value, std::string* out) {
  out->append(name);
  out->append(": ", 2);
  out->append(value);
  out->append("\r\n", 2);
}

void AppendContentLength(size_t length, std::string* out) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), length);
  (void)ec;
  out->append("Content-Length: ");
  out->append(digits, static_cast<size_t>(end - digits));
  out->append("\r\n", 2);
}

bool AppendStatusAndHeaders(const Response& response, std::string* out) {
  if (response.status < 100 || response.status > 999) return false;
  char code[4] = {static_cast<char>('0' + response.status / 100), static_cast<char>('0' + response.status / 10 % 10),
                  static_cast<char>('0' + response.status % 10), ' '};
  out->append("HTTP/1.1 ", 9);
  out->append(code, 4);
  out->append(ReasonPhrase(response.status));
  out->append("\r\n", 2);
  for (const auto& [name, value] : response.headers.fields()) {
    if (!IsValidHeaderField(name, value)) return false;
    if (EqualsIgnoreCase(name, "Content-Length") || EqualsIgnoreCase(name, "Transfer-Encoding") ||
        EqualsIgnoreCase(name, "Connection") || EqualsIgnoreCase(name, "Date") || EqualsIgnoreCase(name, "Server")) {
      continue;
    }
    AppendHeader(name, value, out);
  }
  return true;
}

}  // namespace mf::http::wire
