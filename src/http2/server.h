// An HTTP/2 server (h2c with prior knowledge, what gRPC clients speak on plaintext ports) on
// Boost.Asio and our HTTP/2 session (h2_server_session.h). Like src/http's server: one io_context per io thread,
// each connection pinned to one of them, so a connection's state is touched by one thread and
// the hot path takes no lock. Requests reach the handler complete (headers, body, trailers);
// the answer goes through a ResponseStream, from any thread, now or later, in one part or many
// (server streaming).
//
//   mf::http2::Server server({.port = 0}, [](mf::http2::Request request,
//                                             std::shared_ptr<mf::http2::ResponseStream> stream) {
//     stream->Send({.status = 200, .data = "hello", .end = true});
//   });
//   MF_RETURN_IF_ERROR(server.Start());
//   ...
//   server.Drain(std::chrono::seconds(10));  // GOAWAY, in-flight streams finish, then close
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "http2/h2_server_session.h"
#include "http2/message.h"

namespace mf::http2 {

// The answering side of one stream. Thread-safe: calls from the connection's io thread apply at
// once, calls from other threads are posted to it. After the stream closed (client reset or
// connection gone) every call is a no-op. Dropping the last reference to a stream that was
// never ended resets it (RST_STREAM INTERNAL_ERROR), so a lost request never hangs its client.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  virtual void Send(ResponsePart part) = 0;
  virtual void Reset(uint32_t error_code) = 0;
  // True once the stream closed, for any reason (answered, reset by the client, connection lost).
  virtual bool closed() const = 0;
  // Runs `callback` once on the io thread when the stream closes, or at once if it has. Keep
  // it short; it must not block.
  virtual void OnClose(std::function<void()> callback) = 0;
};

// Handlers run on the io thread: answer fast ones inline, hand slow work to another thread.
using Handler = std::function<void(Request request, std::shared_ptr<ResponseStream> stream)>;

struct ServerOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 0;   // 0 picks a free port; see Server::port()
  int io_threads = 0;  // 0: one per hardware thread
  SessionOptions session;
  // A connection must send its preface within this; later, one with no open stream and no
  // traffic for idle_timeout gets a GOAWAY and is closed; a write that makes no progress for
  // write_timeout closes the connection, as does an answer the peer's flow-control window
  // holds back while the peer stays silent for write_timeout.
  std::chrono::milliseconds handshake_timeout{10'000};
  std::chrono::milliseconds idle_timeout{15 * 60'000};
  std::chrono::milliseconds write_timeout{60'000};
};

struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_open = 0;
  uint64_t streams = 0;  // requests delivered to the handler
};

class Server {
 public:
  Server(ServerOptions options, Handler handler);
  ~Server();  // Stop()s
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds (no SO_REUSEPORT: a taken port is an error), listens and starts the io threads.
  Status Start();
  uint16_t port() const;
  // Graceful shutdown: stops accepting, sends every connection a GOAWAY naming the last stream
  // it saw, lets those streams finish, closes each connection once it has none, and after
  // `deadline` closes what is left. True when everything finished in time. Idempotent.
  bool Drain(std::chrono::milliseconds deadline);
  // Immediate shutdown: closes every connection and joins the io threads. Drain() and Stop()
  // join the io threads: call them from another thread, never from a handler.
  void Stop();
  ServerStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mf::http2
