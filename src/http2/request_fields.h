// Fills a Request from one decoded header block while checking HTTP/2's message rules (RFC
// 9113 8.2, 8.3): pseudo-headers known, once each and first; names lowercase tokens; no
// connection-specific fields; values without CR, LF, NUL or surrounding whitespace; one valid
// content-length. A block that breaks them is refused (RST_STREAM PROTOCOL_ERROR) before any
// handler sees it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http2/hpack.h"
#include "http2/message.h"

namespace mf::http2 {

class RequestFields final : public hpack::FieldSink {
 public:
  enum class Block { kRequest, kTrailers };

  // Adds to `request` (its pseudo-headers and headers, or its trailers). Past `max_list_bytes`
  // (names and values of the block together) fields are dropped and too_large() holds.
  RequestFields(Request* request, Block block, size_t max_list_bytes)
      : request_(request), block_(block), max_list_bytes_(max_list_bytes) {}

  void OnField(std::string_view name, std::string_view value) override;

  // After the whole block: a rule was broken, or a request lacks :method, :scheme or :path.
  bool malformed() const;
  bool too_large() const { return too_large_; }
  // The content-length the request declared; -1 when it declared none.
  int64_t content_length() const { return content_length_; }

 private:
  void OnPseudo(std::string_view name, std::string_view value);

  Request* request_;
  Block block_;
  size_t max_list_bytes_;
  size_t list_bytes_ = 0;
  uint8_t pseudo_seen_ = 0;  // bit per pseudo-header
  bool regular_seen_ = false;
  bool malformed_ = false;
  bool too_large_ = false;
  int64_t content_length_ = -1;
};

}  // namespace mf::http2
