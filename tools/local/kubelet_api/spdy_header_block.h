// SPDY/3 header blocks: the name/value block format and its zlib compression. Each direction of
// a connection has one zlib stream that lives as long as the connection (every SYN_STREAM,
// SYN_REPLY and HEADERS block continues it, so a block that is skipped still has to be inflated),
// primed with the dictionary the SPDY/3 draft defines and flushed with Z_SYNC_FLUSH after every
// block, exactly as Go's spdy framer (moby/spdystream, which kube-apiserver and client-go use)
// compresses and expects them.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace mf::local::spdy {

// Header names are lowercase on the wire. A value that carries several NUL-separated values on the
// wire appears here as several entries with the same name, in order.
using Headers = std::vector<std::pair<std::string, std::string>>;

// The first value of `name` (lowercase), or "" when absent.
std::string_view HeaderValue(const Headers& headers, std::string_view name);

// The SPDY/3 compression dictionary (draft 3, section 2.6.10.1).
std::string_view HeaderDictionary();

// Appends `v` in SPDY's byte order (big-endian), for header blocks and frames.
void AppendU32(std::string* out, uint32_t v);

struct HeaderBlockLimits {
  size_t max_headers = 100;             // names in one block
  size_t max_block_bytes = 256 * 1024;  // one inflated block (bounds zlib bombs)
};

// Inflates the peer's header blocks. After an error the zlib stream is out of sync with the peer:
// the connection must end.
class HeaderBlockInflater {
 public:
  explicit HeaderBlockInflater(HeaderBlockLimits limits = {});
  ~HeaderBlockInflater();
  HeaderBlockInflater(const HeaderBlockInflater&) = delete;
  HeaderBlockInflater& operator=(const HeaderBlockInflater&) = delete;

  // Decompresses one whole block and parses it. Names are lowercased; a name sent twice, an empty
  // name or a truncated block is an error.
  StatusOr<Headers> Decode(std::string_view compressed);

 private:
  StatusOr<std::string> Inflate(std::string_view compressed);

  HeaderBlockLimits limits_;
  z_stream zs_{};
  bool broken_ = false;
};

// Compresses this side's header blocks.
class HeaderBlockDeflater {
 public:
  HeaderBlockDeflater();
  ~HeaderBlockDeflater();
  HeaderBlockDeflater(const HeaderBlockDeflater&) = delete;
  HeaderBlockDeflater& operator=(const HeaderBlockDeflater&) = delete;

  // The compressed block for `headers` (entries with the same name are joined with NUL; names
  // must already be lowercase).
  std::string Encode(const Headers& headers);

 private:
  z_stream zs_{};
};

// The uncompressed name/value block (exposed for tests and the fuzzer).
std::string SerializeHeaderBlock(const Headers& headers);
StatusOr<Headers> ParseHeaderBlock(std::string_view block, const HeaderBlockLimits& limits);

}  // namespace mf::local::spdy
