// An asynchronous HTTP/1.1 client for the router's upstreams: keep-alive connections pooled per
// endpoint, one callback per request. Unlike src/http's Client it never blocks a thread.
//
// Where an exchange runs: called on a server io thread (the REST proxy's handlers are), it runs
// on that thread, on connections made and pooled by that thread alone, and calls back there, so
// a proxied request never changes threads and takes no lock (Envoy's worker model). Called from
// any other thread, it runs on this client's own io threads, with connections pooled on the
// Endpoint's ConnectionShelf.
//
// Failures are classified for the proxy's retry decision: a connect failure, or a connection
// that ended before any response byte (kNoResponse), left the request unprocessed or (for the
// requests the proxy marks retry_safe) safe to send again. A pooled connection the upstream
// closed while idle is noticed before reuse (poll) for requests that are not retry_safe; a
// retry_safe one that fails before a response byte on a reused connection is sent again here,
// once, on a fresh connection.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"
#include "http/message.h"
#include "server/router/endpoint.h"

namespace mf::router {

// A request ready for the wire, shared by the first attempt, a retry and a mirror copy.
struct UpstreamRequest {
  std::string method;
  std::string target;
  std::string wire;         // request line, headers and body, as written to every upstream
  bool retry_safe = false;  // may be sent again after a failure before any response byte
};

// A header field as the caller chose to forward it, viewing strings the caller keeps alive for
// the call.
using HeaderView = std::pair<std::string_view, std::string_view>;

// Serialises `method target` with `headers` (already filtered by the caller) and `body`.
// INVALID_ARGUMENT when a header could inject (CR/LF, bad names).
StatusOr<std::shared_ptr<const UpstreamRequest>> MakeUpstreamRequest(std::string method, std::string target,
                                                                     std::span<const HeaderView> headers,
                                                                     const std::string& body, bool retry_safe);

enum class UpstreamError {
  kNone,
  kConnect,      // could not connect (refused, unreachable, connect timeout)
  kNoResponse,   // the connection failed before any response byte
  kTimeout,      // the deadline passed
  kBadResponse,  // malformed, too large, or cut off mid-response
};
std::string_view UpstreamErrorName(UpstreamError error);

struct UpstreamResult {
  UpstreamError error = UpstreamError::kNone;
  std::string message;  // for kNone: empty
  http::Response response;
};

using UpstreamCallback = std::function<void(UpstreamResult result)>;

struct HttpUpstreamOptions {
  int io_threads = 2;
  std::chrono::milliseconds connect_timeout{5'000};
  size_t max_idle_per_endpoint = 64;
  std::chrono::milliseconds idle_ttl{50'000};  // below the upstream's keep-alive timeout (75 s)
  size_t max_response_header_bytes = 64 * 1024;
  size_t max_response_body_bytes = 256 * 1024 * 1024;
};

class HttpUpstream {
 public:
  explicit HttpUpstream(HttpUpstreamOptions options);
  ~HttpUpstream();  // Stop()s
  HttpUpstream(const HttpUpstream&) = delete;
  HttpUpstream& operator=(const HttpUpstream&) = delete;

  // Sends `request` to `endpoint` and calls `done` once, on one of this client's io threads,
  // with the response or a classified failure. `deadline` bounds the whole exchange.
  void Send(std::shared_ptr<Endpoint> endpoint, std::shared_ptr<const UpstreamRequest> request,
            Clock::time_point deadline, UpstreamCallback done);

  // Calls `fn` after `delay`: on the calling server io thread when called on one (as Send runs
  // there), else on one of this client's io threads. Dropped, like a request, when it stops.
  void After(Clock::duration delay, std::function<void()> fn);

  // Stops the io threads; requests in flight are dropped without their callback. Idempotent.
  void Stop();

  uint64_t connections_opened() const;

  class Impl;  // upstream_http.cc

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace mf::router
