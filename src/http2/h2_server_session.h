// One HTTP/2 server connection's protocol state (RFC 9113, HPACK in hpack.h), with no I/O:
// bytes go in through Receive(), frames to send come out of Produce(), complete requests and
// closed streams come out through the Delegate. The socket side (src/http2/server.cc) and the
// fuzzer (tests/fuzz/http2) drive the same code.
//
// Written here rather than on nghttp2 (which the tests and benchmarks still use as the client):
// a server that only answers requests needs a small part of HTTP/2, and nghttp2's general
// session cost about 3 µs of a 20 µs gRPC call (docs/benchmarks.md).
//
// Not thread-safe: one thread (the connection's io thread) calls everything. The Delegate is
// called only once a whole read was parsed, so it may call Send()/Reset()/Produce()
// re-entrantly.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "http2/frame.h"
#include "http2/hpack.h"
#include "http2/message.h"

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

  // Feeds bytes read from the peer. An error means the connection is broken (bad preface, or a
  // protocol violation answered with GOAWAY): Produce() what is left (the GOAWAY) and close.
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

  void ParseFrames(const uint8_t* data, size_t size, size_t* consumed);
  void OnFrame(const uint8_t* header, const uint8_t* payload, size_t length);
  void OnData(int32_t id, uint8_t flags, const uint8_t* payload, size_t length);
  void OnHeaders(int32_t id, uint8_t flags, const uint8_t* payload, size_t length);
  void OnContinuation(int32_t id, uint8_t flags, const uint8_t* payload, size_t length);
  void OnHeaderBlock();
  void OnSettings(uint8_t flags, const uint8_t* payload, size_t length);
  void OnWindowUpdate(int32_t id, const uint8_t* payload, size_t length);
  void OnRstStream(int32_t id, const uint8_t* payload, size_t length);
  void OnRequestEnded(Stream& stream);
  void AppendBody(Stream& stream, const uint8_t* data, size_t size);

  void ConnectionError(uint32_t code, std::string message);
  void StreamError(int32_t id, uint32_t code);
  Stream* Find(int32_t stream_id);
  void CloseStream(int32_t id);
  // Our END_STREAM for `stream` is in `wire`: closes it, after a RST_STREAM(NO_ERROR) when the
  // client had not finished its request (RFC 9113 8.1).
  void EndedLocally(Stream& stream, std::string* wire);
  void WriteHeaders(int32_t id, int status, const Headers& headers, bool end_stream, std::string* wire);
  enum class Progress { kEnded, kIdle, kBlocked, kFull };
  // Appends what the windows allow of `stream`'s response body to `out`, then its end.
  Progress WriteData(Stream& stream, std::string* out, size_t limit);
  // A WINDOW_UPDATE once half of a `full` window was consumed.
  void Replenish(int32_t id, int64_t* window, int64_t* consumed, int64_t full);
  // Frames the peer made us owe it (ACKs, resets) are bounded: a peer that sends PINGs but
  // never reads must not grow control_ without end.
  bool OweFrame();
  void DeliverEvents();

  SessionOptions options_;
  std::string peer_;
  Delegate* delegate_;
  hpack::Decoder decoder_;
  hpack::Encoder encoder_;
  std::unordered_map<int32_t, std::unique_ptr<Stream>> streams_;
  // Streams with response body or an end still to write, in the order they asked.
  std::deque<int32_t> sending_;
  std::string input_;        // the unparsed tail of earlier reads (part of a frame)
  std::string control_;      // frames to send before any further DATA, in order
  std::string block_;        // a header block being received (HEADERS + CONTINUATION)
  std::string encoded_;      // scratch: a header block being sent
  size_t preface_seen_ = 0;  // bytes of the client preface checked so far
  bool settings_seen_ = false;
  int32_t block_stream_ = 0;  // stream of block_; 0 when none is open
  bool block_ends_stream_ = false;
  int32_t last_stream_id_ = 0;  // highest stream the client opened
  // Flow control. Receiving: what the client may still send, and what was consumed since the
  // last WINDOW_UPDATE. Sending: what the client lets us send.
  int64_t receive_window_ = kDefaultWindowBytes;
  int64_t receive_consumed_ = 0;
  int64_t send_window_ = kDefaultWindowBytes;
  int64_t peer_initial_window_ = kDefaultWindowBytes;
  size_t peer_max_frame_bytes_ = kDefaultMaxFrameBytes;
  // Collected while parsing, delivered to the delegate once the whole read is parsed.
  std::vector<int32_t> ready_;
  std::vector<int32_t> closed_;
  size_t buffered_request_bytes_ = 0;  // bodies of streams not yet delivered
  bool delivering_ = false;
  bool goaway_sent_ = false;
  bool goaway_received_ = false;
  bool failed_ = false;
  std::string error_;       // why the connection failed
  size_t owed_frames_ = 0;  // ACKs and resets queued since the last Produce()
  // Streams the client reset while open, as a token bucket: a client that opens and resets
  // streams faster than this makes the server start work it never sees answered (the "rapid
  // reset" attack, CVE-2023-44487), so it gets GOAWAY. nghttp2's defaults: 1000, then 33/s.
  double reset_tokens_ = 0;  // set to the burst by the constructor
  std::chrono::steady_clock::time_point reset_refilled_;
};

}  // namespace mf::http2
