// The async-API plumbing behind GrpcServer: one object per unary call of one method on one
// completion queue. Why not the sync API: grpc++'s sync server grows and shrinks its thread pool
// call by call (a new poller thread whenever the last one picks up work, exits when there are too
// many), and on this code path every new thread that runs a model also builds a fresh OpenMP
// team inside oneDNN. That churn cost 3-8x the server CPU per call of the REST front end
// (docs/benchmarks.md). Here a fixed set of threads, one per completion queue, lives for the
// server's lifetime.
//
// Lifecycle of a UnaryCall: Arm() asks gRPC for the next call of its method; when one arrives the
// object arms a successor (so the method keeps accepting), runs the handler, and the handler's
// `finish` (on this thread, or later on another one, e.g. a batching thread) sends the answer.
// The object deletes itself once both the Finish and the AsyncNotifyWhenDone events are back:
// both are delivered on its own completion queue, whose single thread is the only one that
// touches that count, so it needs no lock.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <utility>

namespace mf::server {

// Every tag put on a server completion queue is one of these.
class CompletionTag {
 public:
  virtual void OnEvent(bool ok) = 0;

 protected:
  ~CompletionTag() = default;
};

// `finish` answers the call; it must be called exactly once, from any thread.
template <class Request, class Response>
using UnaryHandler = std::function<void(grpc::ServerContext* context, const Request* request, Response* response,
                                        std::function<void(const grpc::Status&)> finish)>;

// Counts handlers that have started and not yet called `finish`, so shutdown can wait for
// answers still coming from other threads before it closes the completion queues.
class InFlightCalls {
 public:
  void Add() { count_.fetch_add(1, std::memory_order_relaxed); }
  void Done() { count_.fetch_sub(1, std::memory_order_release); }
  bool Idle() const { return count_.load(std::memory_order_acquire) == 0; }

 private:
  std::atomic<long> count_{0};
};

template <class AsyncService, class Request, class Response>
class UnaryCall final : public CompletionTag {
 public:
  using RequestMethod = void (AsyncService::*)(grpc::ServerContext*, Request*,
                                               grpc::ServerAsyncResponseWriter<Response>*, grpc::CompletionQueue*,
                                               grpc::ServerCompletionQueue*, void*);

  // Everything calls of one method on one queue share; owned by GrpcServer, outlives the calls.
  struct Method {
    AsyncService* service;
    RequestMethod request;
    UnaryHandler<Request, Response> handler;
    grpc::ServerCompletionQueue* queue;
    InFlightCalls* in_flight;
  };

  // Starts waiting for the next call of `method`; the object owns itself from here on.
  static void Arm(const Method* method) {
    auto* call = new UnaryCall(method);
    call->context_.AsyncNotifyWhenDone(&call->done_tag_);
    (method->service->*method->request)(&call->context_, &call->request_, &call->writer_, method->queue,
                                        method->queue, call);
  }

  void OnEvent(bool ok) override {
    if (!accepted_) {
      // ok == false: the server is shutting down and no call came; no other event will follow.
      if (!ok) {
        delete this;
        return;
      }
      accepted_ = true;
      Arm(method_);
      method_->in_flight->Add();
      // The Finish event may delete this object before the lambda returns: nothing after
      // writer_.Finish may touch a member.
      method_->handler(&context_, &request_, &response_,
                       [this, in_flight = method_->in_flight](const grpc::Status& status) {
                         writer_.Finish(response_, status, this);
                         in_flight->Done();
                       });
      return;
    }
    Release();  // the Finish event (sent or not: nothing more to do either way)
  }

 private:
  // The AsyncNotifyWhenDone event: the call is over (answered or cancelled by the client).
  struct DoneTag final : CompletionTag {
    explicit DoneTag(UnaryCall* call) : call(call) {}
    void OnEvent(bool) override { call->Release(); }
    UnaryCall* call;
  };

  explicit UnaryCall(const Method* method) : method_(method), writer_(&context_), done_tag_(this) {}

  void Release() {
    if (--pending_events_ == 0) delete this;
  }

  const Method* method_;
  grpc::ServerContext context_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> writer_;
  DoneTag done_tag_;
  bool accepted_ = false;
  int pending_events_ = 2;  // Finish and AsyncNotifyWhenDone
};

}  // namespace mf::server
