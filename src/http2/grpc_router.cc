#include "http2/grpc_router.h"

#include <utility>

#include "http2/grpc_wire.h"

namespace mf::http2 {
namespace {

using Clock = GrpcCall::Clock;

constexpr std::string_view kGrpcContentType = "application/grpc";
// What a client may compress requests with; sent with the UNIMPLEMENTED answer to any other
// grpc-encoding, as gRPC servers do, so the client can retry with one of these.
constexpr std::string_view kAcceptEncoding = "identity,gzip";

Headers ResponseHeaders() { return {{"content-type", std::string(kGrpcContentType)}}; }

Headers StatusTrailers(const Status& status) {
  Headers trailers{{"grpc-status", std::to_string(static_cast<int>(status.code()))}};
  if (!status.message().empty()) trailers.emplace_back("grpc-message", PercentEncodeGrpcMessage(status.message()));
  return trailers;
}

// "application/grpc", "application/grpc+proto", "application/grpc;charset=..." are protobuf
// gRPC; another "+subtype" is gRPC we cannot decode; anything else is not gRPC at all.
enum class ContentKind { kProto, kOtherSubtype, kNotGrpc };
ContentKind ClassifyContentType(std::string_view type) {
  if (type.substr(0, kGrpcContentType.size()) != kGrpcContentType) return ContentKind::kNotGrpc;
  std::string_view rest = type.substr(kGrpcContentType.size());
  if (rest.empty() || rest[0] == ';') return ContentKind::kProto;
  if (rest[0] != '+') return ContentKind::kNotGrpc;
  std::string_view subtype = rest.substr(1, rest.find(';') == std::string_view::npos ? rest.npos : rest.find(';') - 1);
  return subtype == "proto" ? ContentKind::kProto : ContentKind::kOtherSubtype;
}

// "/package.Service/Method" -> "package.Service"; empty when the path has another shape.
std::string_view ServiceOf(std::string_view path) {
  if (path.size() < 4 || path[0] != '/') return {};
  size_t slash = path.find('/', 1);
  if (slash == std::string_view::npos || slash == 1 || slash + 1 == path.size()) return {};
  return path.substr(1, slash - 1);
}

struct Routes {
  size_t max_message_bytes;
  std::unordered_map<std::string, GrpcHandler> methods;
  std::unordered_set<std::string> services;
};

// Everything between the HTTP/2 request and the handler; a non-OK answer is sent as is.
void Dispatch(const Routes& routes, Request request, std::shared_ptr<ResponseStream> stream) {
  auto refuse = [&](const Status& status) { stream->Send(GrpcErrorResponse(status)); };
  if (request.method != "POST") {
    stream->Send({.status = 405, .headers = {{"allow", "POST"}}, .end = true});
    return;
  }
  switch (ClassifyContentType(FindHeader(request.headers, "content-type"))) {
    case ContentKind::kProto:
      break;
    case ContentKind::kOtherSubtype:
      return refuse(Unimplemented("content-type '" + std::string(FindHeader(request.headers, "content-type")) +
                                  "' is not served: use application/grpc (protobuf)"));
    case ContentKind::kNotGrpc:
      // The gRPC spec: a non-gRPC content-type gets HTTP 415.
      stream->Send({.status = 415,
                    .headers = {{"content-type", "text/plain"}},
                    .data = "gRPC requests need content-type application/grpc\n",
                    .end = true});
      return;
  }
  auto method = routes.methods.find(request.path);
  if (method == routes.methods.end()) {
    std::string_view service = ServiceOf(request.path);
    const bool known_service = !service.empty() && routes.services.count(std::string(service)) > 0;
    return refuse(Unimplemented("method " + request.path + " is not served: " +
                                (known_service ? "the service has no such method" : "unknown service")));
  }
  if (request.body_too_large) {
    return refuse(ResourceExhausted("request message larger than max (" + std::to_string(routes.max_message_bytes) +
                                    " bytes), or more request data in flight on this connection than the "
                                    "server buffers"));
  }
  Clock::time_point deadline = Clock::time_point::max();
  if (std::string_view timeout = FindHeader(request.headers, "grpc-timeout"); !timeout.empty()) {
    auto parsed = ParseGrpcTimeout(timeout);
    if (!parsed.ok()) return refuse(Internal(parsed.status().message()));
    auto now = Clock::now();
    deadline = *parsed >= Clock::time_point::max() - now ? Clock::time_point::max()
                                                         : now + std::chrono::duration_cast<Clock::duration>(*parsed);
    if (deadline <= now) return refuse(DeadlineExceeded("Deadline Exceeded"));
  }
  std::string_view encoding = FindHeader(request.headers, "grpc-encoding");
  const bool gzip = encoding == "gzip";
  if (!gzip && !encoding.empty() && encoding != "identity") {
    ResponsePart part = GrpcErrorResponse(
        Unimplemented("grpc-encoding '" + std::string(encoding) + "' is not supported: use identity or gzip"));
    part.headers.emplace_back("grpc-accept-encoding", std::string(kAcceptEncoding));
    stream->Send(std::move(part));
    return;
  }
  auto messages = SplitGrpcMessages(request.body);
  if (!messages.ok()) return refuse(messages.status());
  if (messages->size() != 1) {
    return refuse(Internal(messages->empty() ? "the call has no request message"
                                             : "more than one request message for a unary or server-streaming method"));
  }
  GrpcMessage message = messages->front();
  std::optional<std::string> inflated;
  if (message.compressed) {
    if (!gzip) return refuse(Internal("a compressed message needs grpc-encoding (gzip)"));
    inflated.emplace();
    if (Status s = GunzipGrpcMessage(message.payload, routes.max_message_bytes, &*inflated); !s.ok()) return refuse(s);
  } else if (message.payload.size() > routes.max_message_bytes) {
    return refuse(
        ResourceExhausted("request message larger than max (" + std::to_string(routes.max_message_bytes) + " bytes)"));
  }
  // An offset, not a view: a short body lives inside the std::string (SSO) and moves with it.
  const size_t offset = static_cast<size_t>(message.payload.data() - request.body.data());
  const size_t length = message.payload.size();
  auto call =
      std::make_shared<GrpcCall>(std::move(request), std::move(inflated), offset, length, deadline, std::move(stream));
  method->second(std::move(call));
}

}  // namespace

ResponsePart GrpcErrorResponse(const Status& status) {
  ResponsePart part{.status = 200, .headers = ResponseHeaders(), .end = true};
  Headers trailers = StatusTrailers(status);
  part.headers.insert(part.headers.end(), trailers.begin(), trailers.end());
  return part;
}

GrpcCall::GrpcCall(Request request, std::optional<std::string> inflated, size_t offset, size_t length,
                   Clock::time_point deadline, std::shared_ptr<ResponseStream> stream)
    : request_(std::move(request)), inflated_(std::move(inflated)), deadline_(deadline), stream_(std::move(stream)) {
  message_ = inflated_ ? std::string_view(*inflated_) : std::string_view(request_.body).substr(offset, length);
}

bool GrpcCall::TakeFinish() { return !finished_.exchange(true); }

void GrpcCall::Reply(std::string frame) {
  if (!TakeFinish()) return;
  if (deadline_ != Clock::time_point::max() && Clock::now() > deadline_) {
    stream_->Send(GrpcErrorResponse(DeadlineExceeded("Deadline Exceeded")));
    return;
  }
  ResponsePart part{.data = std::move(frame), .end = true, .trailers = StatusTrailers(Status::Ok())};
  if (!headers_sent_) {
    part.status = 200;
    part.headers = ResponseHeaders();
    headers_sent_ = true;
  }
  stream_->Send(std::move(part));
}

bool GrpcCall::Write(std::string frame) {
  if (finished_.load() || stream_->closed()) return false;
  ResponsePart part{.data = std::move(frame)};
  if (!headers_sent_) {
    part.status = 200;
    part.headers = ResponseHeaders();
    headers_sent_ = true;
  }
  stream_->Send(std::move(part));
  return true;
}

void GrpcCall::Finish(const Status& status) {
  if (!TakeFinish()) return;
  Status final_status = status;
  if (status.ok() && deadline_ != Clock::time_point::max() && Clock::now() > deadline_) {
    final_status = DeadlineExceeded("Deadline Exceeded");
  }
  if (!headers_sent_) {
    stream_->Send(GrpcErrorResponse(final_status));
    return;
  }
  stream_->Send({.end = true, .trailers = StatusTrailers(final_status)});
}

GrpcRouter& GrpcRouter::Add(const std::string& path, GrpcHandler handler) {
  std::string_view service = ServiceOf(path);
  if (!service.empty()) services_.insert(std::string(service));
  methods_[path] = std::move(handler);
  return *this;
}

Handler GrpcRouter::AsHandler() const {
  auto routes = std::make_shared<const Routes>(Routes{max_message_bytes_, methods_, services_});
  return [routes](Request request, std::shared_ptr<ResponseStream> stream) {
    Dispatch(*routes, std::move(request), std::move(stream));
  };
}

}  // namespace mf::http2
