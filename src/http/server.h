// An asynchronous HTTP/1.1 server (Boost.Beast). One io_context per io thread, each connection
// pinned to one of them, so a connection's state is only ever touched by its own thread and the
// hot path takes no lock. Handlers are asynchronous: they get the request and a Responder that
// can be completed inline or later from any thread, or turned into a chunked Stream.
//
//   mf::http::Router router;
//   router.Add("GET", "/healthz", mf::http::Sync([](const mf::http::Request&) {
//     return mf::http::Response::Text(200, "ok\n"); }));
//   mf::http::Server server({.port = 8080}, router.AsHandler());
//   MF_RETURN_IF_ERROR(server.Start());
//   mf::http::WaitForTerminationSignal();
//   server.Drain(std::chrono::seconds(10));
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "http/message.h"

namespace mf::http {

namespace internal {
class Exchange;
}  // namespace internal

// A chunked (Transfer-Encoding: chunked) response body written over time, e.g. a Kubernetes
// watch. Every method is thread-safe. The stream ends when Close() is called, the peer goes
// away, or the server drains; after that Write() returns false.
class Stream {
 public:
  virtual ~Stream() = default;
  // Queues one chunk (empty chunks are skipped). False when the stream has ended.
  virtual bool Write(std::string chunk) = 0;
  // Sends the terminating chunk once everything queued is written, then closes the connection.
  virtual void Close() = 0;
  // True once the stream has ended for any reason.
  virtual bool closed() const = 0;
  // Bytes queued but not yet written to the socket: producers can slow down or drop a slow peer.
  virtual size_t buffered_bytes() const = 0;
  // Runs `callback` once when the stream ends (peer gone, Close(), drain), on an io thread; runs
  // it at once when the stream has already ended. Keep it short; it must not block.
  virtual void OnClose(std::function<void()> callback) = 0;
};

// The one way to answer a request. Copies share the same exchange; the first Respond() or
// StartStream() wins and later calls are ignored. Thread-safe. When the last copy is destroyed
// without an answer the client gets 500 "handler did not respond", so a lost request never hangs.
class Responder {
 public:
  explicit Responder(std::shared_ptr<internal::Exchange> exchange);
  void Respond(Response response);
  // Sends the status line and headers (chunked) now and returns the stream for the body.
  std::shared_ptr<Stream> StartStream(int status, Headers headers = {});
  // True once Respond() or StartStream() has been called on any copy.
  bool answered() const;

 private:
  std::shared_ptr<internal::Exchange> exchange_;
};

// Handlers own the request (move parts of it away freely) and must not block an io thread for
// long: park slow work and answer from another thread.
using Handler = std::function<void(Request request, Responder responder)>;
// Adapts a synchronous function, answered inline on the io thread (fast paths: health, metrics).
Handler Sync(std::function<Response(const Request&)> fn);

// Method + exact path routes, method + path-prefix routes (longest prefix wins), then an optional
// catch-all; otherwise 404 (or 405 when the path exists for another method). An empty method
// matches every method. Configure it before AsHandler(): the handler holds an immutable copy.
class Router {
 public:
  Router& Add(std::string method, std::string path, Handler handler);
  Router& AddPrefix(std::string method, std::string prefix, Handler handler);
  Router& SetCatchAll(Handler handler);
  Handler AsHandler() const;

 private:
  struct Route {
    std::string method;
    std::string path;
    Handler handler;
  };
  std::vector<Route> exact_;
  std::vector<Route> prefix_;
  Handler catch_all_;
};

// Serves the process-wide Prometheus registry (mf::metrics::DefaultRegistry) in text format.
Handler MetricsHandler();

struct ServerOptions {
  std::string address = "0.0.0.0";
  uint16_t port = 0;                                // 0 picks a free port; see Server::port()
  int io_threads = 0;                               // 0: one per hardware thread
  size_t max_header_bytes = 64 * 1024;              // larger: 431
  size_t max_body_bytes = 64 * 1024 * 1024;         // larger (before or after gzip decoding): 413
  std::chrono::milliseconds read_timeout{30'000};   // to receive one whole request: else 408
  std::chrono::milliseconds idle_timeout{75'000};   // keep-alive connection with no request
  std::chrono::milliseconds write_timeout{60'000};  // to write one response (or stream chunk)
  bool decode_request_bodies = true;                // inflate Content-Encoding: gzip / deflate
  std::string server_header = "modelfleet";
  // Added to every response that does not set the same field itself (e.g. CORS headers).
  Headers response_headers;
  // When non-empty, requests are counted in http_requests_total{server,method,code} and
  // http_request_duration_seconds{server} in the default registry under this label.
  std::string metrics_label;
  // HTTPS: the PEM certificate chain (leaf first) and its private key. Both empty: plain HTTP.
  // TLS 1.2 and 1.3 only; the handshake must finish within read_timeout.
  std::string tls_certificate_chain_pem;
  std::string tls_private_key_pem;
};

struct ServerStats {
  uint64_t connections_accepted = 0;
  uint64_t connections_open = 0;
  uint64_t requests = 0;
};

class Server {
 public:
  Server(ServerOptions options, Handler handler);
  ~Server();  // Stop()s
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds, listens and starts the io threads. Errors (address in use, bad address, a TLS
  // certificate or key that does not load or match) are returned.
  Status Start();
  // The bound port (useful with port 0); 0 before Start().
  uint16_t port() const;
  // Graceful shutdown: stops accepting, closes idle connections, answers in-flight requests with
  // "Connection: close", ends streams, and waits up to `deadline` before closing what is left.
  // True when everything finished within the deadline. Idempotent.
  bool Drain(std::chrono::milliseconds deadline);
  // Immediate shutdown: closes every connection and joins the io threads.
  // Drain() and Stop() join the io threads: call them from another thread, never from a handler.
  void Stop();
  ServerStats stats() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Blocks the calling thread until the process gets SIGTERM or SIGINT; returns the signal number.
// Call it from main after Start(), then Drain(). Safe to call from one thread at a time.
int WaitForTerminationSignal();

}  // namespace mf::http
