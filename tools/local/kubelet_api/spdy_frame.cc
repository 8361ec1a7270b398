#include "tools/local/kubelet_api/spdy_frame.h"

#include <algorithm>

namespace mf::local::spdy {
namespace {

constexpr size_t kFrameHeaderBytes = 8;
constexpr uint32_t kStreamIdMask = 0x7fffffff;

void PutU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v));
}

uint32_t U32At(std::string_view in, size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(in.data() + pos);
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

bool KnownControlType(uint16_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kSynStream:
    case FrameType::kSynReply:
    case FrameType::kRstStream:
    case FrameType::kSettings:
    case FrameType::kPing:
    case FrameType::kGoAway:
    case FrameType::kHeaders:
    case FrameType::kWindowUpdate:
      return true;
    case FrameType::kData:
      return false;
  }
  return false;
}

std::string TypeName(uint16_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kSynStream:
      return "SYN_STREAM";
    case FrameType::kSynReply:
      return "SYN_REPLY";
    case FrameType::kRstStream:
      return "RST_STREAM";
    case FrameType::kSettings:
      return "SETTINGS";
    case FrameType::kPing:
      return "PING";
    case FrameType::kGoAway:
      return "GOAWAY";
    case FrameType::kHeaders:
      return "HEADERS";
    case FrameType::kWindowUpdate:
      return "WINDOW_UPDATE";
    case FrameType::kData:
      break;
  }
  return "control frame type " + std::to_string(type);
}

Status BadLength(uint16_t type, size_t length) {
  return InvalidArgument("SPDY " + TypeName(type) + " frame has an invalid length " + std::to_string(length));
}

}  // namespace

FrameReader::FrameReader(FrameLimits limits) : limits_(limits), inflater_(limits.header_block) {}

Status FrameReader::Feed(std::string_view bytes, std::vector<Frame>* frames) {
  if (failed_) return InvalidArgument("SPDY connection already failed to parse");
  while (!bytes.empty()) {
    if (in_data_) {
      const size_t n = std::min(remaining_, bytes.size());
      remaining_ -= n;
      Frame piece;
      piece.stream_id = data_stream_;
      piece.flags = remaining_ == 0 ? frame_flags_ : 0;
      piece.data.assign(bytes.substr(0, n));
      frames->push_back(std::move(piece));
      bytes.remove_prefix(n);
      in_data_ = remaining_ != 0;
      continue;
    }
    if (in_control_) {
      const size_t n = std::min(remaining_, bytes.size());
      if (!skipping_) control_payload_.append(bytes.substr(0, n));
      bytes.remove_prefix(n);
      remaining_ -= n;
      if (remaining_ != 0) continue;
      in_control_ = false;
      if (!skipping_) {
        Status s = DecodeControl(control_type_, frame_flags_, control_payload_, frames);
        control_payload_.clear();
        if (!s.ok()) {
          failed_ = true;
          return s;
        }
      }
      continue;
    }
    const size_t need = kFrameHeaderBytes - header_.size();
    header_.append(bytes.substr(0, need));
    bytes.remove_prefix(std::min(need, bytes.size()));
    if (header_.size() < kFrameHeaderBytes) break;

    const uint32_t first = U32At(header_, 0);
    const uint32_t second = U32At(header_, 4);
    header_.clear();
    frame_flags_ = static_cast<uint8_t>(second >> 24);
    remaining_ = second & 0xffffff;
    if ((first & 0x80000000u) == 0) {
      data_stream_ = first & kStreamIdMask;
      if (data_stream_ == 0) {
        failed_ = true;
        return InvalidArgument("SPDY data frame on stream 0");
      }
      if (remaining_ == 0) {
        Frame empty;
        empty.stream_id = data_stream_;
        empty.flags = frame_flags_;
        frames->push_back(std::move(empty));
      }
      in_data_ = remaining_ != 0;
      continue;
    }
    control_version_ = static_cast<uint16_t>((first >> 16) & 0x7fff);
    control_type_ = static_cast<uint16_t>(first & 0xffff);
    if (control_version_ != kVersion) {
      failed_ = true;
      return InvalidArgument("SPDY control frame of version " + std::to_string(control_version_) +
                             "; only version 3 is spoken here");
    }
    skipping_ = !KnownControlType(control_type_);
    if (!skipping_ && remaining_ > limits_.max_control_payload) {
      failed_ = true;
      return InvalidArgument("SPDY " + TypeName(control_type_) + " frame of " + std::to_string(remaining_) +
                             " bytes is larger than the " + std::to_string(limits_.max_control_payload) + " allowed");
    }
    in_control_ = remaining_ != 0;
    if (!in_control_ && !skipping_) {
      Status s = DecodeControl(control_type_, frame_flags_, {}, frames);
      if (!s.ok()) {
        failed_ = true;
        return s;
      }
    }
  }
  return Status::Ok();
}

Status FrameReader::DecodeControl(uint16_t type, uint8_t flags, std::string_view payload, std::vector<Frame>* frames) {
  Frame f;
  f.type = static_cast<FrameType>(type);
  f.flags = flags;
  const size_t length = payload.size();
  switch (f.type) {
    case FrameType::kSynStream: {
      if (length < 10) return BadLength(type, length);
      f.stream_id = U32At(payload, 0) & kStreamIdMask;
      f.associated_stream_id = U32At(payload, 4) & kStreamIdMask;
      f.priority = static_cast<uint8_t>(static_cast<unsigned char>(payload[8]) >> 5);
      MF_ASSIGN_OR_RETURN(f.headers, inflater_.Decode(payload.substr(10)));
      if (f.stream_id == 0) return InvalidArgument("SPDY SYN_STREAM for stream 0");
      break;
    }
    case FrameType::kSynReply:
    case FrameType::kHeaders: {
      if (length < 4) return BadLength(type, length);
      f.stream_id = U32At(payload, 0) & kStreamIdMask;
      MF_ASSIGN_OR_RETURN(f.headers, inflater_.Decode(payload.substr(4)));
      if (f.stream_id == 0) return InvalidArgument("SPDY " + TypeName(type) + " for stream 0");
      break;
    }
    case FrameType::kRstStream: {
      if (length != 8) return BadLength(type, length);
      f.stream_id = U32At(payload, 0) & kStreamIdMask;
      f.status = U32At(payload, 4);
      if (f.stream_id == 0) return InvalidArgument("SPDY RST_STREAM for stream 0");
      if (f.status == 0) return InvalidArgument("SPDY RST_STREAM with status 0");
      break;
    }
    case FrameType::kSettings: {
      if (length < 4) return BadLength(type, length);
      const uint32_t count = U32At(payload, 0);
      if ((length - 4) / 8 != count || (length - 4) % 8 != 0) return BadLength(type, length);
      for (uint32_t i = 0; i < count; ++i) {
        f.settings.emplace_back(U32At(payload, 4 + 8 * i), U32At(payload, 8 + 8 * i));
      }
      break;
    }
    case FrameType::kPing: {
      if (length != 4) return BadLength(type, length);
      f.id = U32At(payload, 0);
      break;
    }
    case FrameType::kGoAway: {
      if (length != 8) return BadLength(type, length);
      f.id = U32At(payload, 0) & kStreamIdMask;
      f.status = U32At(payload, 4);
      break;
    }
    case FrameType::kWindowUpdate: {
      if (length != 8) return BadLength(type, length);
      f.stream_id = U32At(payload, 0) & kStreamIdMask;
      f.id = U32At(payload, 4) & kStreamIdMask;
      break;
    }
    case FrameType::kData:
      return Internal("data frame decoded as a control frame");
  }
  frames->push_back(std::move(f));
  return Status::Ok();
}

std::string EncodeControl(uint16_t type, uint8_t flags, std::string_view payload, uint16_t version) {
  std::string out;
  out.reserve(kFrameHeaderBytes + payload.size());
  PutU16(&out, static_cast<uint16_t>(0x8000 | version));
  PutU16(&out, type);
  AppendU32(&out, uint32_t{flags} << 24 | static_cast<uint32_t>(payload.size() & 0xffffff));
  out.append(payload);
  return out;
}

std::string FrameWriter::SynStream(uint32_t stream_id, const Headers& headers, uint8_t flags) {
  std::string payload;
  AppendU32(&payload, stream_id & kStreamIdMask);
  AppendU32(&payload, 0);  // associated stream
  PutU16(&payload, 0);     // priority 0, slot 0
  payload += deflater_.Encode(headers);
  return EncodeControl(static_cast<uint16_t>(FrameType::kSynStream), flags, payload);
}

std::string FrameWriter::SynReply(uint32_t stream_id, const Headers& headers, uint8_t flags) {
  std::string payload;
  AppendU32(&payload, stream_id & kStreamIdMask);
  payload += deflater_.Encode(headers);
  return EncodeControl(static_cast<uint16_t>(FrameType::kSynReply), flags, payload);
}

std::string FrameWriter::HeadersFrame(uint32_t stream_id, const Headers& headers, uint8_t flags) {
  std::string payload;
  AppendU32(&payload, stream_id & kStreamIdMask);
  payload += deflater_.Encode(headers);
  return EncodeControl(static_cast<uint16_t>(FrameType::kHeaders), flags, payload);
}

std::string EncodeData(uint32_t stream_id, std::string_view data, bool fin) {
  std::string out;
  out.reserve(kFrameHeaderBytes + data.size());
  AppendU32(&out, stream_id & kStreamIdMask);
  AppendU32(&out, uint32_t{fin ? kFlagFin : uint8_t{0}} << 24 | static_cast<uint32_t>(data.size() & 0xffffff));
  out.append(data);
  return out;
}

std::string EncodeRstStream(uint32_t stream_id, RstStatus status) {
  std::string payload;
  AppendU32(&payload, stream_id & kStreamIdMask);
  AppendU32(&payload, static_cast<uint32_t>(status));
  return EncodeControl(static_cast<uint16_t>(FrameType::kRstStream), 0, payload);
}

std::string EncodePing(uint32_t id) {
  std::string payload;
  AppendU32(&payload, id);
  return EncodeControl(static_cast<uint16_t>(FrameType::kPing), 0, payload);
}

std::string EncodeGoAway(uint32_t last_good_stream_id, GoAwayStatus status) {
  std::string payload;
  AppendU32(&payload, last_good_stream_id & kStreamIdMask);
  AppendU32(&payload, static_cast<uint32_t>(status));
  return EncodeControl(static_cast<uint16_t>(FrameType::kGoAway), 0, payload);
}

std::string EncodeWindowUpdate(uint32_t stream_id, uint32_t delta) {
  std::string payload;
  AppendU32(&payload, stream_id & kStreamIdMask);
  AppendU32(&payload, delta & kStreamIdMask);
  return EncodeControl(static_cast<uint16_t>(FrameType::kWindowUpdate), 0, payload);
}

std::string EncodeSettings(const std::vector<std::pair<uint32_t, uint32_t>>& settings) {
  std::string payload;
  AppendU32(&payload, static_cast<uint32_t>(settings.size()));
  for (const auto& [flags_and_id, value] : settings) {
    AppendU32(&payload, flags_and_id);
    AppendU32(&payload, value);
  }
  return EncodeControl(static_cast<uint16_t>(FrameType::kSettings), 0, payload);
}

}  // namespace mf::local::spdy
