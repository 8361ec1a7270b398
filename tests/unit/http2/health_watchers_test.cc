// server/grpc/health_watchers.cc: grpc.health.v1.Health/Watch as a grpc++ client sees it, over
// the nghttp2 server: the current status at once, a message per change, UNAVAILABLE at Stop().
#include "server/grpc/health_watchers.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "grpc/health/v1/health.grpc.pb.h"
#include "http2/grpc_router.h"
#include "http2/server.h"

namespace mf::server {
namespace {

using namespace std::chrono_literals;
using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthWatchersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A long poll interval: changes must arrive because of Notify(), not the poll.
    watchers_ = std::make_unique<HealthWatchers>(
        [this](const std::string& service) {
          if (service == "nope") return HealthCheckResponse::SERVICE_UNKNOWN;
          return serving_.load() ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
        },
        std::chrono::milliseconds(60'000));
    http2::GrpcRouter router;
    router.Add("/grpc.health.v1.Health/Watch", [this](std::shared_ptr<http2::GrpcCall> call) {
      HealthCheckRequest request;
      ASSERT_TRUE(request.ParseFromArray(call->request_message().data(), int(call->request_message().size())));
      watchers_->Watch(std::move(call), request.service());
    });
    server_ = std::make_unique<http2::Server>(http2::ServerOptions{.address = "127.0.0.1", .io_threads = 1},
                                              router.AsHandler());
    ASSERT_TRUE(server_->Start().ok());
    stub_ = Health::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    watchers_->Stop(Unavailable("test over"));
    server_->Stop();
  }

  std::unique_ptr<grpc::ClientReader<HealthCheckResponse>> Watch(grpc::ClientContext* context,
                                                                 const std::string& service) {
    context->set_deadline(std::chrono::system_clock::now() + 30s);
    HealthCheckRequest request;
    request.set_service(service);
    return stub_->Watch(context, request);
  }

  bool WaitForWatchers(size_t n) {
    for (int i = 0; i < 500; ++i) {
      if (watchers_->size() == n) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

  std::atomic<bool> serving_{true};
  std::unique_ptr<HealthWatchers> watchers_;
  std::unique_ptr<http2::Server> server_;
  std::unique_ptr<Health::Stub> stub_;
};

TEST_F(HealthWatchersTest, SendsTheCurrentStatusThenEachChange) {
  grpc::ClientContext context;
  auto reader = Watch(&context, "");
  HealthCheckResponse message;
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_EQ(message.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(WaitForWatchers(1));
  watchers_->Notify();  // nothing changed: no message
  serving_ = false;
  watchers_->Notify();
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_EQ(message.status(), HealthCheckResponse::NOT_SERVING);
  serving_ = true;
  watchers_->Notify();
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_EQ(message.status(), HealthCheckResponse::SERVING);
  watchers_->Stop(Unavailable("the server is shutting down"));
  EXPECT_FALSE(reader->Read(&message));
  grpc::Status status = reader->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "the server is shutting down");
}

TEST_F(HealthWatchersTest, UnknownServiceIsReportedNotFailed) {
  grpc::ClientContext context;
  auto reader = Watch(&context, "nope");
  HealthCheckResponse message;
  ASSERT_TRUE(reader->Read(&message));
  EXPECT_EQ(message.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  context.TryCancel();
}

TEST_F(HealthWatchersTest, ACancelledWatchIsForgotten) {
  grpc::ClientContext first;
  auto one = Watch(&first, "");
  grpc::ClientContext second;
  auto two = Watch(&second, "");
  HealthCheckResponse message;
  ASSERT_TRUE(one->Read(&message));
  ASSERT_TRUE(two->Read(&message));
  ASSERT_TRUE(WaitForWatchers(2));
  first.TryCancel();
  EXPECT_EQ(one->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(WaitForWatchers(1));
  // The one left still gets changes.
  serving_ = false;
  watchers_->Notify();
  ASSERT_TRUE(two->Read(&message));
  EXPECT_EQ(message.status(), HealthCheckResponse::NOT_SERVING);
}

TEST_F(HealthWatchersTest, WatchAfterStopEndsAtOnce) {
  watchers_->Stop(Unavailable("stopped"));
  grpc::ClientContext context;
  auto reader = Watch(&context, "");
  HealthCheckResponse message;
  while (reader->Read(&message)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace mf::server
