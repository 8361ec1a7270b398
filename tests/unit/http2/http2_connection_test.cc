// src/http2/server.cc at the byte level: what a connection that is not (or stops being) a good
// HTTP/2 client gets. Raw sockets, no HTTP/2 client library in between.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "http2/server.h"

namespace mf::http2 {
namespace {

using namespace std::chrono_literals;

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
// An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
const std::string kEmptySettings("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9);

class RawSocket {
 public:
  explicit RawSocket(uint16_t port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
    timeval timeout{.tv_sec = 5, .tv_usec = 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~RawSocket() { close(fd_); }
  bool connected() const { return connected_; }
  void Send(std::string_view bytes) {
    ASSERT_EQ(send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL), ssize_t(bytes.size()));
  }
  // Reads until the server closes; false when it had not closed after 5 s of silence. `took`,
  // when given, is how long that was.
  // Reads until `done(received)` holds; false when it did not within `timeout`.
  template <class Done>
  bool ReadUntil(std::string* received, std::chrono::milliseconds timeout, Done done) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buffer[4096];
    while (!done(*received)) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd readable{.fd = fd_, .events = POLLIN, .revents = 0};
      if (left.count() <= 0 || poll(&readable, 1, static_cast<int>(left.count())) != 1) return false;
      ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) return false;
      received->append(buffer, static_cast<size_t>(n));
    }
    return true;
  }
  bool ReadUntilClosed(std::string* received, std::chrono::steady_clock::duration* took = nullptr) {
    const auto started = std::chrono::steady_clock::now();
    char buffer[4096];
    for (;;) {
      ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (took) *took = std::chrono::steady_clock::now() - started;
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
      received->append(buffer, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  bool connected_ = false;
};

// True when `bytes` (frames after the server's preface) hold a frame of `type` (on `stream`,
// when given).
bool HasFrame(const std::string& bytes, uint8_t type, int32_t stream = -1) {
  size_t at = 0;
  while (at + 9 <= bytes.size()) {
    size_t length = (size_t{uint8_t(bytes[at])} << 16) | (size_t{uint8_t(bytes[at + 1])} << 8) | uint8_t(bytes[at + 2]);
    const int32_t id = static_cast<int32_t>(((uint32_t{uint8_t(bytes[at + 5])} & 0x7f) << 24) |
                                            (uint32_t{uint8_t(bytes[at + 6])} << 16) |
                                            (uint32_t{uint8_t(bytes[at + 7])} << 8) | uint8_t(bytes[at + 8]));
    if (uint8_t(bytes[at + 3]) == type && (stream < 0 || id == stream)) return true;
    at += 9 + length;
  }
  return false;
}

constexpr uint8_t kHeaders = 0x1;
constexpr uint8_t kGoaway = 0x7;

// GET / on `stream` (HPACK: static entries :method GET, :scheme http, :path /, then :authority
// "x"; END_STREAM|END_HEADERS).
std::string Get(uint8_t stream) {
  return std::string("\x00\x00\x06\x01\x05\x00\x00\x00", 8) + char(stream) + std::string("\x82\x86\x84\x41\x01x", 6);
}

class Http2ConnectionTest : public ::testing::Test {
 protected:
  void Start(
      ServerOptions options, Handler handler = [](Request, std::shared_ptr<ResponseStream> stream) {
        stream->Send({.status = 200, .data = "ok", .end = true});
      }) {
    options.address = "127.0.0.1";
    options.io_threads = 1;
    server_ = std::make_unique<Server>(options, std::move(handler));
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }
  std::unique_ptr<Server> server_;
};

TEST_F(Http2ConnectionTest, Http1RequestInsteadOfThePrefaceIsClosed) {
  Start({});
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.connected());
  socket.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string received;
  EXPECT_TRUE(socket.ReadUntilClosed(&received));
  EXPECT_EQ(server_->stats().streams, 0u);
}

TEST_F(Http2ConnectionTest, ProtocolErrorAfterThePrefaceGetsGoawayAndClose) {
  Start({});
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.connected());
  // A DATA frame on stream 0 is a connection error (RFC 9113 6.1).
  socket.Send(std::string(kPreface) + kEmptySettings + std::string("\x00\x00\x01\x00\x00\x00\x00\x00\x00x", 10));
  std::string received;
  EXPECT_TRUE(socket.ReadUntilClosed(&received));
  EXPECT_TRUE(HasFrame(received, kGoaway));
}

TEST_F(Http2ConnectionTest, SilentConnectionIsClosedAfterTheHandshakeTimeout) {
  ServerOptions options;
  options.handshake_timeout = 200ms;
  Start(options);
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.connected());
  std::string received;
  std::chrono::steady_clock::duration took{};
  EXPECT_TRUE(socket.ReadUntilClosed(&received, &took));
  EXPECT_LT(took, 3s);
  // The server counts the close right after the socket's: give it a moment.
  for (int i = 0; i < 200 && server_->stats().connections_open != 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server_->stats().connections_open, 0u);
}

TEST_F(Http2ConnectionTest, IdleConnectionGetsGoawayThenClose) {
  ServerOptions options;
  options.idle_timeout = 300ms;
  Start(options);
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.connected());
  socket.Send(std::string(kPreface) + kEmptySettings);
  std::string received;
  EXPECT_TRUE(socket.ReadUntilClosed(&received));
  EXPECT_TRUE(HasFrame(received, kGoaway));
}

TEST_F(Http2ConnectionTest, PeerThatNeverOpensItsWindowIsClosedAfterTheWriteTimeout) {
  ServerOptions options;
  options.write_timeout = 300ms;
  Start(options);
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.connected());
  // SETTINGS_INITIAL_WINDOW_SIZE (0x4) = 0: the answer's DATA can never be sent.
  const std::string zero_window("\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00", 15);
  socket.Send(std::string(kPreface) + zero_window + Get(1));
  std::string received;
  std::chrono::steady_clock::duration took{};
  EXPECT_TRUE(socket.ReadUntilClosed(&received, &took)) << "still open after 5 s of silence";
  EXPECT_LT(took, 4s);
  EXPECT_EQ(server_->stats().streams, 1u);
}

// Requests that arrive in one read are handled one after another on the io thread; the first
// answer given inline leaves at once instead of waiting for the rest of the read to be handled,
// so a client multiplexing many calls on one connection gets to work on it early.
TEST_F(Http2ConnectionTest, InlineAnswerLeavesBeforeTheNextRequestOfTheSameReadIsHandled) {
  std::promise<void> first_answer_seen;
  std::shared_future<void> seen = first_answer_seen.get_future().share();
  std::atomic<int> handled{0};
  Start({}, [&handled, seen](Request, std::shared_ptr<ResponseStream> stream) {
    // The second request holds the io thread until the client saw the first answer (at most 3 s).
    if (handled.fetch_add(1) == 1) seen.wait_for(3s);
    stream->Send({.status = 200, .data = "ok", .end = true});
  });
  RawSocket socket(server_->port());
  ASSERT_TRUE(socket.connected());
  socket.Send(std::string(kPreface) + kEmptySettings + Get(1) + Get(3));
  std::string received;
  const auto started = std::chrono::steady_clock::now();
  const bool first = socket.ReadUntil(&received, 5000ms, [](const std::string& r) { return HasFrame(r, kHeaders, 1); });
  const auto took = std::chrono::steady_clock::now() - started;
  first_answer_seen.set_value();
  ASSERT_TRUE(first);
  EXPECT_LT(took, 2s) << "the first answer waited for the second request's handler";
  EXPECT_TRUE(socket.ReadUntil(&received, 5000ms, [](const std::string& r) { return HasFrame(r, kHeaders, 3); }));
  EXPECT_EQ(handled.load(), 2);
}

TEST_F(Http2ConnectionTest, StartRejectsBadOptionsAndTakenPorts) {
  EXPECT_EQ(Server({.address = "not an ip"}, [](Request, std::shared_ptr<ResponseStream>) {}).Start().code(),
            StatusCode::kInvalidArgument);
  ServerOptions zero_streams;
  zero_streams.session.max_concurrent_streams = 0;
  EXPECT_EQ(Server(zero_streams, [](Request, std::shared_ptr<ResponseStream>) {}).Start().code(),
            StatusCode::kInvalidArgument);
  Start({});
  Server second({.address = "127.0.0.1", .port = server_->port()}, [](Request, std::shared_ptr<ResponseStream>) {});
  EXPECT_EQ(second.Start().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace mf::http2
