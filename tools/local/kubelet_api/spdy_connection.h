// The server side of one SPDY/3.1 connection (after the HTTP 101 upgrade) over TLS, as the kubelet
// serves exec and port-forward: the client (kube-apiserver, client-go) opens every stream; this
// side replies, sends data and ends or resets streams. A Handler (the exec or port-forward
// session) gets the streams' events.
//
// Flow control is what moby/spdystream, the peer, actually does rather than SPDY/3.1's windows: it
// ignores WINDOW_UPDATE and never sends one, so waiting for window credit would stall every
// stream after 64 KiB. Memory stays bounded instead by backpressure on the TLS socket:
//  - inbound: bytes handed to the handler count against max_inbound_buffered until it calls
//    Consumed(); above that the connection stops reading the socket;
//  - outbound: Write() calls back once the frame is on the wire, and producers read their next
//    chunk only then; control frames (PING replies) stop the reading too once max_outbound_queued
//    bytes are waiting, so a peer that does not read cannot make us buffer.
// A connection with no frame in either direction for idle_timeout is closed (the apiserver pings
// every 5 s, so only a vanished peer hits it).
//
// Everything here runs on the TLS stream's strand, and every method must be called there.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tools/local/kubelet_api/spdy_frame.h"
#include "tools/local/kubelet_api/tls_stream.h"

namespace mf::local {

struct SpdyConnectionOptions {
  size_t max_streams = 512;                                        // open streams; more are refused
  size_t max_inbound_buffered = 4 * 1024 * 1024;                   // handed to the handler, not yet Consumed()
  size_t max_outbound_queued = 1024 * 1024;                        // frames waiting for the socket
  std::chrono::milliseconds idle_timeout = std::chrono::hours(4);  // the kubelet's default
  // After Finish(): how long to wait for the client to close the connection.
  std::chrono::milliseconds finish_timeout = std::chrono::minutes(15);
};

class SpdyConnection : public std::enable_shared_from_this<SpdyConnection> {
 public:
  class Handler {
   public:
    virtual ~Handler() = default;
    // A new stream from the client: answer with Reply() or Refuse(), now or later.
    virtual void OnStreamOpened(uint32_t stream_id, const spdy::Headers& headers, bool fin) = 0;
    // Bytes on an open stream (empty with only `fin`). Call Consumed(data.size()) once they are
    // passed on or dropped.
    virtual void OnData(uint32_t stream_id, std::string data, bool fin) = 0;
    // The client reset the stream; it is gone.
    virtual void OnStreamReset(uint32_t stream_id) = 0;
    // The connection is closed; nothing else will be called. Release everything.
    virtual void OnConnectionClosed() = 0;
  };

  // `already_read`: bytes that arrived after the upgrade request, before the 101 was written.
  SpdyConnection(std::unique_ptr<TlsStream> stream, std::string already_read, SpdyConnectionOptions options);
  ~SpdyConnection();

  void Start(std::shared_ptr<Handler> handler);

  void Reply(uint32_t stream_id);
  void Refuse(uint32_t stream_id);  // RST_STREAM REFUSED_STREAM
  void Reset(uint32_t stream_id);   // RST_STREAM CANCEL
  // Queues a DATA frame; `written(true)` runs once it is on the wire, `written(false)` when it never
  // will be (stream or connection gone). `fin` ends this side of the stream.
  void Write(uint32_t stream_id, std::string data, bool fin, std::function<void(bool)> written = {});
  void Consumed(size_t bytes);
  // The session is over: once everything queued is written, wait (up to finish_timeout) for the
  // client to close. Closing first could lose output: data the client sends (pings) to a closed
  // socket makes the kernel reset the connection and drop what it had not delivered yet.
  void Finish();
  // Closes the connection now.
  void Close();

  bool closed() const { return closed_; }
  const boost::asio::any_io_executor& executor() const { return executor_; }

 private:
  struct StreamState {
    bool remote_fin = false;
    bool local_fin = false;
  };
  struct Outgoing {
    std::string bytes;
    std::function<void(bool)> written;
  };

  void ReadMore();
  void OnBytes(std::string_view bytes);
  void Dispatch(spdy::Frame& frame);
  void Enqueue(std::string bytes, std::function<void(bool)> written = {});
  void WriteMore();
  void EraseIfDone(uint32_t stream_id);
  bool ReadingPaused() const;
  void ScheduleIdleCheck();
  void FailCallbacks(std::vector<Outgoing> batch);

  std::unique_ptr<TlsStream> stream_;
  boost::asio::any_io_executor executor_;
  std::string pending_input_;
  SpdyConnectionOptions options_;
  std::shared_ptr<Handler> handler_;
  spdy::FrameReader reader_;
  spdy::FrameWriter writer_;
  std::map<uint32_t, StreamState> streams_;
  uint32_t last_client_stream_ = 0;
  std::vector<char> read_buffer_;
  std::deque<Outgoing> queue_;
  std::vector<Outgoing> in_flight_;
  size_t queued_bytes_ = 0;
  size_t inbound_buffered_ = 0;
  bool reading_ = false;
  bool writing_ = false;
  bool closed_ = false;
  bool finishing_ = false;
  bool goaway_received_ = false;
  bool close_after_writes_ = false;
  std::chrono::steady_clock::time_point last_activity_;
  boost::asio::steady_timer idle_timer_;
  boost::asio::steady_timer finish_timer_;
};

}  // namespace mf::local
