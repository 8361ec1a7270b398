// HTTP/2 connections to upstream gRPC endpoints, multiplexed and shared: each Endpoint's
// ConnectionShelf holds its connections, a stream goes to the first one with room (below the
// peer's SETTINGS_MAX_CONCURRENT_STREAMS and our cap), else a new connection is dialled. Each
// connection lives on one of the pool's io threads and drives an H2ClientSession there; the
// stream's handler is called on that thread.
#pragma once

#include <chrono>
#include <memory>

#include "server/router/endpoint.h"
#include "server/router/h2_client_session.h"

namespace boost::asio {
class io_context;
}

namespace mf::router {

struct GrpcUpstreamOptions {
  int io_threads = 2;
  std::chrono::milliseconds connect_timeout{5'000};
  uint32_t max_streams_per_connection = 100;
  H2ClientOptions session;
};

// One stream in flight. Cancel() from any thread: RST_STREAM upstream, no further handler calls.
class UpstreamStream {
 public:
  virtual ~UpstreamStream() = default;
  virtual void Cancel() = 0;
  // The io_context the stream's handler runs on (for timers that must not race it).
  virtual boost::asio::io_context& context() = 0;
};

class GrpcUpstream {
 public:
  explicit GrpcUpstream(GrpcUpstreamOptions options);
  ~GrpcUpstream();
  GrpcUpstream(const GrpcUpstream&) = delete;
  GrpcUpstream& operator=(const GrpcUpstream&) = delete;

  // Sends `request` on a stream to `endpoint`. A connection that cannot be made fails the stream
  // with OnReset(..., unprocessed = true, "cannot connect to ...").
  std::shared_ptr<UpstreamStream> Start(const std::shared_ptr<Endpoint>& endpoint, H2Request request,
                                        std::shared_ptr<StreamHandler> handler);
  void Stop();

  class Impl;  // grpc_upstream.cc

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mf::router
