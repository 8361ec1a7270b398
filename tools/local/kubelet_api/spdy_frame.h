// SPDY/3.1 framing (draft 3.1, section 2): an incremental reader of a connection's bytes and the
// encoders of the frames this side sends. The kubelet API's exec and port-forward streams speak it:
// kube-apiserver (client-go, moby/spdystream underneath) upgrades its HTTPS request to "SPDY/3.1".
//
// What the reader checks is framing only (lengths, version, the fields each type must have); which
// stream ids are legal is the session's business. Data frames are handed out as they arrive, in
// pieces, so a 16 MiB frame never has to sit in memory; control frames are buffered whole, up to
// FrameLimits::max_control_payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "tools/local/kubelet_api/spdy_header_block.h"

namespace mf::local::spdy {

inline constexpr uint16_t kVersion = 3;
inline constexpr uint8_t kFlagFin = 0x01;
inline constexpr uint8_t kFlagUnidirectional = 0x02;
inline constexpr size_t kMaxFramePayload = (1u << 24) - 1;  // 24-bit length field

enum class FrameType : uint16_t {
  kData = 0,  // not a control frame type on the wire: the control bit is clear
  kSynStream = 1,
  kSynReply = 2,
  kRstStream = 3,
  kSettings = 4,
  kPing = 6,
  kGoAway = 7,
  kHeaders = 8,
  kWindowUpdate = 9,
};

enum class RstStatus : uint32_t {
  kProtocolError = 1,
  kInvalidStream = 2,
  kRefusedStream = 3,
  kUnsupportedVersion = 4,
  kCancel = 5,
  kInternalError = 6,
  kFlowControlError = 7,
  kStreamInUse = 8,
  kStreamAlreadyClosed = 9,
  kFrameTooLarge = 11,
};

enum class GoAwayStatus : uint32_t { kOk = 0, kProtocolError = 1, kInternalError = 2 };

// One decoded frame (or, for kData, one piece of a data frame). Fields unused by `type` stay zero.
struct Frame {
  FrameType type = FrameType::kData;
  uint8_t flags = 0;                                    // kFlagFin only on the last piece of a data frame
  uint32_t stream_id = 0;                               // data, SYN_*, RST_STREAM, HEADERS, WINDOW_UPDATE
  uint32_t associated_stream_id = 0;                    // SYN_STREAM
  uint8_t priority = 0;                                 // SYN_STREAM, 0 (highest) .. 7
  Headers headers;                                      // SYN_STREAM, SYN_REPLY, HEADERS
  uint32_t status = 0;                                  // RST_STREAM, GOAWAY
  uint32_t id = 0;                                      // PING id, GOAWAY last-good stream id, WINDOW_UPDATE delta
  std::vector<std::pair<uint32_t, uint32_t>> settings;  // SETTINGS (flags << 24 | id, value)
  std::string data;                                     // kData

  bool fin() const { return (flags & kFlagFin) != 0; }
};

struct FrameLimits {
  size_t max_control_payload = 256 * 1024;
  HeaderBlockLimits header_block;
};

// Decodes a byte stream into frames. After an error the connection is unusable (the header
// compression context is lost): send GOAWAY and close.
class FrameReader {
 public:
  explicit FrameReader(FrameLimits limits = {});

  // Consumes all of `bytes` and appends what they complete to `frames`. Control frames of unknown
  // types are skipped, as the draft asks.
  Status Feed(std::string_view bytes, std::vector<Frame>* frames);

 private:
  Status DecodeControl(uint16_t type, uint8_t flags, std::string_view payload, std::vector<Frame>* frames);

  FrameLimits limits_;
  HeaderBlockInflater inflater_;
  std::string header_;           // the 8-byte frame header being assembled
  std::string control_payload_;  // the control frame being assembled
  bool in_data_ = false;         // inside a data frame's payload
  bool in_control_ = false;      // inside a control frame's payload
  bool skipping_ = false;        // inside an unknown control frame's payload
  uint32_t data_stream_ = 0;
  uint8_t frame_flags_ = 0;
  size_t remaining_ = 0;  // payload bytes still to come
  uint16_t control_version_ = 0;
  uint16_t control_type_ = 0;
  bool failed_ = false;
};

// Encodes the frames this side sends. SYN_STREAM, SYN_REPLY and HEADERS go through one compression
// context, so they must be written to the wire in the order they were encoded.
class FrameWriter {
 public:
  std::string SynStream(uint32_t stream_id, const Headers& headers, uint8_t flags = 0);
  std::string SynReply(uint32_t stream_id, const Headers& headers, uint8_t flags = 0);
  std::string HeadersFrame(uint32_t stream_id, const Headers& headers, uint8_t flags = 0);

 private:
  HeaderBlockDeflater deflater_;
};

// `data` must be at most kMaxFramePayload bytes.
std::string EncodeData(uint32_t stream_id, std::string_view data, bool fin);
std::string EncodeRstStream(uint32_t stream_id, RstStatus status);
std::string EncodePing(uint32_t id);
std::string EncodeGoAway(uint32_t last_good_stream_id, GoAwayStatus status);
std::string EncodeWindowUpdate(uint32_t stream_id, uint32_t delta);
std::string EncodeSettings(const std::vector<std::pair<uint32_t, uint32_t>>& settings);
// A control frame with an arbitrary type and payload (tests).
std::string EncodeControl(uint16_t type, uint8_t flags, std::string_view payload, uint16_t version = kVersion);

}  // namespace mf::local::spdy
