// Downloads from a loopback server of our own (src/http/server.h on port 0): the body lands
// under the URL's file name, redirects are followed, errors name the URL and status, retries
// reach a file that appears late, and cancellation ends a download that stalls.
#include "server/sync/http_source.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "http/server.h"
#include "server/sync/sha256.h"
#include "server/sync/sync.h"
#include "tests/unit/sync/temp_dir.h"

namespace mf::sync {
namespace {

namespace fs = std::filesystem;
using testing::Names;
using testing::ReadFile;
using testing::TempDir;

std::string ModelBytes() {
  std::string bytes(300 * 1024 + 7, '\0');  // several client chunks
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131) % 251);
  return bytes;
}

class HttpSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    http::Router router;
    auto file = [this](const http::Request&) {
      ++model_requests_;
      return http::Response::Text(200, model_, "application/octet-stream");
    };
    router.Add("GET", "/models/model.onnx", http::Sync(file));
    router.Add("GET", "/late/model.onnx", http::Sync([this, file](const http::Request& request) {
                 if (++late_requests_ < 3) return http::Response::Text(503, "still uploading\n");
                 return file(request);
               }));
    router.Add("GET", "/redirect/latest.onnx", http::Sync([](const http::Request&) {
                 http::Response response = http::Response::Text(302, "");
                 response.headers.Set("Location", "/models/model.onnx");
                 return response;
               }));
    router.Add("GET", "/loop/model.onnx", http::Sync([](const http::Request&) {
                 http::Response response = http::Response::Text(307, "");
                 response.headers.Set("Location", "/loop/model.onnx");
                 return response;
               }));
    router.Add("GET", "/stall/model.onnx", [this](http::Request, http::Responder responder) {
      auto stream = responder.StartStream(200, {});
      stream->Write("the first bytes, then nothing");
      std::lock_guard lock(mu_);
      stalled_.push_back(stream);
    });
    server_ = std::make_unique<http::Server>(http::ServerOptions{.address = "127.0.0.1", .port = 0, .io_threads = 1},
                                             router.AsHandler());
    ASSERT_TRUE(server_->Start().ok());
    base_ = "http://127.0.0.1:" + std::to_string(server_->port());
  }

  void TearDown() override {
    {
      std::lock_guard lock(mu_);
      for (auto& stream : stalled_) stream->Close();
    }
    server_->Stop();
  }

  fs::path models() const { return tmp_.path() / "models" / "resnet"; }
  fs::path dest() const { return models() / "2"; }

  SyncRequest Request(const std::string& path, std::string sha256 = "") {
    auto source = ParseSource(base_ + path, "/mnt/pvc");
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    return SyncRequest{*source, dest(), std::move(sha256)};
  }

  StatusOr<SyncResult> Sync(const SyncRequest& request) { return SyncOnce(request, client_, cancellation_); }

  const std::string model_ = ModelBytes();
  std::atomic<int> model_requests_{0};
  std::atomic<int> late_requests_{0};
  std::mutex mu_;
  std::vector<std::shared_ptr<http::Stream>> stalled_;
  std::unique_ptr<http::Server> server_;
  std::string base_;
  TempDir tmp_;
  http::Client client_{DownloadClientOptions()};
  Cancellation cancellation_;
};

TEST_F(HttpSourceTest, DownloadsTheFileUnderItsUrlName) {
  auto result = Sync(Request("/models/model.onnx?token=abc", Sha256Hex(model_)));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->content.bytes, model_.size());
  EXPECT_EQ(result->content.sha256, Sha256Hex(model_));
  EXPECT_EQ(ReadFile(dest() / "model.onnx"), model_);
  EXPECT_EQ(Names(dest()), (std::set<std::string>{"model.onnx", kMarkerName}));
  EXPECT_EQ(Names(models()), std::set<std::string>{"2"});
}

TEST_F(HttpSourceTest, ARestartWithTheSameDigestDoesNotDownloadAgain) {
  ASSERT_TRUE(Sync(Request("/models/model.onnx", Sha256Hex(model_))).ok());
  auto again = Sync(Request("/models/model.onnx", Sha256Hex(model_)));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->already_present);
  EXPECT_EQ(model_requests_.load(), 1);

  // Without --sha256 the download is the only way to know; an unchanged body is not republished.
  fs::path marker_inode_probe = dest() / "probe";
  testing::WriteFile(marker_inode_probe, "");
  again = Sync(Request("/models/model.onnx"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->already_present);
  EXPECT_TRUE(fs::exists(marker_inode_probe));
  EXPECT_EQ(Names(models()), std::set<std::string>{"2"});
}

TEST_F(HttpSourceTest, FollowsARedirectAndKeepsTheRequestedName) {
  auto result = Sync(Request("/redirect/latest.onnx"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(ReadFile(dest() / "latest.onnx"), model_);
}

TEST_F(HttpSourceTest, ARedirectLoopEnds) {
  auto result = Sync(Request("/loop/model.onnx"));
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("more than 5 redirects"), std::string::npos) << result.status().message();
  EXPECT_TRUE(Names(models()).empty());
}

TEST_F(HttpSourceTest, NotFoundNamesTheUrlAndStatusAndLeavesNothing) {
  auto result = Sync(Request("/missing/model.onnx"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_NE(result.status().message().find("GET " + base_ + "/missing/model.onnx answered 404 Not Found"),
            std::string::npos)
      << result.status().message();
  EXPECT_TRUE(Names(models()).empty());
}

TEST_F(HttpSourceTest, ADigestMismatchIsNotPublished) {
  std::string wrong(64, '0');
  auto result = Sync(Request("/models/model.onnx", wrong));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(result.status().message().find("expected " + wrong + ", got " + Sha256Hex(model_)), std::string::npos)
      << result.status().message();
  EXPECT_TRUE(Names(models()).empty());
}

TEST_F(HttpSourceTest, RetriesReachAFileThatAppearsLate) {
  RetryPolicy policy{5, std::chrono::milliseconds(1), std::chrono::milliseconds(10)};
  SyncRequest request = Request("/late/model.onnx");
  int attempts = 0;
  Status status = RetryWithBackoff(policy, cancellation_, [&](int attempt) {
    attempts = attempt;
    return Sync(request).status();
  });
  ASSERT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(attempts, 3);
  EXPECT_EQ(ReadFile(dest() / "model.onnx"), model_);
}

TEST_F(HttpSourceTest, RetriesGiveUpOnA404WithItsMessage) {
  RetryPolicy policy{2, std::chrono::milliseconds(1), std::chrono::milliseconds(1)};
  SyncRequest request = Request("/missing/model.onnx");
  Status status = RetryWithBackoff(policy, cancellation_, [&](int) { return Sync(request).status(); });
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_NE(status.message().find("404"), std::string::npos);
  EXPECT_NE(status.message().find("(after 2 attempts)"), std::string::npos) << status.message();
}

TEST_F(HttpSourceTest, CancellationEndsAStalledDownload) {
  std::thread canceller([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancellation_.Cancel(15);
  });
  auto start = std::chrono::steady_clock::now();
  auto result = Sync(Request("/stall/model.onnx"));
  canceller.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kCancelled) << result.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(Names(models()).empty());
}

TEST_F(HttpSourceTest, AnUnreachableServerIsUnavailable) {
  server_->Stop();
  auto result = Sync(Request("/models/model.onnx"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
  EXPECT_NE(result.status().message().find(base_), std::string::npos) << result.status().message();
  EXPECT_TRUE(Names(models()).empty());
}

}  // namespace
}  // namespace mf::sync
