#include "server/router/h2_client_session.h"

#include <algorithm>
#include <charconv>

namespace mf::router {

namespace frame = http2::frame;

struct H2ClientSession::Stream {
  int32_t id = 0;
  H2Request request;
  std::shared_ptr<StreamHandler> handler;
  bool headers_written = false;
  size_t body_sent = 0;
  bool request_done = false;  // END_STREAM written
  bool any_frame_written = false;
  bool response_started = false;  // final (non-1xx) headers received
  int64_t send_window = 0;
  int64_t receive_consumed = 0;
};

namespace {

class CollectFields : public http2::hpack::FieldSink {
 public:
  void OnField(std::string_view name, std::string_view value) override {
    bytes += name.size() + value.size() + 32;
    fields.emplace_back(std::string(name), std::string(value));
  }
  http2::Headers fields;
  size_t bytes = 0;
};

}  // namespace

H2ClientSession::H2ClientSession(H2ClientOptions options) : options_(options), decoder_(4096) {}

H2ClientSession::~H2ClientSession() = default;

bool H2ClientSession::accepting() const {
  return !failed_ && !goaway_received_ && next_stream_id_ > 0 && next_stream_id_ < 0x7ffffff0;
}

int32_t H2ClientSession::Submit(H2Request request, std::shared_ptr<StreamHandler> handler) {
  if (!accepting()) return 0;
  auto stream = std::make_unique<Stream>();
  stream->id = next_stream_id_;
  next_stream_id_ += 2;
  stream->request = std::move(request);
  stream->handler = std::move(handler);
  stream->send_window = peer_initial_window_;
  const int32_t id = stream->id;
  streams_.emplace(id, std::move(stream));
  sending_.push_back(id);
  return id;
}

void H2ClientSession::Cancel(int32_t stream_id) {
  auto it = streams_.find(stream_id);
  if (it == streams_.end()) return;
  if (it->second->any_frame_written) frame::AppendRstStream(stream_id, http2::kCancel, &control_);
  Finish(stream_id);
}

void H2ClientSession::Finish(int32_t stream_id) {
  streams_.erase(stream_id);
  // sending_ is cleaned lazily by Produce().
}

void H2ClientSession::ResetStream(int32_t stream_id, uint32_t code, bool unprocessed, const std::string& why,
                                  bool send_rst) {
  auto it = streams_.find(stream_id);
  if (it == streams_.end()) return;
  std::shared_ptr<StreamHandler> handler = std::move(it->second->handler);
  if (send_rst && it->second->any_frame_written) frame::AppendRstStream(stream_id, code, &control_);
  Finish(stream_id);
  if (handler) handler->OnReset(code, unprocessed, why);
}

void H2ClientSession::Fail(const std::string& why) {
  failed_ = true;
  std::vector<int32_t> ids;
  for (auto& [id, stream] : streams_) ids.push_back(id);
  for (int32_t id : ids) {
    auto it = streams_.find(id);
    if (it == streams_.end()) continue;
    ResetStream(id, http2::kInternalError, !it->second->any_frame_written, why, false);
  }
}

Status H2ClientSession::ConnectionError(uint32_t code, std::string message) {
  frame::AppendGoaway(0, code, message, &control_);
  Fail("upstream HTTP/2 protocol error: " + message);
  return Unavailable("upstream HTTP/2 protocol error: " + message);
}

void H2ClientSession::WriteHeaders(Stream& stream, std::string* out) {
  std::string block;
  encoder_.BeginBlock(&block);
  encoder_.Add(":method", stream.request.method, &block);
  encoder_.Add(":scheme", stream.request.scheme, &block);
  encoder_.Add(":authority", stream.request.authority, &block);
  encoder_.Add(":path", stream.request.path, &block);
  for (const auto& [name, value] : stream.request.headers) encoder_.Add(name, value, &block);
  const bool end_stream = stream.request.body.empty();
  size_t offset = 0;
  bool first = true;
  do {
    const size_t n = std::min(peer_max_frame_, block.size() - offset);
    const bool last = offset + n == block.size();
    uint8_t flags = last ? frame::kEndHeaders : 0;
    if (first && end_stream) flags |= frame::kEndStream;
    frame::AppendHeader(static_cast<uint32_t>(n), first ? frame::kHeaders : frame::kContinuation, flags, stream.id,
                        out);
    out->append(block, offset, n);
    offset += n;
    first = false;
  } while (offset < block.size());
  stream.headers_written = true;
  stream.any_frame_written = true;
  stream.request_done = end_stream;
}

void H2ClientSession::Produce(std::string* out) {
  if (!preface_sent_) {
    preface_sent_ = true;
    out->append(http2::kClientPreface);
    std::string settings;
    frame::AppendSetting(frame::kEnablePush, 0, &settings);
    frame::AppendSetting(frame::kInitialWindowSize, options_.stream_window_bytes, &settings);
    frame::AppendSetting(frame::kMaxHeaderListSize, static_cast<uint32_t>(options_.max_response_header_bytes),
                         &settings);
    frame::AppendHeader(static_cast<uint32_t>(settings.size()), frame::kSettings, 0, 0, out);
    out->append(settings);
    if (options_.connection_window_bytes > http2::kDefaultWindowBytes) {
      frame::AppendWindowUpdate(0, options_.connection_window_bytes - http2::kDefaultWindowBytes, out);
    }
  }
  out->append(control_);
  control_.clear();
  if (failed_) return;
  // Request frames in submission order; a stream the windows hold back keeps its place.
  std::deque<int32_t> still;
  while (!sending_.empty()) {
    const int32_t id = sending_.front();
    sending_.pop_front();
    auto it = streams_.find(id);
    if (it == streams_.end()) continue;
    Stream& stream = *it->second;
    if (!stream.headers_written) WriteHeaders(stream, out);
    const std::string& body = stream.request.body;
    while (!stream.request_done) {
      const int64_t allowed = std::min({send_window_, stream.send_window, static_cast<int64_t>(peer_max_frame_)});
      const size_t left = body.size() - stream.body_sent;
      if (allowed <= 0 && left > 0) break;
      const size_t n = std::min(left, static_cast<size_t>(std::max<int64_t>(allowed, 0)));
      const bool last = stream.body_sent + n == body.size();
      frame::AppendHeader(static_cast<uint32_t>(n), frame::kData, last ? frame::kEndStream : 0, id, out);
      out->append(body, stream.body_sent, n);
      stream.body_sent += n;
      send_window_ -= static_cast<int64_t>(n);
      stream.send_window -= static_cast<int64_t>(n);
      stream.request_done = last;
    }
    if (!stream.request_done) still.push_back(id);
  }
  sending_ = std::move(still);
}

Status H2ClientSession::Receive(const uint8_t* data, size_t size) {
  if (failed_) return Unavailable("the upstream HTTP/2 connection has failed");
  input_.append(reinterpret_cast<const char*>(data), size);
  size_t pos = 0;
  Status status;
  while (input_.size() - pos >= http2::kFrameHeaderBytes) {
    const auto* p = reinterpret_cast<const uint8_t*>(input_.data()) + pos;
    frame::Header header = frame::ParseHeader(p);
    if (header.length > http2::kDefaultMaxFrameBytes) {
      status = ConnectionError(http2::kFrameSizeError, "frame of " + std::to_string(header.length) + " bytes");
      break;
    }
    if (input_.size() - pos < http2::kFrameHeaderBytes + header.length) break;
    status = OnFrame(header, p + http2::kFrameHeaderBytes);
    pos += http2::kFrameHeaderBytes + header.length;
    if (!status.ok()) break;
  }
  input_.erase(0, pos);
  return status;
}

Status H2ClientSession::OnFrame(const frame::Header& header, const uint8_t* payload) {
  const size_t length = header.length;
  if (block_stream_ != 0 && header.type != frame::kContinuation) {
    return ConnectionError(http2::kProtocolError, "a header block was interrupted by another frame");
  }
  switch (header.type) {
    case frame::kData: {
      if (header.stream_id == 0) return ConnectionError(http2::kProtocolError, "DATA on stream 0");
      receive_consumed_ += static_cast<int64_t>(length);
      Replenish(0, &receive_consumed_, options_.connection_window_bytes);
      auto it = streams_.find(header.stream_id);
      if (it == streams_.end()) return Status::Ok();  // cancelled or already reset: ignore
      Stream& stream = *it->second;
      if (!stream.response_started) {
        ResetStream(header.stream_id, http2::kProtocolError, false, "upstream sent DATA before response headers", true);
        return Status::Ok();
      }
      frame::Content content = frame::StripPadding(header.type, header.flags, payload, length);
      if (content.problem != frame::Content::kNone) return ConnectionError(http2::kProtocolError, "bad DATA padding");
      stream.receive_consumed += static_cast<int64_t>(length);
      std::shared_ptr<StreamHandler> handler = stream.handler;
      const int32_t id = header.stream_id;
      if ((header.flags & frame::kEndStream) == 0)
        Replenish(id, &stream.receive_consumed, options_.stream_window_bytes);
      if (content.size > 0)
        handler->OnData(std::string_view(reinterpret_cast<const char*>(content.data), content.size));
      if ((header.flags & frame::kEndStream) != 0 && streams_.count(id) != 0) {
        Finish(id);
        handler->OnEnd({});
      }
      return Status::Ok();
    }
    case frame::kHeaders: {
      if (header.stream_id == 0) return ConnectionError(http2::kProtocolError, "HEADERS on stream 0");
      frame::Content content = frame::StripPadding(header.type, header.flags, payload, length);
      if (content.problem != frame::Content::kNone)
        return ConnectionError(http2::kProtocolError, "bad HEADERS padding");
      block_.assign(reinterpret_cast<const char*>(content.data), content.size);
      block_end_stream_ = (header.flags & frame::kEndStream) != 0;
      if ((header.flags & frame::kEndHeaders) != 0) return OnHeaderBlock(header.stream_id, block_end_stream_);
      block_stream_ = header.stream_id;
      return Status::Ok();
    }
    case frame::kContinuation: {
      if (block_stream_ == 0 || header.stream_id != block_stream_) {
        return ConnectionError(http2::kProtocolError, "unexpected CONTINUATION");
      }
      block_.append(reinterpret_cast<const char*>(payload), length);
      if (block_.size() > options_.max_response_header_bytes * 2) {
        return ConnectionError(http2::kEnhanceYourCalm, "response header block too large");
      }
      if ((header.flags & frame::kEndHeaders) == 0) return Status::Ok();
      const int32_t id = block_stream_;
      block_stream_ = 0;
      return OnHeaderBlock(id, block_end_stream_);
    }
    case frame::kRstStream: {
      if (length != 4) return ConnectionError(http2::kFrameSizeError, "RST_STREAM of " + std::to_string(length));
      const uint32_t code = frame::ReadU32(payload);
      ResetStream(header.stream_id, code, code == http2::kRefusedStream,
                  "upstream reset the stream (HTTP/2 error " + std::to_string(code) + ")", false);
      return Status::Ok();
    }
    case frame::kSettings:
      return OnSettings(header.flags, payload, length);
    case frame::kPushPromise:
      return ConnectionError(http2::kProtocolError, "PUSH_PROMISE although push is disabled");
    case frame::kPing:
      if (length != 8) return ConnectionError(http2::kFrameSizeError, "PING of " + std::to_string(length));
      if ((header.flags & frame::kAck) == 0) {
        frame::AppendHeader(8, frame::kPing, frame::kAck, 0, &control_);
        control_.append(reinterpret_cast<const char*>(payload), 8);
      }
      return Status::Ok();
    case frame::kGoaway:
      if (length < 8) return ConnectionError(http2::kFrameSizeError, "GOAWAY of " + std::to_string(length));
      OnGoaway(payload, length);
      return Status::Ok();
    case frame::kWindowUpdate: {
      if (length != 4) return ConnectionError(http2::kFrameSizeError, "WINDOW_UPDATE of " + std::to_string(length));
      const int64_t increment = frame::ReadU32(payload) & 0x7fffffffu;
      if (header.stream_id == 0) {
        send_window_ += increment;
        if (send_window_ > http2::kMaxWindowBytes) return ConnectionError(http2::kFlowControlError, "window overflow");
      } else if (auto it = streams_.find(header.stream_id); it != streams_.end()) {
        it->second->send_window += increment;
      }
      return Status::Ok();
    }
    default:
      return Status::Ok();  // PRIORITY and unknown frame types are ignored (RFC 9113 5.5)
  }
}

Status H2ClientSession::OnHeaderBlock(int32_t stream_id, bool end_stream) {
  CollectFields fields;
  // Every block goes through the decoder, even for a stream we no longer track: HPACK state.
  if (Status s = decoder_.Decode(block_, fields); !s.ok()) {
    return ConnectionError(http2::kCompressionError, s.message());
  }
  block_.clear();
  auto it = streams_.find(stream_id);
  if (it == streams_.end()) return Status::Ok();
  Stream& stream = *it->second;
  if (fields.bytes > options_.max_response_header_bytes) {
    ResetStream(
        stream_id, http2::kCancel, false,
        "upstream response headers larger than " + std::to_string(options_.max_response_header_bytes) + " bytes", true);
    return Status::Ok();
  }
  std::shared_ptr<StreamHandler> handler = stream.handler;
  if (!stream.response_started) {
    int status = 0;
    http2::Headers headers;
    for (auto& [name, value] : fields.fields) {
      if (name == ":status") {
        std::from_chars(value.data(), value.data() + value.size(), status);
      } else if (!name.empty() && name[0] != ':') {
        headers.emplace_back(std::move(name), std::move(value));
      }
    }
    if (status < 100 || status > 999) {
      ResetStream(stream_id, http2::kProtocolError, false, "upstream response without a valid :status", true);
      return Status::Ok();
    }
    if (status < 200) return Status::Ok();  // interim response: the final one follows
    stream.response_started = true;
    handler->OnHeaders(status, std::move(headers));
    if (end_stream && streams_.count(stream_id) != 0) {
      Finish(stream_id);
      handler->OnEnd({});
    }
    return Status::Ok();
  }
  if (!end_stream) {
    ResetStream(stream_id, http2::kProtocolError, false, "upstream sent trailers without END_STREAM", true);
    return Status::Ok();
  }
  http2::Headers trailers;
  for (auto& [name, value] : fields.fields) {
    if (!name.empty() && name[0] != ':') trailers.emplace_back(std::move(name), std::move(value));
  }
  Finish(stream_id);
  handler->OnEnd(std::move(trailers));
  return Status::Ok();
}

Status H2ClientSession::OnSettings(uint8_t flags, const uint8_t* payload, size_t length) {
  if ((flags & frame::kAck) != 0) return Status::Ok();
  if (length % 6 != 0) return ConnectionError(http2::kFrameSizeError, "SETTINGS of " + std::to_string(length));
  for (size_t i = 0; i < length; i += 6) {
    const uint16_t id = static_cast<uint16_t>((payload[i] << 8) | payload[i + 1]);
    const uint32_t value = frame::ReadU32(payload + i + 2);
    switch (id) {
      case frame::kHeaderTableSize:
        encoder_.SetPeerMaxTableSize(value);
        break;
      case frame::kMaxConcurrentStreams:
        peer_max_concurrent_ = value;
        break;
      case frame::kInitialWindowSize: {
        if (value > http2::kMaxWindowBytes)
          return ConnectionError(http2::kFlowControlError, "initial window too large");
        const int64_t delta = static_cast<int64_t>(value) - peer_initial_window_;
        peer_initial_window_ = value;
        for (auto& [sid, stream] : streams_) stream->send_window += delta;
        break;
      }
      case frame::kMaxFrameSize:
        if (value < 16384 || value > 16777215) return ConnectionError(http2::kProtocolError, "bad MAX_FRAME_SIZE");
        peer_max_frame_ = value;
        break;
      default:
        break;
    }
  }
  frame::AppendHeader(0, frame::kSettings, frame::kAck, 0, &control_);
  return Status::Ok();
}

void H2ClientSession::OnGoaway(const uint8_t* payload, size_t length) {
  goaway_received_ = true;
  const int32_t last = static_cast<int32_t>(frame::ReadU32(payload) & 0x7fffffffu);
  const uint32_t code = frame::ReadU32(payload + 4);
  std::string debug(reinterpret_cast<const char*>(payload + 8), length - 8);
  std::vector<int32_t> refused;
  for (auto& [id, stream] : streams_) {
    if (id > last) refused.push_back(id);
  }
  for (int32_t id : refused) {
    ResetStream(id, code, true, "upstream is shutting down (GOAWAY" + (debug.empty() ? "" : ": " + debug) + ")", false);
  }
}

void H2ClientSession::Replenish(int32_t stream_id, int64_t* consumed, int64_t full) {
  if (*consumed < full / 2) return;
  frame::AppendWindowUpdate(stream_id, static_cast<uint32_t>(*consumed), &control_);
  *consumed = 0;
}

}  // namespace mf::router
