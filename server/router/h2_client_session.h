// The client side of one HTTP/2 connection (RFC 9113) with no I/O, on src/http2's frame and
// HPACK code: requests go in through Submit(), bytes from the peer through Receive(), frames to
// write come out of Produce(), and each stream's response arrives at its StreamHandler. The
// router's gRPC upstream drives it from one io thread; the tests and the fuzzer drive it with
// bytes. Not thread-safe.
//
// What a proxy to our own servers needs, fully: flow control both ways (large windows so tensors
// are not throttled, sending held back by the peer's windows), SETTINGS, PING, GOAWAY (streams
// above the peer's last id fail as unprocessed), RST_STREAM, CONTINUATION, padding,
// interim (1xx) headers and trailers. No server push (disabled in our SETTINGS), no priorities.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "http2/frame.h"
#include "http2/hpack.h"
#include "http2/message.h"

namespace mf::router {

// Receives one stream's response, in order: OnHeaders once, OnData any number of times, then
// exactly one of OnEnd or OnReset. After OnEnd/OnReset nothing more is called.
class StreamHandler {
 public:
  virtual ~StreamHandler() = default;
  virtual void OnHeaders(int status, http2::Headers headers) = 0;
  virtual void OnData(std::string_view data) = 0;
  virtual void OnEnd(http2::Headers trailers) = 0;
  // The stream failed. `unprocessed`: the peer says it did no work for it (REFUSED_STREAM, or a
  // GOAWAY whose last stream id is below it), so it may be sent again anywhere.
  virtual void OnReset(uint32_t error_code, bool unprocessed, std::string why) = 0;
};

struct H2Request {
  std::string method = "POST";
  std::string scheme = "http";
  std::string authority;
  std::string path;
  http2::Headers headers;  // lowercase names; no pseudo-headers, no connection-specific fields
  std::string body;
};

struct H2ClientOptions {
  uint32_t stream_window_bytes = 16u << 20;
  uint32_t connection_window_bytes = 64u << 20;
  size_t max_response_header_bytes = 64u << 10;
};

class H2ClientSession {
 public:
  explicit H2ClientSession(H2ClientOptions options = {});
  ~H2ClientSession();
  H2ClientSession(const H2ClientSession&) = delete;
  H2ClientSession& operator=(const H2ClientSession&) = delete;

  // Opens a stream for `request`; its frames go out with the next Produce(). 0 when the session
  // takes no new streams (GOAWAY, failed, ids exhausted).
  int32_t Submit(H2Request request, std::shared_ptr<StreamHandler> handler);
  // Abandons a stream (RST_STREAM CANCEL); its handler is dropped without further calls.
  void Cancel(int32_t stream_id);

  // Feeds bytes from the peer; handlers are called from inside. An error means the connection is
  // broken: every open stream has been failed, Produce() what is left (a GOAWAY) and close.
  Status Receive(const uint8_t* data, size_t size);
  // Appends what can be sent now (the preface first) to `out`.
  void Produce(std::string* out);
  // The connection ended (closed, reset, read error): fails every open stream with `why`.
  // `unprocessed` as in StreamHandler::OnReset, for streams not a byte of whose request was sent.
  void Fail(const std::string& why);

  bool accepting() const;  // new streams may be submitted
  size_t open_streams() const { return streams_.size(); }
  uint32_t peer_max_concurrent_streams() const { return peer_max_concurrent_; }

 private:
  struct Stream;

  Status OnFrame(const http2::frame::Header& header, const uint8_t* payload);
  Status OnHeaderBlock(int32_t stream_id, bool end_stream);
  Status OnSettings(uint8_t flags, const uint8_t* payload, size_t length);
  void OnGoaway(const uint8_t* payload, size_t length);
  Status ConnectionError(uint32_t code, std::string message);
  void Finish(int32_t stream_id);  // erases a stream that ended either way
  void ResetStream(int32_t stream_id, uint32_t code, bool unprocessed, const std::string& why, bool send_rst);
  void WriteHeaders(Stream& stream, std::string* out);
  void Replenish(int32_t stream_id, int64_t* consumed, int64_t full);

  H2ClientOptions options_;
  http2::hpack::Encoder encoder_;
  http2::hpack::Decoder decoder_;
  std::map<int32_t, std::unique_ptr<Stream>> streams_;
  std::deque<int32_t> sending_;  // streams with request frames still to write, in order
  std::string control_;          // frames to write before any request frame
  std::string input_;            // an incomplete frame from earlier reads
  std::string block_;            // a header block spread over HEADERS + CONTINUATION
  int32_t block_stream_ = 0;
  bool block_end_stream_ = false;
  bool preface_sent_ = false;
  int32_t next_stream_id_ = 1;
  bool goaway_received_ = false;
  bool failed_ = false;
  int64_t send_window_ = http2::kDefaultWindowBytes;  // connection
  int64_t peer_initial_window_ = http2::kDefaultWindowBytes;
  size_t peer_max_frame_ = http2::kDefaultMaxFrameBytes;
  uint32_t peer_max_concurrent_ = 100;  // until the peer's SETTINGS say
  int64_t receive_consumed_ = 0;        // connection bytes received since our last WINDOW_UPDATE
};

}  // namespace mf::router
