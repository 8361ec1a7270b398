#include "http2/session.h"

#include <nghttp2/nghttp2.h>

#include <boost/container/small_vector.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace mf::http2 {

struct Session::Stream {
  int32_t id = 0;
  Request request;
  size_t header_bytes = 0;
  bool request_complete = false;  // END_STREAM received (or the body limit was crossed)
  bool delivered = false;
  // Response side. `out` from `out_offset` on is body not yet handed to nghttp2.
  bool response_started = false;
  bool response_ended = false;  // `end` was sent: nothing more may be queued
  bool data_deferred = false;   // the data provider said DEFERRED and waits for resume
  std::string out;
  size_t out_offset = 0;
  Headers trailers;
};

namespace {

// Header lists handed to nghttp2 (which copies them): on the stack for the usual few headers.
using NvList = boost::container::small_vector<nghttp2_nv, 8>;

nghttp2_nv Nv(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(), NGHTTP2_NV_FLAG_NONE};
}

void AppendNv(const Headers& headers, NvList* nv) {
  for (const auto& [name, value] : headers) nv->push_back(Nv(name, value));
}

}  // namespace

// nghttp2's C callbacks; each finds the Session through user_data and never throws.
struct Session::Callbacks {
  static Session* Self(void* user_data) { return static_cast<Session*>(user_data); }

  static int OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    Session* self = Self(user_data);
    auto stream = std::make_unique<Stream>();
    stream->id = frame->hd.stream_id;
    stream->request.peer = self->peer_;
    stream->request.headers.reserve(8);  // a gRPC client sends about 5: one allocation, not four
    nghttp2_session_set_stream_user_data(session, stream->id, stream.get());
    self->streams_[stream->id] = std::move(stream);
    return 0;
  }

  static int OnHeader(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    Stream* stream = Self(user_data)->Find(frame->hd.stream_id);
    if (stream == nullptr) return 0;
    stream->header_bytes += namelen + valuelen;
    // Resets just this stream (RST_STREAM INTERNAL_ERROR); the connection lives on.
    if (stream->header_bytes > Self(user_data)->options_.max_header_list_bytes) {
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    std::string_view key(reinterpret_cast<const char*>(name), namelen);
    std::string val(reinterpret_cast<const char*>(value), valuelen);
    Request& r = stream->request;
    if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      // nghttp2 already checked the pseudo-headers (present once, before regular headers).
      if (key == ":method") {
        r.method = std::move(val);
      } else if (key == ":path") {
        r.path = std::move(val);
      } else if (key == ":authority") {
        r.authority = std::move(val);
      } else if (key == ":scheme") {
        r.scheme = std::move(val);
      } else if (!key.empty() && key[0] != ':') {
        r.headers.emplace_back(std::string(key), std::move(val));
      }
    } else {
      r.trailers.emplace_back(std::string(key), std::move(val));
    }
    return 0;
  }

  static int OnDataChunk(nghttp2_session*, uint8_t, int32_t stream_id, const uint8_t* data, size_t len,
                         void* user_data) {
    Session* self = Self(user_data);
    Stream* stream = self->Find(stream_id);
    if (stream == nullptr || stream->request.body_too_large || stream->delivered) return 0;
    if (stream->request.body.size() + len > self->options_.max_request_body_bytes ||
        self->buffered_request_bytes_ + len > self->options_.max_buffered_request_bytes) {
      stream->request.body_too_large = true;
      self->buffered_request_bytes_ -= stream->request.body.size();
      std::string().swap(stream->request.body);
      if (!stream->request_complete) {
        stream->request_complete = true;
        self->ready_.push_back(stream_id);
      }
      return 0;
    }
    stream->request.body.append(reinterpret_cast<const char*>(data), len);
    self->buffered_request_bytes_ += len;
    return 0;
  }

  static int OnFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user_data) {
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) return 0;
    Session* self = Self(user_data);
    Stream* stream = self->Find(frame->hd.stream_id);
    if (stream == nullptr || stream->request_complete) return 0;
    stream->request_complete = true;
    self->ready_.push_back(stream->id);
    return 0;
  }

  static int OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* user_data) {
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) {
      return 0;
    }
    Stream* stream = Self(user_data)->Find(frame->hd.stream_id);
    // Answered before the request ended (e.g. refused as too large): tell the client to stop
    // sending (RFC 9113 8.1) instead of reading the rest of its body.
    if (stream != nullptr && nghttp2_session_get_stream_remote_close(session, stream->id) == 0) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream->id, NGHTTP2_NO_ERROR);
    }
    return 0;
  }

  static int OnStreamClose(nghttp2_session*, int32_t stream_id, uint32_t, void* user_data) {
    Session* self = Self(user_data);
    auto it = self->streams_.find(stream_id);
    if (it == self->streams_.end()) return 0;
    if (!it->second->delivered) self->buffered_request_bytes_ -= it->second->request.body.size();
    self->streams_.erase(it);
    self->closed_.push_back(stream_id);
    return 0;
  }

  static ssize_t ReadBody(nghttp2_session* session, int32_t stream_id, uint8_t* buf, size_t length,
                          uint32_t* data_flags, nghttp2_data_source* source, void*) {
    auto* stream = static_cast<Stream*>(source->ptr);
    size_t available = stream->out.size() - stream->out_offset;
    size_t n = std::min(length, available);
    if (n > 0) {
      std::memcpy(buf, stream->out.data() + stream->out_offset, n);
      stream->out_offset += n;
      if (stream->out_offset == stream->out.size()) {
        stream->out.clear();
        stream->out_offset = 0;
      }
    }
    if (stream->out.empty()) {
      if (!stream->response_ended) {
        if (n > 0) return static_cast<ssize_t>(n);
        stream->data_deferred = true;
        return NGHTTP2_ERR_DEFERRED;
      }
      *data_flags |= NGHTTP2_DATA_FLAG_EOF;
      if (!stream->trailers.empty()) {
        // Trailers end the stream instead of this DATA frame.
        NvList nv;
        AppendNv(stream->trailers, &nv);
        if (nghttp2_submit_trailer(session, stream_id, nv.data(), nv.size()) == 0) {
          *data_flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        }
      }
    }
    return static_cast<ssize_t>(n);
  }
};

Session::Session(const SessionOptions& options, std::string peer, Delegate* delegate)
    : options_(options), peer_(std::move(peer)), delegate_(delegate) {
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, &Callbacks::OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &Callbacks::OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &Callbacks::OnDataChunk);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &Callbacks::OnFrameRecv);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, &Callbacks::OnFrameSend);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &Callbacks::OnStreamClose);
  // nghttp2 itself refuses streams beyond SETTINGS_MAX_CONCURRENT_STREAMS, answers PINGs and
  // SETTINGS, and checks HTTP messaging rules (pseudo-headers, content-length).
  nghttp2_session_server_new(&session_, callbacks, this);
  nghttp2_session_callbacks_del(callbacks);
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, options_.stream_window_bytes},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(options_.max_header_list_bytes)},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  // The connection window is not a setting: raise it with a WINDOW_UPDATE on stream 0.
  nghttp2_session_set_local_window_size(
      session_, NGHTTP2_FLAG_NONE, 0,
      static_cast<int32_t>(std::min<uint32_t>(options_.connection_window_bytes, NGHTTP2_MAX_WINDOW_SIZE)));
}

Session::~Session() { nghttp2_session_del(session_); }

Session::Stream* Session::Find(int32_t stream_id) {
  auto it = streams_.find(stream_id);
  return it == streams_.end() ? nullptr : it->second.get();
}

Status Session::Receive(const uint8_t* data, size_t size) {
  if (failed_) return Unavailable("the HTTP/2 session already failed");
  ssize_t consumed = nghttp2_session_mem_recv(session_, data, size);
  Status status = Status::Ok();
  if (consumed < 0) {
    failed_ = true;
    status = InvalidArgument(std::string("HTTP/2 protocol error: ") + nghttp2_strerror(static_cast<int>(consumed)));
  }
  DeliverEvents();
  return status;
}

Status Session::Produce(std::string* out, size_t limit) {
  while (out->size() < limit) {
    const uint8_t* bytes = nullptr;
    ssize_t n = nghttp2_session_mem_send(session_, &bytes);
    if (n < 0) {
      failed_ = true;
      DeliverEvents();
      return Internal(std::string("HTTP/2 send error: ") + nghttp2_strerror(static_cast<int>(n)));
    }
    if (n == 0) break;
    out->append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(n));
  }
  DeliverEvents();
  return Status::Ok();
}

bool Session::alive() const {
  return !failed_ && (nghttp2_session_want_read(session_) != 0 || nghttp2_session_want_write(session_) != 0);
}

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

void Session::SubmitResponse(Stream& stream, const ResponsePart& part) {
  const std::string status = std::to_string(part.status);
  NvList nv{Nv(":status", status)};
  AppendNv(part.headers, &nv);
  stream.response_started = true;
  if (part.end && part.data.empty() && part.trailers.empty()) {
    nghttp2_submit_response(session_, stream.id, nv.data(), nv.size(), nullptr);
    return;
  }
  nghttp2_data_provider provider;
  provider.source.ptr = &stream;
  provider.read_callback = &Callbacks::ReadBody;
  nghttp2_submit_response(session_, stream.id, nv.data(), nv.size(), &provider);
}

void Session::Send(int32_t stream_id, ResponsePart part) {
  Stream* stream = Find(stream_id);
  if (stream == nullptr || stream->response_ended) return;
  if (!stream->response_started && part.status == 0) part.status = 200;
  // Queue the body before submitting: a headers+body part must not look headers-only.
  if (stream->out.empty()) {
    stream->out = std::move(part.data);
    stream->out_offset = 0;
  } else {
    stream->out.append(part.data);
  }
  part.data.clear();
  if (part.end) {
    stream->response_ended = true;
    stream->trailers = std::move(part.trailers);
    part.trailers.clear();
  }
  if (!stream->response_started) {
    ResponsePart head = std::move(part);
    // SubmitResponse decides headers-only from the part: describe what is queued.
    bool body_follows = !stream->out.empty() || !stream->trailers.empty() || !stream->response_ended;
    if (body_follows) head.end = false;
    SubmitResponse(*stream, head);
  } else if (stream->data_deferred) {
    stream->data_deferred = false;
    nghttp2_session_resume_data(session_, stream_id);
  }
}

bool Session::output_blocked() const {
  return std::any_of(streams_.begin(), streams_.end(),
                     [](const auto& entry) { return entry.second->out.size() > entry.second->out_offset; });
}

void Session::Reset(int32_t stream_id, uint32_t error_code) {
  if (Find(stream_id) == nullptr) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_id, error_code);
}

void Session::Goaway() {
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_),
                        NGHTTP2_NO_ERROR, nullptr, 0);
}

}  // namespace mf::http2
