// The seam between the Kubernetes client and the network. The production implementation adapts
// the shared HTTP client (src/http/client.h: pooled, TLS, streaming reads); unit tests plug in
// an in-memory API server. Keeping the seam this small is what lets the informer, work queue and
// leader election be tested deterministically without sockets.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <stop_token>
#include <string>
#include <string_view>

#include "common/status.h"

namespace mf::k8s {

struct HttpRequest {
  std::string method;                          // GET, POST, PUT, PATCH, DELETE
  std::string target;                          // absolute path plus query, e.g. /api/v1/namespaces/ns/pods?watch=true
  std::map<std::string, std::string> headers;  // Authorization, Content-Type, Accept, ...
  std::string body;
  // Deadline for a unary call; for a stream, the longest silence tolerated between chunks.
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};
};

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  // Value of a header (name lower-case), or "" when absent.
  std::string Header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// Receives the body of a streamed response chunk by chunk; returning false ends the stream.
using ChunkHandler = std::function<bool(std::string_view chunk)>;

class Transport {
 public:
  virtual ~Transport() = default;
  // A unary request. A non-OK Status means no HTTP response arrived (connection refused, TLS
  // failure, timeout); any HTTP status, 5xx included, comes back as a response.
  virtual StatusOr<HttpResponse> Send(const HttpRequest& request) = 0;
  // A streamed request (watch, log follow). When the status is 2xx the body is delivered to
  // `on_chunk` as it arrives and the returned response has an empty body; otherwise the whole
  // error body is returned and `on_chunk` is never called. Returns when the server ends the
  // stream, the connection drops, `on_chunk` returns false, or `stop` is requested.
  virtual StatusOr<HttpResponse> Stream(const HttpRequest& request, const ChunkHandler& on_chunk,
                                        std::stop_token stop) = 0;
};

}  // namespace mf::k8s
