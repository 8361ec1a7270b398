// HTTP/2 framing (RFC 9113 4, 6): the 9-byte frame header, the constants the server uses, and
// writers that append whole frames to an output buffer. No state: h2_server_session.cc owns that.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mf::http2 {

// Error codes (RFC 9113 7), as RST_STREAM and GOAWAY carry them.
enum Http2ErrorCode : uint32_t {
  kNoError = 0x0,
  kProtocolError = 0x1,
  kInternalError = 0x2,
  kFlowControlError = 0x3,
  kStreamClosed = 0x5,
  kFrameSizeError = 0x6,
  kRefusedStream = 0x7,
  kCancel = 0x8,
  kCompressionError = 0x9,
  kEnhanceYourCalm = 0xb,
};

// The largest flow-control window (RFC 9113 6.9.1).
constexpr int64_t kMaxWindowBytes = (int64_t{1} << 31) - 1;
// Every window starts here until SETTINGS say otherwise (RFC 9113 6.5.2).
constexpr int64_t kDefaultWindowBytes = 65535;
// SETTINGS_MAX_FRAME_SIZE's initial value, and what this server accepts.
constexpr size_t kDefaultMaxFrameBytes = 16384;
constexpr size_t kFrameHeaderBytes = 9;
constexpr std::string_view kClientPreface{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24};

namespace frame {

enum Type : uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kPriority = 0x2,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPushPromise = 0x5,
  kPing = 0x6,
  kGoaway = 0x7,
  kWindowUpdate = 0x8,
  kContinuation = 0x9,
};

enum Flag : uint8_t {
  kEndStream = 0x1,
  kAck = 0x1,
  kEndHeaders = 0x4,
  kPadded = 0x8,
  kPriorityFlag = 0x20,
};

enum Setting : uint16_t {
  kHeaderTableSize = 0x1,
  kEnablePush = 0x2,
  kMaxConcurrentStreams = 0x3,
  kInitialWindowSize = 0x4,
  kMaxFrameSize = 0x5,
  kMaxHeaderListSize = 0x6,
  kNoRfc7540Priorities = 0x9,
};

struct Header {
  uint32_t length = 0;
  uint8_t type = 0;
  uint8_t flags = 0;
  int32_t stream_id = 0;
};

// What a DATA or HEADERS payload carries once its pad length, padding and (HEADERS) priority
// fields are taken off (RFC 9113 6.1, 6.2); `problem` names the rule a malformed one breaks, for
// the caller to answer with its own error code.
struct Content {
  enum Problem { kNone, kNoPadLength, kShortPriority, kPaddingTooLong };
  const uint8_t* data = nullptr;
  size_t size = 0;
  Problem problem = kNone;
};

inline Content StripPadding(uint8_t type, uint8_t flags, const uint8_t* payload, size_t length) {
  size_t padding = 0;
  if ((flags & kPadded) != 0) {
    if (length == 0) return {nullptr, 0, Content::kNoPadLength};
    padding = payload[0];
    ++payload, --length;
  }
  if (type == kHeaders && (flags & kPriorityFlag) != 0) {
    if (length < 5) return {nullptr, 0, Content::kShortPriority};
    payload += 5, length -= 5;
  }
  if (padding > length) return {nullptr, 0, Content::kPaddingTooLong};
  return {payload, length - padding, Content::kNone};
}

inline uint32_t ReadU32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// `p` holds at least kFrameHeaderBytes; the stream id's reserved bit is dropped.
inline Header ParseHeader(const uint8_t* p) {
  return {(uint32_t{p[0]} << 16) | (uint32_t{p[1]} << 8) | uint32_t{p[2]}, p[3], p[4],
          static_cast<int32_t>(ReadU32(p + 5) & 0x7fffffffu)};
}

inline void AppendU32(uint32_t value, std::string* out) {
  const char bytes[4] = {char(value >> 24), char(value >> 16), char(value >> 8), char(value)};
  out->append(bytes, 4);
}

inline void AppendHeader(uint32_t length, uint8_t type, uint8_t flags, int32_t stream_id, std::string* out) {
  const char bytes[5] = {char(length >> 16), char(length >> 8), char(length), char(type), char(flags)};
  out->append(bytes, 5);
  AppendU32(static_cast<uint32_t>(stream_id), out);
}

inline void AppendSetting(uint16_t id, uint32_t value, std::string* out) {
  const char bytes[2] = {char(id >> 8), char(id)};
  out->append(bytes, 2);
  AppendU32(value, out);
}

inline void AppendRstStream(int32_t stream_id, uint32_t error_code, std::string* out) {
  AppendHeader(4, kRstStream, 0, stream_id, out);
  AppendU32(error_code, out);
}

inline void AppendWindowUpdate(int32_t stream_id, uint32_t increment, std::string* out) {
  AppendHeader(4, kWindowUpdate, 0, stream_id, out);
  AppendU32(increment, out);
}

inline void AppendGoaway(int32_t last_stream_id, uint32_t error_code, std::string_view debug, std::string* out) {
  AppendHeader(static_cast<uint32_t>(8 + debug.size()), kGoaway, 0, 0, out);
  AppendU32(static_cast<uint32_t>(last_stream_id), out);
  AppendU32(error_code, out);
  out->append(debug);
}

}  // namespace frame
}  // namespace mf::http2
