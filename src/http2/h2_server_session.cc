#include "http2/h2_server_session.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <utility>

#include "http2/request_fields.h"

namespace mf::http2 {

struct Session::Stream {
  int32_t id = 0;
  Request request;
  int64_t content_length = -1;  // declared by the request; -1: none
  size_t body_received = 0;     // DATA bytes without padding, kept or not
  bool remote_ended = false;    // END_STREAM received
  bool delivered = false;
  int64_t receive_window = 0;
  int64_t receive_consumed = 0;
  // Response side. `out` from `out_offset` on is body not yet written.
  bool response_started = false;
  bool response_ended = false;  // `end` was given: nothing more may be queued
  bool queued = false;          // in sending_
  int64_t send_window = 0;
  std::string out;
  size_t out_offset = 0;
  Headers trailers;
};

namespace {

// Most frames the peer made us owe it (ACKs, resets) between two writes; nghttp2's default.
constexpr size_t kMaxOwedFrames = 1000;
// A header block (compressed) may exceed the header list limit by this much before the peer is
// told to calm down: legitimate blocks are smaller than what they decode to.
constexpr size_t kHeaderBlockSlack = 64 * 1024;
// Open streams a client may reset at once, and how many more per second (nghttp2's defaults).
constexpr double kResetBurst = 1000;
constexpr double kResetsPerSecond = 33;

// A block whose stream is gone still goes through the decoder: its table must stay in step.
class DiscardFields final : public hpack::FieldSink {
 public:
  void OnField(std::string_view, std::string_view) override {}
};

int64_t Clamp(uint64_t window) { return static_cast<int64_t>(std::min<uint64_t>(window, kMaxWindowBytes)); }

}  // namespace

Session::Session(const SessionOptions& options, std::string peer, Delegate* delegate)
    : options_(options),
      peer_(std::move(peer)),
      delegate_(delegate),
      reset_tokens_(kResetBurst),
      reset_refilled_(std::chrono::steady_clock::now()) {
  // The server's connection preface (RFC 9113 3.4), then the connection window raised: it is not
  // a setting.
  frame::AppendHeader(3 * 6, frame::kSettings, 0, 0, &control_);
  frame::AppendSetting(frame::kMaxConcurrentStreams, options_.max_concurrent_streams, &control_);
  frame::AppendSetting(frame::kInitialWindowSize, static_cast<uint32_t>(Clamp(options_.stream_window_bytes)),
                       &control_);
  frame::AppendSetting(frame::kMaxHeaderListSize, static_cast<uint32_t>(options_.max_header_list_bytes), &control_);
  const int64_t connection_window = Clamp(options_.connection_window_bytes);
  if (connection_window > receive_window_) {
    frame::AppendWindowUpdate(0, static_cast<uint32_t>(connection_window - receive_window_), &control_);
    receive_window_ = connection_window;
  }
}

Session::~Session() = default;

Session::Stream* Session::Find(int32_t stream_id) {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : it->second.get();
}

Status Session::Receive(const uint8_t* data, size_t size) {
  if (failed_) return Unavailable("the HTTP/2 session already failed");
  for (; preface_seen_ < kClientPreface.size() && size > 0; ++preface_seen_, ++data, --size) {
    if (*data != static_cast<uint8_t>(kClientPreface[preface_seen_])) {
      failed_ = true;
      return InvalidArgument("not an HTTP/2 connection: the client preface is missing");
    }
  }
  // A frame an earlier read began is finished in input_; the rest is parsed where it lies, so
  // a large upload is not copied once more on its way through.
  if (!input_.empty()) {
    size_t wanted = kFrameHeaderBytes;
    if (input_.size() >= kFrameHeaderBytes) {
      wanted += frame::ParseHeader(reinterpret_cast<const uint8_t*>(input_.data())).length;
    } else {
      const size_t take = std::min(size, kFrameHeaderBytes - input_.size());
      input_.append(reinterpret_cast<const char*>(data), take);
      data += take, size -= take;
      if (input_.size() == kFrameHeaderBytes) {
        wanted += frame::ParseHeader(reinterpret_cast<const uint8_t*>(input_.data())).length;
      }
    }
    // An oversized length is refused by ParseFrames before anything waits for its payload.
    if (wanted > kFrameHeaderBytes + kDefaultMaxFrameBytes) wanted = input_.size();
    const size_t take = std::min(size, wanted - std::min(wanted, input_.size()));
    input_.append(reinterpret_cast<const char*>(data), take);
    data += take, size -= take;
    size_t consumed = 0;
    if (input_.size() >= wanted) ParseFrames(reinterpret_cast<const uint8_t*>(input_.data()), input_.size(), &consumed);
    input_.erase(0, consumed);
  }
  if (!failed_ && input_.empty()) {
    size_t consumed = 0;
    ParseFrames(data, size, &consumed);
    if (!failed_) input_.assign(reinterpret_cast<const char*>(data) + consumed, size - consumed);
  }
  Status status = Status::Ok();
  if (failed_) {
    input_.clear();
    status = InvalidArgument("HTTP/2 protocol error: " + error_);
  }
  DeliverEvents();
  return status;
}

void Session::ParseFrames(const uint8_t* data, size_t size, size_t* consumed) {
  size_t at = 0;
  while (!failed_ && size - at >= kFrameHeaderBytes) {
    const frame::Header header = frame::ParseHeader(data + at);
    // We never raise SETTINGS_MAX_FRAME_SIZE, so this bounds what one frame can make us buffer.
    if (header.length > kDefaultMaxFrameBytes) {
      ConnectionError(kFrameSizeError,
                      "a frame of " + std::to_string(header.length) + " bytes exceeds SETTINGS_MAX_FRAME_SIZE (16384)");
      break;
    }
    if (size - at - kFrameHeaderBytes < header.length) break;
    OnFrame(data + at, data + at + kFrameHeaderBytes, header.length);
    at += kFrameHeaderBytes + header.length;
  }
  *consumed = at;
}

void Session::OnFrame(const uint8_t* header_bytes, const uint8_t* payload, size_t length) {
  const frame::Header h = frame::ParseHeader(header_bytes);
  if (!settings_seen_) {
    if (h.type != frame::kSettings || (h.flags & frame::kAck) != 0) {
      return ConnectionError(kProtocolError, "the client preface must be followed by SETTINGS");
    }
    settings_seen_ = true;
  }
  if (block_stream_ != 0 && h.type != frame::kContinuation) {
    return ConnectionError(kProtocolError, "a header block was interrupted by another frame");
  }
  switch (h.type) {
    case frame::kData:
      return OnData(h.stream_id, h.flags, payload, length);
    case frame::kHeaders:
      return OnHeaders(h.stream_id, h.flags, payload, length);
    case frame::kContinuation:
      return OnContinuation(h.stream_id, h.flags, payload, length);
    case frame::kPriority:
      // Advisory (RFC 9113 5.3.2): this server answers in arrival order.
      if (h.stream_id == 0) return ConnectionError(kProtocolError, "PRIORITY on stream 0");
      if (length != 5) return ConnectionError(kFrameSizeError, "PRIORITY must be 5 bytes");
      return;
    case frame::kRstStream:
      return OnRstStream(h.stream_id, payload, length);
    case frame::kSettings:
      if (h.stream_id != 0) return ConnectionError(kProtocolError, "SETTINGS on a stream");
      return OnSettings(h.flags, payload, length);
    case frame::kPushPromise:
      return ConnectionError(kProtocolError, "a client must not send PUSH_PROMISE");
    case frame::kPing:
      if (h.stream_id != 0) return ConnectionError(kProtocolError, "PING on a stream");
      if (length != 8) return ConnectionError(kFrameSizeError, "PING must be 8 bytes");
      if ((h.flags & frame::kAck) == 0 && OweFrame()) {
        frame::AppendHeader(8, frame::kPing, frame::kAck, 0, &control_);
        control_.append(reinterpret_cast<const char*>(payload), 8);
      }
      return;
    case frame::kGoaway:
      if (h.stream_id != 0) return ConnectionError(kProtocolError, "GOAWAY on a stream");
      if (length < 8) return ConnectionError(kFrameSizeError, "GOAWAY shorter than 8 bytes");
      goaway_received_ = true;  // the streams it lets finish finish; the client opens no more
      return;
    case frame::kWindowUpdate:
      return OnWindowUpdate(h.stream_id, payload, length);
    default:
      return;  // unknown frame types are ignored (RFC 9113 5.5)
  }
}

void Session::OnSettings(uint8_t flags, const uint8_t* payload, size_t length) {
  if ((flags & frame::kAck) != 0) {
    if (length != 0) ConnectionError(kFrameSizeError, "a SETTINGS acknowledgement carries no settings");
    return;
  }
  if (length % 6 != 0) return ConnectionError(kFrameSizeError, "SETTINGS length is not a multiple of 6");
  for (size_t at = 0; at < length; at += 6) {
    const uint16_t id = static_cast<uint16_t>((payload[at] << 8) | payload[at + 1]);
    const uint32_t value = frame::ReadU32(payload + at + 2);
    switch (id) {
      case frame::kHeaderTableSize:
        encoder_.SetPeerMaxTableSize(value);
        break;
      case frame::kEnablePush:
      case frame::kNoRfc7540Priorities:
        if (value > 1) return ConnectionError(kProtocolError, "a boolean setting is neither 0 nor 1");
        break;
      case frame::kInitialWindowSize: {
        if (value > kMaxWindowBytes)
          return ConnectionError(kFlowControlError, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1");
        // Applies to every open stream's send window, by the difference (RFC 9113 6.9.2).
        const int64_t delta = int64_t{value} - peer_initial_window_;
        peer_initial_window_ = value;
        for (auto& [stream_id, stream] : streams_) {
          stream->send_window += delta;
          if (stream->send_window > kMaxWindowBytes) {
            return ConnectionError(kFlowControlError, "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream window");
          }
        }
        break;
      }
      case frame::kMaxFrameSize:
        if (value < kDefaultMaxFrameBytes || value > 16777215) {
          return ConnectionError(kProtocolError, "SETTINGS_MAX_FRAME_SIZE outside 16384..16777215");
        }
        peer_max_frame_bytes_ = value;
        break;
      default:
        break;  // MAX_CONCURRENT_STREAMS and MAX_HEADER_LIST_SIZE bound what we push: nothing
    }
  }
  if (OweFrame()) frame::AppendHeader(0, frame::kSettings, frame::kAck, 0, &control_);
}

void Session::OnWindowUpdate(int32_t id, const uint8_t* payload, size_t length) {
  if (length != 4) return ConnectionError(kFrameSizeError, "WINDOW_UPDATE must be 4 bytes");
  const uint32_t increment = frame::ReadU32(payload) & 0x7fffffffu;
  if (id == 0) {
    if (increment == 0) return ConnectionError(kProtocolError, "connection WINDOW_UPDATE of 0");
    send_window_ += increment;
    if (send_window_ > kMaxWindowBytes) ConnectionError(kFlowControlError, "connection window above 2^31-1");
    return;
  }
  Stream* stream = Find(id);
  if (stream == nullptr) {
    if (id > last_stream_id_) ConnectionError(kProtocolError, "WINDOW_UPDATE on a stream never opened");
    return;  // closed: late updates are expected
  }
  if (increment == 0) return StreamError(id, kProtocolError);
  stream->send_window += increment;
  if (stream->send_window > kMaxWindowBytes) StreamError(id, kFlowControlError);
}

void Session::OnRstStream(int32_t id, const uint8_t* /*payload*/, size_t length) {
  if (id == 0) return ConnectionError(kProtocolError, "RST_STREAM on stream 0");
  if (length != 4) return ConnectionError(kFrameSizeError, "RST_STREAM must be 4 bytes");
  if (id > last_stream_id_) return ConnectionError(kProtocolError, "RST_STREAM on a stream never opened");
  if (Find(id) == nullptr) return;  // already closed: a reset crossing our answer
  const auto now = std::chrono::steady_clock::now();
  reset_tokens_ = std::min(
      kResetBurst, reset_tokens_ + kResetsPerSecond * std::chrono::duration<double>(now - reset_refilled_).count());
  reset_refilled_ = now;
  if (reset_tokens_ < 1) return ConnectionError(kEnhanceYourCalm, "streams reset faster than the server allows");
  reset_tokens_ -= 1;
  CloseStream(id);
}

void Session::OnData(int32_t id, uint8_t flags, const uint8_t* payload, size_t length) {
  if (id == 0) return ConnectionError(kProtocolError, "DATA on stream 0");
  const frame::Content content = frame::StripPadding(frame::kData, flags, payload, length);
  if (content.problem != frame::Content::kNone)
    return ConnectionError(kProtocolError, "DATA padding exceeds the frame");
  // The whole frame, padding included, counts against both windows (RFC 9113 6.9.1).
  receive_window_ -= static_cast<int64_t>(length);
  if (receive_window_ < 0) return ConnectionError(kFlowControlError, "DATA beyond the connection window");
  receive_consumed_ += static_cast<int64_t>(length);
  Replenish(0, &receive_window_, &receive_consumed_,
            std::max(kDefaultWindowBytes, Clamp(options_.connection_window_bytes)));
  Stream* stream = Find(id);
  if (stream == nullptr) {
    if (id > last_stream_id_) return ConnectionError(kProtocolError, "DATA on a stream never opened");
    return;  // closed (reset, or answered before the request ended): dropped
  }
  if (stream->remote_ended) return StreamError(id, kStreamClosed);
  stream->receive_window -= static_cast<int64_t>(length);
  if (stream->receive_window < 0) return StreamError(id, kFlowControlError);
  const bool end = (flags & frame::kEndStream) != 0;
  if (!end) {
    stream->receive_consumed += static_cast<int64_t>(length);
    Replenish(id, &stream->receive_window, &stream->receive_consumed,
              std::max(kDefaultWindowBytes, Clamp(options_.stream_window_bytes)));
  }
  AppendBody(*stream, content.data, content.size);
  if (end) {
    stream->remote_ended = true;
    OnRequestEnded(*stream);
  }
}

void Session::AppendBody(Stream& stream, const uint8_t* data, size_t size) {
  stream.body_received += size;
  if (stream.request.body_too_large || stream.delivered || size == 0) return;
  if (stream.request.body.size() + size > options_.max_request_body_bytes ||
      buffered_request_bytes_ + size > options_.max_buffered_request_bytes) {
    // Delivered at once, empty, so the handler refuses it without waiting for the rest.
    stream.request.body_too_large = true;
    buffered_request_bytes_ -= stream.request.body.size();
    std::string().swap(stream.request.body);
    ready_.push_back(stream.id);
    return;
  }
  stream.request.body.append(reinterpret_cast<const char*>(data), size);
  buffered_request_bytes_ += size;
}

void Session::OnRequestEnded(Stream& stream) {
  if (stream.request.body_too_large) return;  // already queued for delivery
  if (stream.content_length >= 0 && static_cast<size_t>(stream.content_length) != stream.body_received) {
    return StreamError(stream.id, kProtocolError);  // the body contradicts content-length
  }
  ready_.push_back(stream.id);
}

void Session::OnHeaders(int32_t id, uint8_t flags, const uint8_t* payload, size_t length) {
  if (id == 0) return ConnectionError(kProtocolError, "HEADERS on stream 0");
  const frame::Content content = frame::StripPadding(frame::kHeaders, flags, payload, length);
  switch (content.problem) {
    case frame::Content::kNone:
      break;
    case frame::Content::kNoPadLength:
      return ConnectionError(kFrameSizeError, "padded HEADERS without a pad length");
    case frame::Content::kShortPriority:
      return ConnectionError(kFrameSizeError, "HEADERS too short for its priority");
    case frame::Content::kPaddingTooLong:
      return ConnectionError(kProtocolError, "HEADERS padding exceeds the frame");
  }
  block_.assign(reinterpret_cast<const char*>(content.data), content.size);
  block_stream_ = id;
  block_ends_stream_ = (flags & frame::kEndStream) != 0;
  if ((flags & frame::kEndHeaders) != 0) OnHeaderBlock();
}

void Session::OnContinuation(int32_t id, uint8_t flags, const uint8_t* payload, size_t length) {
  if (block_stream_ == 0 || id != block_stream_) {
    return ConnectionError(kProtocolError, "CONTINUATION without a header block to continue");
  }
  if (block_.size() + length > options_.max_header_list_bytes + kHeaderBlockSlack) {
    return ConnectionError(kEnhanceYourCalm, "header block too large");
  }
  block_.append(reinterpret_cast<const char*>(payload), length);
  if ((flags & frame::kEndHeaders) != 0) OnHeaderBlock();
}

void Session::OnHeaderBlock() {
  const int32_t id = block_stream_;
  const bool ends_stream = block_ends_stream_;
  block_stream_ = 0;
  auto decode = [this](hpack::FieldSink& sink) {
    Status status = decoder_.Decode(block_, sink);
    if (!status.ok()) ConnectionError(kCompressionError, status.message());
    return status.ok();
  };
  if (Stream* stream = Find(id); stream != nullptr) {  // trailers
    if (stream->remote_ended) {
      DiscardFields discard;
      if (decode(discard)) StreamError(id, kStreamClosed);
      return;
    }
    RequestFields fields(&stream->request, RequestFields::Block::kTrailers, options_.max_header_list_bytes);
    if (!decode(fields)) return;
    if (!ends_stream || fields.malformed() || fields.too_large()) return StreamError(id, kProtocolError);
    stream->remote_ended = true;
    return OnRequestEnded(*stream);
  }
  if (id <= last_stream_id_) {  // a stream already closed: late trailers after our reset
    DiscardFields discard;
    decode(discard);
    return;
  }
  if (id % 2 == 0) return ConnectionError(kProtocolError, "a client stream id must be odd");
  last_stream_id_ = id;
  auto stream = std::make_unique<Stream>();
  stream->id = id;
  stream->request.peer = peer_;
  stream->request.headers.reserve(8);  // a gRPC client sends about 5: one allocation, not four
  RequestFields fields(&stream->request, RequestFields::Block::kRequest, options_.max_header_list_bytes);
  if (!decode(fields)) return;
  if (goaway_sent_ || streams_.size() >= options_.max_concurrent_streams) return StreamError(id, kRefusedStream);
  if (fields.too_large()) return StreamError(id, kInternalError);
  if (fields.malformed()) return StreamError(id, kProtocolError);
  stream->content_length = fields.content_length();
  stream->receive_window = std::max(kDefaultWindowBytes, Clamp(options_.stream_window_bytes));
  stream->send_window = peer_initial_window_;
  Stream& opened = *stream;
  streams_.emplace(id, std::move(stream));
  if (ends_stream) {
    opened.remote_ended = true;
    OnRequestEnded(opened);
  }
}

void Session::Replenish(int32_t id, int64_t* window, int64_t* consumed, int64_t full) {
  if (*consumed < full / 2) return;
  frame::AppendWindowUpdate(id, static_cast<uint32_t>(*consumed), &control_);
  *window += *consumed;
  *consumed = 0;
}

bool Session::OweFrame() {
  if (++owed_frames_ <= kMaxOwedFrames) return true;
  ConnectionError(kEnhanceYourCalm, "too many frames owed to a peer that does not read");
  return false;
}

void Session::ConnectionError(uint32_t code, std::string message) {
  if (failed_) return;
  failed_ = true;
  block_stream_ = 0;
  frame::AppendGoaway(last_stream_id_, code, message, &control_);
  error_ = std::move(message);
}

void Session::StreamError(int32_t id, uint32_t code) {
  if (!OweFrame()) return;
  frame::AppendRstStream(id, code, &control_);
  CloseStream(id);
}

void Session::CloseStream(int32_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  if (!it->second->delivered) buffered_request_bytes_ -= it->second->request.body.size();
  streams_.erase(it);
  closed_.push_back(id);
}

void Session::EndedLocally(Stream& stream, std::string* wire) {
  const int32_t id = stream.id;
  // Answered before the request ended (e.g. refused as too large): tell the client to stop
  // sending (RFC 9113 8.1) instead of reading the rest of its body.
  if (!stream.remote_ended) frame::AppendRstStream(id, kNoError, wire);
  CloseStream(id);
}

void Session::WriteHeaders(int32_t id, int status, const Headers& headers, bool end_stream, std::string* wire) {
  encoded_.clear();
  encoder_.BeginBlock(&encoded_);
  if (status != 0) {
    char digits[12];
    auto [end, error] = std::to_chars(digits, digits + sizeof(digits), status);
    encoder_.Add(":status", std::string_view(digits, static_cast<size_t>(end - digits)), &encoded_);
  }
  for (const auto& [name, value] : headers) encoder_.Add(name, value, &encoded_);
  size_t at = 0;
  bool first = true;
  do {
    const size_t n = std::min(encoded_.size() - at, peer_max_frame_bytes_);
    const bool last = at + n == encoded_.size();
    const uint8_t flags = (last ? frame::kEndHeaders : 0) | (first && end_stream ? frame::kEndStream : 0);
    frame::AppendHeader(static_cast<uint32_t>(n), first ? frame::kHeaders : frame::kContinuation, flags, id, wire);
    wire->append(encoded_, at, n);
    at += n;
    first = false;
  } while (at < encoded_.size());
}

Session::Progress Session::WriteData(Stream& stream, std::string* out, size_t limit) {
  for (;;) {
    const size_t available = stream.out.size() - stream.out_offset;
    if (available == 0) {
      if (!stream.response_ended) return Progress::kIdle;
      if (!stream.trailers.empty()) {
        WriteHeaders(stream.id, 0, stream.trailers, true, out);
      } else {
        frame::AppendHeader(0, frame::kData, frame::kEndStream, stream.id, out);
      }
      return Progress::kEnded;
    }
    if (out->size() >= limit) return Progress::kFull;
    const int64_t window = std::min(send_window_, stream.send_window);
    if (window <= 0) return Progress::kBlocked;
    const size_t n = std::min({available, peer_max_frame_bytes_, static_cast<size_t>(window)});
    const bool last = n == available && stream.response_ended && stream.trailers.empty();
    frame::AppendHeader(static_cast<uint32_t>(n), frame::kData, last ? frame::kEndStream : 0, stream.id, out);
    out->append(stream.out, stream.out_offset, n);
    stream.out_offset += n;
    send_window_ -= static_cast<int64_t>(n);
    stream.send_window -= static_cast<int64_t>(n);
    if (stream.out_offset == stream.out.size()) {
      stream.out.clear();
      stream.out_offset = 0;
    }
    if (last) return Progress::kEnded;
  }
}

Status Session::Produce(std::string* out, size_t limit) {
  out->append(control_);
  control_.clear();
  owed_frames_ = 0;
  // Streams waiting for window go to the back; the loop ends when only they are left.
  size_t blocked = 0;
  while (!failed_ && sending_.size() > blocked && out->size() < limit) {
    const int32_t id = sending_.front();
    sending_.pop_front();
    Stream* stream = Find(id);
    if (stream == nullptr) continue;
    switch (WriteData(*stream, out, limit)) {
      case Progress::kEnded:
        stream->queued = false;
        EndedLocally(*stream, out);
        break;
      case Progress::kIdle:
        stream->queued = false;  // Send() queues it again
        break;
      case Progress::kBlocked:
        sending_.push_back(id);
        ++blocked;
        break;
      case Progress::kFull:
        sending_.push_front(id);
        break;
    }
  }
  DeliverEvents();
  return Status::Ok();
}

bool Session::alive() const { return !failed_ && !((goaway_sent_ || goaway_received_) && streams_.empty()); }

void Session::DeliverEvents() {
  if (delivering_) return;  // an outer call delivers what a nested Send() queued
  delivering_ = true;
  // Index loops: the delegate's Send()/Reset() may append while we deliver.
  for (size_t i = 0; i < ready_.size(); ++i) {
    Stream* stream = Find(ready_[i]);
    if (stream == nullptr || stream->delivered) continue;
    stream->delivered = true;
    buffered_request_bytes_ -= stream->request.body.size();
    delegate_->OnRequest(stream->id, std::move(stream->request));
  }
  ready_.clear();
  for (size_t i = 0; i < closed_.size(); ++i) delegate_->OnStreamClosed(closed_[i]);
  closed_.clear();
  delivering_ = false;
}

void Session::Send(int32_t stream_id, ResponsePart part) {
  Stream* stream = Find(stream_id);
  if (stream == nullptr || stream->response_ended || failed_) return;
  if (!stream->response_started && part.status == 0) part.status = 200;
  if (stream->out.empty()) {
    stream->out = std::move(part.data);
    stream->out_offset = 0;
  } else {
    stream->out.append(part.data);
  }
  if (part.end) {
    stream->response_ended = true;
    stream->trailers = std::move(part.trailers);
  }
  if (!stream->response_started) {
    stream->response_started = true;
    // gRPC's trailers-only answer and bodiless responses: one HEADERS frame ends the stream.
    const bool headers_only = stream->response_ended && stream->out.empty() && stream->trailers.empty();
    WriteHeaders(stream_id, part.status, part.headers, headers_only, &control_);
    if (headers_only) return EndedLocally(*stream, &control_);
  }
  if (!stream->queued && (stream->out.size() > stream->out_offset || stream->response_ended)) {
    stream->queued = true;
    sending_.push_back(stream_id);
  }
}

bool Session::output_blocked() const {
  return std::any_of(streams_.begin(), streams_.end(),
                     [](const auto& entry) { return entry.second->out.size() > entry.second->out_offset; });
}

void Session::Reset(int32_t stream_id, uint32_t error_code) {
  if (Find(stream_id) == nullptr || failed_) return;
  frame::AppendRstStream(stream_id, error_code, &control_);  // ours: not owed to the peer
  CloseStream(stream_id);
}

void Session::Goaway() {
  if (goaway_sent_ || failed_) return;
  goaway_sent_ = true;
  frame::AppendGoaway(last_stream_id_, kNoError, {}, &control_);
}

}  // namespace mf::http2
