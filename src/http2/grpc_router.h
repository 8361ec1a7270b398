// gRPC served on mf::http2::Server: GrpcRouter maps ":path" /package.Service/Method to a
// handler and does the protocol around it (content-type, grpc-timeout, grpc-encoding, the one
// request message, trailers); a GrpcCall is what the handler answers through.
//
// Only unary and server-streaming methods: every call has exactly one request message, which
// is all modelfleet serves (TF Serving, KServe v2, grpc.health.v1 Check and Watch).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/status.h"
#include "http2/message.h"
#include "http2/server.h"

namespace mf::http2 {

// One call. Its answer methods may be called from any thread, one at a time: Write() any
// number of times (server streaming), then Finish() once; or Reply() once for a unary answer.
class GrpcCall {
 public:
  using Clock = std::chrono::steady_clock;

  // The request message is `inflated` when it came compressed, else request.body's bytes
  // [offset, offset + length).
  GrpcCall(Request request, std::optional<std::string> inflated, size_t offset, size_t length,
           Clock::time_point deadline, std::shared_ptr<ResponseStream> stream);

  const std::string& method() const { return request_.path; }  // "/package.Service/Method"
  const std::string& peer() const { return request_.peer; }
  const Headers& metadata() const { return request_.headers; }
  // The request message's serialized bytes, valid as long as the call.
  std::string_view request_message() const { return message_; }
  // Clock::time_point::max() when the client set no grpc-timeout.
  Clock::time_point deadline() const { return deadline_; }
  // The client cancelled, or its connection went away, before Finish().
  bool cancelled() const { return stream_->closed() && !finished_.load(); }

  // A unary answer in one hop: headers, `frame` (from ReserveGrpcFrame + SealGrpcFrame) and an
  // OK status; DEADLINE_EXCEEDED instead when the deadline already passed.
  void Reply(std::string frame);
  // Sends one message (the first Write also sends the response headers). False once the call
  // is over (finished, cancelled); a writer stops producing then.
  bool Write(std::string frame);
  // Ends the call with `status` (trailers; a trailers-only response when nothing was written).
  void Finish(const Status& status);
  // Runs `callback` once when the stream closes (answered, cancelled, connection gone), on the
  // io thread; at once when it already has.
  void OnDone(std::function<void()> callback) { stream_->OnClose(std::move(callback)); }

 private:
  bool TakeFinish();

  Request request_;
  std::optional<std::string> inflated_;
  std::string_view message_;
  Clock::time_point deadline_;
  std::shared_ptr<ResponseStream> stream_;
  bool headers_sent_ = false;
  std::atomic<bool> finished_{false};
};

// Answers the call; must eventually Reply() or Finish() it (dropping every reference to it
// unanswered resets the stream). Runs on an io thread: do slow work elsewhere.
using GrpcHandler = std::function<void(std::shared_ptr<GrpcCall> call)>;

// The trailers-only answer of a failed call, e.g. for a transport that answers by itself.
ResponsePart GrpcErrorResponse(const Status& status);

class GrpcRouter {
 public:
  // Messages larger than this (after decompression) are refused with RESOURCE_EXHAUSTED.
  explicit GrpcRouter(size_t max_message_bytes = 64u << 20) : max_message_bytes_(max_message_bytes) {}
  // `path` is "/package.Service/Method". Configure before AsHandler().
  GrpcRouter& Add(const std::string& path, GrpcHandler handler);
  // An immutable copy of the routes as an http2 handler.
  Handler AsHandler() const;

 private:
  size_t max_message_bytes_;
  std::unordered_map<std::string, GrpcHandler> methods_;
  std::unordered_set<std::string> services_;  // "package.Service", for the UNIMPLEMENTED message
};

}  // namespace mf::http2
