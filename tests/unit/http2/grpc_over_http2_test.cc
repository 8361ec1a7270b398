// The HTTP/2 server and gRPC framing (src/http2) against a real gRPC client: grpc++'s generated
// stubs talk to an in-process http2::Server serving a GrpcRouter with test handlers.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "http2/grpc_router.h"
#include "http2/grpc_wire.h"
#include "http2/server.h"
#include "tensorflow_serving/apis/prediction_service.grpc.pb.h"

namespace mf::http2 {
namespace {

using namespace std::chrono_literals;
using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;
namespace tfs = tensorflow::serving;

std::string Frame(const google::protobuf::MessageLite& message) {
  std::string frame = ReserveGrpcFrame();
  message.AppendToString(&frame);
  EXPECT_TRUE(SealGrpcFrame(&frame).ok());
  return frame;
}

void ReplyStatus(GrpcCall& call, HealthCheckResponse::ServingStatus status) {
  HealthCheckResponse response;
  response.set_status(status);
  call.Reply(Frame(response));
}

// Calls a handler kept for later; the test decides when (and whether) they are answered.
class HeldCalls {
 public:
  void Add(std::shared_ptr<GrpcCall> call) {
    std::lock_guard lock(mu_);
    calls_.push_back(std::move(call));
    changed_.notify_all();
  }
  // Waits until `n` calls arrived; false after 10 s.
  bool WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, 10s, [&] { return calls_.size() >= n; });
  }
  std::vector<std::shared_ptr<GrpcCall>> Take() {
    std::lock_guard lock(mu_);
    return std::move(calls_);
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::shared_ptr<GrpcCall>> calls_;
};

class GrpcOverHttp2Test : public ::testing::Test {
 protected:
  void Start(GrpcRouter router, SessionOptions session = {}) {
    ServerOptions options;
    options.address = "127.0.0.1";
    options.io_threads = 2;
    options.session = session;
    server_ = std::make_unique<Server>(options, router.AsHandler());
    ASSERT_TRUE(server_->Start().ok());
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    channel_ = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(server_->port()),
                                         grpc::InsecureChannelCredentials(), args);
  }

  void TearDown() override {
    if (server_) server_->Stop();
  }

  static void SetDeadline(grpc::ClientContext* context, std::chrono::milliseconds in) {
    context->set_deadline(std::chrono::system_clock::now() + in);
  }

  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(GrpcOverHttp2Test, UnaryCallAnswersOk) {
  GrpcRouter router;
  router.Add("/grpc.health.v1.Health/Check", [](std::shared_ptr<GrpcCall> call) {
    HealthCheckRequest request;
    ASSERT_TRUE(request.ParseFromArray(call->request_message().data(), int(call->request_message().size())));
    EXPECT_EQ(call->method(), "/grpc.health.v1.Health/Check");
    EXPECT_NE(call->peer().find("127.0.0.1:"), std::string::npos);
    ReplyStatus(*call, request.service() == "up" ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
  });
  Start(std::move(router));
  auto stub = Health::NewStub(channel_);
  for (const char* service : {"up", "down", "up"}) {  // several calls share the connection
    grpc::ClientContext context;
    SetDeadline(&context, 10s);
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    grpc::Status status = stub->Check(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.status(),
              std::string(service) == "up" ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
  }
  EXPECT_EQ(server_->stats().connections_accepted, 1u);
}

TEST_F(GrpcOverHttp2Test, ErrorStatusCarriesPercentEncodedMessage) {
  const std::string message = "bad input: 100% wrong, \xc3\xbc\xc3\xa9 \xe2\x9c\x93\nsecond line";
  GrpcRouter router;
  router.Add("/grpc.health.v1.Health/Check",
             [&](std::shared_ptr<GrpcCall> call) { call->Finish(InvalidArgument(message)); });
  Start(std::move(router));
  grpc::ClientContext context;
  SetDeadline(&context, 10s);
  HealthCheckResponse response;
  grpc::Status status = Health::NewStub(channel_)->Check(&context, HealthCheckRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), message);
}

TEST_F(GrpcOverHttp2Test, UnknownMethodIsUnimplemented) {
  GrpcRouter router;
  router.Add("/grpc.health.v1.Health/Check", [](std::shared_ptr<GrpcCall> call) { call->Finish(Status::Ok()); });
  Start(std::move(router));
  // A method of a known service, and a service the server does not have.
  grpc::ClientContext watch_context;
  SetDeadline(&watch_context, 10s);
  auto reader = Health::NewStub(channel_)->Watch(&watch_context, HealthCheckRequest());
  HealthCheckResponse ignored;
  EXPECT_FALSE(reader->Read(&ignored));
  grpc::Status watch = reader->Finish();
  EXPECT_EQ(watch.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(watch.error_message().find("/grpc.health.v1.Health/Watch"), std::string::npos);

  grpc::ClientContext context;
  SetDeadline(&context, 10s);
  tfs::PredictResponse response;
  grpc::Status predict = tfs::PredictionService::NewStub(channel_)->Predict(&context, tfs::PredictRequest(), &response);
  EXPECT_EQ(predict.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(predict.error_message().find("unknown service"), std::string::npos);
}

TEST_F(GrpcOverHttp2Test, LateAnswerIsDeadlineExceededAndTheServerSeesTheCancel) {
  HeldCalls held;
  GrpcRouter router;
  router.Add("/grpc.health.v1.Health/Check", [&](std::shared_ptr<GrpcCall> call) { held.Add(std::move(call)); });
  Start(std::move(router));
  grpc::ClientContext context;
  SetDeadline(&context, 300ms);
  HealthCheckResponse response;
  auto started = std::chrono::steady_clock::now();
  auto done = std::async(std::launch::async,
                         [&] { return Health::NewStub(channel_)->Check(&context, HealthCheckRequest(), &response); });
  ASSERT_TRUE(held.WaitFor(1));
  auto calls = held.Take();
  // grpc-timeout reached the server as a deadline close to the client's.
  auto remaining = calls[0]->deadline() - started;
  EXPECT_GT(remaining, 100ms);
  EXPECT_LE(remaining, 400ms);
  grpc::Status status = done.get();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The client reset the stream at its deadline: the server's call knows, and answering it
  // now is harmless.
  for (int i = 0; i < 200 && !calls[0]->cancelled(); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(calls[0]->cancelled());
  ReplyStatus(*calls[0], HealthCheckResponse::SERVING);
}

TEST_F(GrpcOverHttp2Test, AnswerAfterTheDeadlineIsReplacedByDeadlineExceeded) {
  // The server's own check, without the client's timer: a call whose deadline passed before
  // the handler answered gets DEADLINE_EXCEEDED, even when the answer was OK.
  GrpcRouter router;
  router.Add("/grpc.health.v1.Health/Check", [](std::shared_ptr<GrpcCall> call) {
    std::this_thread::sleep_until(call->deadline() + 20ms);
    ReplyStatus(*call, HealthCheckResponse::SERVING);
  });
  Start(std::move(router));
  grpc::ClientContext context;
  SetDeadline(&context, 200ms);
  HealthCheckResponse response;
  grpc::Status status = Health::NewStub(channel_)->Check(&context, HealthCheckRequest(), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(GrpcOverHttp2Test, LargeMessagesBothWays) {
  GrpcRouter router(64u << 20);
  router.Add("/tensorflow.serving.PredictionService/Predict", [](std::shared_ptr<GrpcCall> call) {
    tfs::PredictRequest request;
    ASSERT_TRUE(request.ParseFromArray(call->request_message().data(), int(call->request_message().size())));
    tfs::PredictResponse response;
    // Echo the tensor back reversed, so both directions carry all the bytes.
    std::string content = request.inputs().at("x").tensor_content();
    std::reverse(content.begin(), content.end());
    (*response.mutable_outputs())["y"].set_tensor_content(std::move(content));
    call->Reply(Frame(response));
  });
  Start(std::move(router));
  std::string content(12u << 20, '\0');
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<char>((i * 131) >> 7);
  tfs::PredictRequest request;
  (*request.mutable_inputs())["x"].set_tensor_content(content);
  tfs::PredictResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, 60s);
  grpc::Status status = tfs::PredictionService::NewStub(channel_)->Predict(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::reverse(content.begin(), content.end());
  EXPECT_TRUE(response.outputs().at("y").tensor_content() == content);
}

TEST_F(GrpcOverHttp2Test, OversizedRequestIsResourceExhaustedAndTheConnectionLivesOn) {
  GrpcRouter router(1u << 20);
  router.Add("/tensorflow.serving.PredictionService/Predict",
             [](std::shared_ptr<GrpcCall> call) { call->Reply(Frame(tfs::PredictResponse())); });
  SessionOptions session;
  session.max_request_body_bytes = (1u << 20) + kGrpcPrefixBytes;
  Start(std::move(router), session);
  auto stub = tfs::PredictionService::NewStub(channel_);
  tfs::PredictRequest big;
  (*big.mutable_inputs())["x"].set_tensor_content(std::string(3u << 20, 'x'));
  tfs::PredictResponse response;
  grpc::ClientContext context;
  SetDeadline(&context, 30s);
  grpc::Status status = stub->Predict(&context, big, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  grpc::ClientContext again;
  SetDeadline(&again, 30s);
  EXPECT_TRUE(stub->Predict(&again, tfs::PredictRequest(), &response).ok());
}

TEST_F(GrpcOverHttp2Test, ManyConcurrentStreamsOnOneConnection) {
  // Every call is held until all of them arrived: this only finishes if the server keeps them
  // all open at once on the one connection.
  constexpr size_t kCalls = 300;
  HeldCalls held;
  GrpcRouter router;
  router.Add("/grpc.health.v1.Health/Check", [&](std::shared_ptr<GrpcCall> call) { held.Add(std::move(call)); });
  Start(std::move(router));
  auto stub = Health::NewStub(channel_);
  grpc::CompletionQueue queue;
  struct Pending {
    grpc::ClientContext context;
    HealthCheckResponse response;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<HealthCheckResponse>> reader;
  };
  std::vector<std::unique_ptr<Pending>> pending;
  for (size_t i = 0; i < kCalls; ++i) {
    auto p = std::make_unique<Pending>();
    SetDeadline(&p->context, 30s);
    HealthCheckRequest request;
    request.set_service(std::to_string(i));
    p->reader = stub->AsyncCheck(&p->context, request, &queue);
    p->reader->Finish(&p->response, &p->status, p.get());
    pending.push_back(std::move(p));
  }
  // grpc++'s async client makes progress while a thread polls its queue.
  auto completed = std::async(std::launch::async, [&] {
    size_t ok = 0;
    for (size_t i = 0; i < kCalls; ++i) {
      void* tag = nullptr;
      bool event_ok = false;
      if (!queue.Next(&tag, &event_ok)) break;
      ok += event_ok ? 1 : 0;
    }
    return ok;
  });
  ASSERT_TRUE(held.WaitFor(kCalls));
  for (auto& call : held.Take()) {
    HealthCheckRequest request;
    ASSERT_TRUE(request.ParseFromArray(call->request_message().data(), int(call->request_message().size())));
    // Each answer names its own request: no call is mixed up with another.
    ReplyStatus(
        *call, std::stoi(request.service()) % 2 == 0 ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
  }
  ASSERT_EQ(completed.get(), kCalls);
  for (size_t i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(pending[i]->status.ok()) << pending[i]->status.error_message();
    EXPECT_EQ(pending[i]->response.status(),
              i % 2 == 0 ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING);
  }
  EXPECT_EQ(server_->stats().connections_accepted, 1u);
  queue.Shutdown();
}

TEST_F(GrpcOverHttp2Test, ClientCancelMidCallClosesTheServerSide) {
  HeldCalls held;
  // Only the first call's end is awaited; the state outlives the test body because the second
  // (held) call ends only when the fixture stops the server.
  struct FirstDone {
    std::promise<void> closed;
    std::atomic<bool> seen{false};
  };
  auto first = std::make_shared<FirstDone>();
  GrpcRouter router;
  router.Add("/grpc.health.v1.Health/Check", [&held, first](std::shared_ptr<GrpcCall> call) {
    call->OnDone([first] {
      if (!first->seen.exchange(true)) first->closed.set_value();
    });
    held.Add(std::move(call));
  });
  Start(std::move(router));
  grpc::ClientContext context;
  SetDeadline(&context, 30s);
  HealthCheckResponse response;
  auto done = std::async(std::launch::async,
                         [&] { return Health::NewStub(channel_)->Check(&context, HealthCheckRequest(), &response); });
  ASSERT_TRUE(held.WaitFor(1));
  context.TryCancel();
  EXPECT_EQ(done.get().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_EQ(first->closed.get_future().wait_for(10s), std::future_status::ready);
  auto calls = held.Take();
  EXPECT_TRUE(calls[0]->cancelled());
  // Answering (or writing to) a cancelled call from another thread is a no-op.
  std::thread late([call = calls[0]] {
    EXPECT_FALSE(call->Write(Frame(HealthCheckResponse())));
    call->Finish(Status::Ok());
  });
  late.join();
  calls.clear();
  // The connection still serves.
  grpc::ClientContext again;
  SetDeadline(&again, 200ms);
  EXPECT_EQ(Health::NewStub(channel_)->Check(&again, HealthCheckRequest(), &response).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);  // held again, never answered: the client's deadline
}

TEST_F(GrpcOverHttp2Test, ServerStreamingWatchReceivesChanges) {
  HeldCalls held;
  GrpcRouter router;
  router.Add("/grpc.health.v1.Health/Watch", [&](std::shared_ptr<GrpcCall> call) {
    HealthCheckResponse first;
    first.set_status(HealthCheckResponse::SERVING);
    EXPECT_TRUE(call->Write(Frame(first)));
    held.Add(std::move(call));
  });
  Start(std::move(router));
  grpc::ClientContext context;
  SetDeadline(&context, 30s);
  auto reader = Health::NewStub(channel_)->Watch(&context, HealthCheckRequest());
  HealthCheckResponse message;
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_EQ(message.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(held.WaitFor(1));
  auto calls = held.Take();
  // Later messages come from another thread, as a status change would.
  std::thread changer([call = calls[0]] {
    HealthCheckResponse change;
    change.set_status(HealthCheckResponse::NOT_SERVING);
    EXPECT_TRUE(call->Write(Frame(change)));
    change.set_status(HealthCheckResponse::SERVING);
    EXPECT_TRUE(call->Write(Frame(change)));
    call->Finish(Unavailable("going away"));
  });
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_EQ(message.status(), HealthCheckResponse::NOT_SERVING);
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_EQ(message.status(), HealthCheckResponse::SERVING);
  EXPECT_FALSE(reader->Read(&message));
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "going away");
  changer.join();
}

TEST_F(GrpcOverHttp2Test, DrainSendsGoawayAndLetsInFlightCallsFinish) {
  HeldCalls held;
  GrpcRouter router;
  router.Add("/grpc.health.v1.Health/Check", [&](std::shared_ptr<GrpcCall> call) { held.Add(std::move(call)); });
  Start(std::move(router));
  auto stub = Health::NewStub(channel_);
  grpc::ClientContext context;
  SetDeadline(&context, 30s);
  HealthCheckResponse response;
  auto in_flight =
      std::async(std::launch::async, [&] { return stub->Check(&context, HealthCheckRequest(), &response); });
  ASSERT_TRUE(held.WaitFor(1));
  auto drained = std::async(std::launch::async, [&] { return server_->Drain(20s); });
  // The drain waits for the call: it is not over before the answer.
  EXPECT_EQ(drained.wait_for(300ms), std::future_status::timeout);
  auto calls = held.Take();
  ReplyStatus(*calls[0], HealthCheckResponse::SERVING);
  grpc::Status status = in_flight.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  EXPECT_TRUE(drained.get());  // closed once its last stream finished, well before 20 s
  EXPECT_EQ(server_->stats().connections_open, 0u);
  // The client saw the GOAWAY and the listener is closed: a new call fails at once.
  grpc::ClientContext after;
  SetDeadline(&after, 5s);
  EXPECT_EQ(stub->Check(&after, HealthCheckRequest(), &response).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(GrpcOverHttp2Test, DroppedUnansweredCallResetsTheStream) {
  GrpcRouter router;
  router.Add("/grpc.health.v1.Health/Check", [](std::shared_ptr<GrpcCall>) {});  // forgets the call
  Start(std::move(router));
  grpc::ClientContext context;
  SetDeadline(&context, 10s);
  HealthCheckResponse response;
  auto started = std::chrono::steady_clock::now();
  grpc::Status status = Health::NewStub(channel_)->Check(&context, HealthCheckRequest(), &response);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
}

TEST_F(GrpcOverHttp2Test, GzipRequestsAreInflatedAndOtherEncodingsUnimplemented) {
  GrpcRouter router;
  router.Add("/grpc.health.v1.Health/Check", [](std::shared_ptr<GrpcCall> call) {
    HealthCheckRequest request;
    ASSERT_TRUE(request.ParseFromArray(call->request_message().data(), int(call->request_message().size())));
    ReplyStatus(*call, request.service() == std::string(2000, 'a') ? HealthCheckResponse::SERVING
                                                                   : HealthCheckResponse::UNKNOWN);
  });
  Start(std::move(router));
  grpc::ClientContext context;
  SetDeadline(&context, 10s);
  context.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  HealthCheckRequest request;
  request.set_service(std::string(2000, 'a'));
  HealthCheckResponse response;
  grpc::Status status = Health::NewStub(channel_)->Check(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);

  grpc::ClientContext deflate;
  SetDeadline(&deflate, 10s);
  deflate.set_compression_algorithm(GRPC_COMPRESS_DEFLATE);
  status = Health::NewStub(channel_)->Check(&deflate, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace mf::http2
