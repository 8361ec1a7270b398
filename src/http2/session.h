// One HTTP/2 server connection's protocol state on nghttp2's session API, with no I/O: bytes
// go in through Receive(), frames to send come out of Produce(), complete requests and closed
// streams come out through the Delegate. The socket side (src/http2/server.cc) and the fuzzer
// (tests/fuzz/http2) drive the same code.
//
// Not thread-safe: one thread (the connection's io thread) calls everything. The Delegate is
// never called from inside an nghttp2 callback, so it may call Send()/Reset() re-entrantly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "http2/message.h"

struct nghttp2_session;

namespace mf::http2 {

struct SessionOptions {
  uint32_t max_concurrent_streams = 1000;
  // SETTINGS_INITIAL_WINDOW_SIZE per stream, and the connection window: a client may send this
  // much before waiting for a WINDOW_UPDATE. Large, so multi-MiB tensors are not throttled to
  // one round trip per 64 KiB (HTTP/2's default).
  uint32_t stream_window_bytes = 16u << 20;
  uint32_t connection_window_bytes = 64u << 20;
  size_t max_request_body_bytes = 64u << 20;
  // Request bodies of one connection still being received, all streams together: past this,
  // the stream that crosses it is refused like an oversized one (Request::body_too_large), so
  // many concurrent large uploads cannot pile up unbounded memory.
  size_t max_buffered_request_bytes = 256u << 20;
  // Sum of the header names and values of one request (or its trailers); larger: RST_STREAM.
  size_t max_header_list_bytes = 64u << 10;
};

class Session {
 public:
  class Delegate {
   public:
    virtual ~Delegate() = default;
    // A complete request (or one whose body crossed the size limit: Request::body_too_large).
    virtual void OnRequest(int32_t stream_id, Request request) = 0;
    // The stream is gone (answered, reset by either side, or the connection is closing); a
    // later Send() for it is ignored.
    virtual void OnStreamClosed(int32_t stream_id) = 0;
  };

  Session(const SessionOptions& options, std::string peer, Delegate* delegate);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Feeds bytes read from the peer. An error means the connection is broken (bad preface,
  // protocol violation nghttp2 could not answer with GOAWAY alone): Produce() what is left (a
  // GOAWAY) and close.
  Status Receive(const uint8_t* data, size_t size);
  // Appends frames to send to `out` until nothing is left or `out` holds `limit` bytes.
  Status Produce(std::string* out, size_t limit);
  // False once the connection is done: a GOAWAY went either way and no stream is left, or a
  // fatal error. Then close after writing what Produce() gave.
  bool alive() const;

  // Applies one step of the response on `stream_id`; ignored when the stream is gone.
  void Send(int32_t stream_id, ResponsePart part);
  // RST_STREAM with `error_code` (an HTTP/2 error code); ignored when the stream is gone.
  void Reset(int32_t stream_id, uint32_t error_code);
  // Graceful shutdown: GOAWAY naming the last stream this session saw; those streams finish.
  void Goaway();

  size_t open_streams() const { return streams_.size(); }
  // True while some stream has response body that the peer's flow-control window keeps queued
  // here (a client that stops reading and never opens its window again).
  bool output_blocked() const;

 private:
  struct Stream;
  struct Callbacks;

  Stream* Find(int32_t stream_id);
  void SubmitResponse(Stream& stream, const ResponsePart& part);
  void DeliverEvents();

  SessionOptions options_;
  std::string peer_;
  Delegate* delegate_;
  nghttp2_session* session_ = nullptr;
  std::unordered_map<int32_t, std::unique_ptr<Stream>> streams_;
  // Collected inside nghttp2 callbacks, delivered to the delegate once nghttp2 returned.
  std::vector<int32_t> ready_;
  std::vector<int32_t> closed_;
  size_t buffered_request_bytes_ = 0;  // bodies of streams not yet delivered
  bool delivering_ = false;
  bool failed_ = false;
};

}  // namespace mf::http2
