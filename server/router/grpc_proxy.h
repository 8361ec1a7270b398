// The gRPC (HTTP/2) side of the router: each stream from a client is routed like a REST request
// (headers are the gRPC metadata), forwarded to a pooled multiplexed HTTP/2 connection of the
// chosen endpoint, and the response relayed as it arrives (server streaming works), with
// `x-modelfleet-version` in the initial metadata. Failures are gRPC statuses: UNAVAILABLE when
// nothing is ready or the upstream failed, DEADLINE_EXCEEDED past the deadline (the client's
// grpc-timeout or --upstream-timeout-ms, whichever is sooner). One retry on another endpoint
// before any response byte, for streams the upstream never processed (connect failure,
// REFUSED_STREAM, GOAWAY) and for inference methods (IsRetrySafeGrpc).
#pragma once

#include <memory>

#include "http2/server.h"
#include "server/router/grpc_upstream.h"
#include "server/router/rest_proxy.h"
#include "server/router/snapshot.h"

namespace mf::router {

class GrpcProxy {
 public:
  GrpcProxy(const SnapshotStore& snapshots, GrpcUpstream& upstream, ProxyOptions options);

  // The handler for the gRPC port's http2::Server.
  void Handle(http2::Request request, std::shared_ptr<http2::ResponseStream> stream);

 private:
  const SnapshotStore& snapshots_;
  GrpcUpstream& upstream_;
  const ProxyOptions options_;
};

}  // namespace mf::router
