#include "http/body_codec.h"

#include <zlib.h>

#include <algorithm>
#include <stdexcept>

namespace mf::http {

InflateResult Inflate(std::string_view compressed, size_t max_output_bytes, std::string* out) {
  out->clear();
  z_stream zs{};
  // 15 window bits + 32: accept both gzip and zlib headers.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return InflateResult::kCorrupt;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  zs.avail_in = static_cast<uInt>(compressed.size());
  // Bodies beyond 4 GiB of compressed input are rejected by the body limit long before here.
  if (compressed.size() > static_cast<size_t>(UINT32_MAX)) {
    inflateEnd(&zs);
    return InflateResult::kTooLarge;
  }
  InflateResult result = InflateResult::kCorrupt;
  size_t chunk = std::clamp<size_t>(compressed.size() * 4, 4096, 1 << 20);
  for (;;) {
    size_t used = out->size();
    size_t room = std::min(chunk, max_output_bytes + 1 - used);  // +1 detects overflow
    out->resize(used + room);
    zs.next_out = reinterpret_cast<Bytef*>(out->data() + used);
    zs.avail_out = static_cast<uInt>(room);
    int rc = inflate(&zs, Z_NO_FLUSH);
    out->resize(used + (room - zs.avail_out));
    if (out->size() > max_output_bytes) {
      result = InflateResult::kTooLarge;
      break;
    }
    if (rc == Z_STREAM_END) {
      // Trailing bytes after the compressed stream are malformed input, not silently ignored.
      result = zs.avail_in == 0 ? InflateResult::kOk : InflateResult::kCorrupt;
      break;
    }
    if (rc != Z_OK) break;                             // Z_DATA_ERROR, Z_MEM_ERROR, Z_NEED_DICT
    if (zs.avail_in == 0 && zs.avail_out != 0) break;  // truncated input
    chunk = std::min<size_t>(chunk * 2, 16 << 20);
  }
  inflateEnd(&zs);
  if (result != InflateResult::kOk) out->clear();
  return result;
}

std::string GzipCompress(std::string_view data) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    throw std::runtime_error("deflateInit2 failed");
  }
  std::string out;
  out.resize(deflateBound(&zs, data.size()) + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) throw std::runtime_error("gzip compression did not finish");
  return out;
}

}  // namespace mf::http
