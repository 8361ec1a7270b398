// Arbitrary bytes through the SPDY frame reader (tools/local/kubelet_api/spdy_frame.cc and its
// header block inflater) as one connection's input, fed in pieces whose sizes come from the input
// itself, so frame boundaries fall everywhere. Every frame the reader accepts is re-encoded and
// must read back the same; data pieces must add up to at most the bytes fed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "tools/local/kubelet_api/spdy_frame.h"

namespace {

using mf::local::spdy::Frame;
using mf::local::spdy::FrameType;

std::string Reencode(mf::local::spdy::FrameWriter& writer, const Frame& f) {
  namespace spdy = mf::local::spdy;
  switch (f.type) {
    case FrameType::kSynStream:
      return writer.SynStream(f.stream_id, f.headers, f.flags);
    case FrameType::kSynReply:
      return writer.SynReply(f.stream_id, f.headers, f.flags);
    case FrameType::kHeaders:
      return writer.HeadersFrame(f.stream_id, f.headers, f.flags);
    case FrameType::kRstStream:
      return spdy::EncodeRstStream(f.stream_id, static_cast<spdy::RstStatus>(f.status));
    case FrameType::kPing:
      return spdy::EncodePing(f.id);
    case FrameType::kGoAway:
      return spdy::EncodeGoAway(f.id, static_cast<spdy::GoAwayStatus>(f.status));
    case FrameType::kWindowUpdate:
      return spdy::EncodeWindowUpdate(f.stream_id, f.id);
    case FrameType::kSettings:
      return spdy::EncodeSettings(f.settings);
    case FrameType::kData:
      return spdy::EncodeData(f.stream_id, f.data, f.fin());
  }
  return {};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t piece = 1 + data[0] % 64;  // feed in pieces of this many bytes
  mf::local::spdy::FrameReader reader;
  mf::local::spdy::FrameWriter writer;
  // Re-encoding may add a few bytes of deflate overhead to a block near the size limit.
  mf::local::spdy::FrameReader round_trip({.max_control_payload = 1024 * 1024});
  size_t data_bytes = 0;
  for (size_t pos = 0; pos < input.size(); pos += piece) {
    std::vector<Frame> frames;
    if (!reader.Feed(input.substr(pos, piece), &frames).ok()) break;
    for (const Frame& f : frames) {
      if (f.type == FrameType::kData) {
        data_bytes += f.data.size();
        continue;  // pieces of data frames do not re-encode to the same bytes
      }
      std::vector<Frame> again;
      if (!round_trip.Feed(Reencode(writer, f), &again).ok() || again.size() != 1) std::abort();
      if (again[0].type != f.type || again[0].headers != f.headers || again[0].stream_id != f.stream_id ||
          again[0].id != f.id || again[0].status != f.status || again[0].settings != f.settings) {
        std::abort();
      }
    }
  }
  if (data_bytes > input.size()) std::abort();
  return 0;
}
