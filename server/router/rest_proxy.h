// The REST (HTTP/1.1) side of the router: every request that reaches the proxy port is routed
// to a version (routing.h) and an endpoint of it, forwarded over a pooled keep-alive upstream
// connection, and answered with the upstream's response plus `x-modelfleet-version`.
//
// One retry, on another endpoint (same version first), after a connect failure or a connection
// that ended before any response byte, for requests IsRetrySafe() allows. A deadline
// (--upstream-timeout-ms) bounds each request: 504. Upstream failures: 502. Nothing ready: 503.
// Every error body is JSON {"error": "..."} saying what failed where.
#pragma once

#include <chrono>

#include "http/server.h"
#include "server/router/snapshot.h"
#include "server/router/upstream_http.h"

namespace mf::router {

struct ProxyOptions {
  std::chrono::milliseconds upstream_timeout{30'000};
  OutlierPolicy outlier;
  // Requests in flight to one endpoint from this router (HTTP/1.1: also its open connections);
  // an endpoint at the limit takes nothing more, and when all are at it the request gets 503
  // (gRPC: UNAVAILABLE). 0: no limit.
  int max_requests_per_endpoint = 0;
};

class RestProxy {
 public:
  RestProxy(const SnapshotStore& snapshots, HttpUpstream& upstream, ProxyOptions options);

  // The handler for the proxy port (answers from the upstream client's io threads).
  void Handle(http::Request request, http::Responder responder);

 private:
  const SnapshotStore& snapshots_;
  HttpUpstream& upstream_;
  const ProxyOptions options_;
};

}  // namespace mf::router
