// The router's HTTP/2 client session against src/http2's server Session, in memory: bytes go
// straight from one to the other, so flow control, trailers, streaming, resets and GOAWAY are
// checked without sockets. (tests/e2e/test_router_grpc.py runs it against grpcio's server.)
#include "server/router/h2_client_session.h"

#include <gtest/gtest.h>

#include <map>

#include "http2/h2_server_session.h"

namespace mf::router {
namespace {

struct Response {
  int status = 0;
  http2::Headers headers;
  std::string body;
  http2::Headers trailers;
  bool ended = false;
  bool reset = false;
  bool unprocessed = false;
  std::string why;
};

class Recorder : public StreamHandler {
 public:
  explicit Recorder(Response* out) : out_(out) {}
  void OnHeaders(int status, http2::Headers headers) override {
    out_->status = status;
    out_->headers = std::move(headers);
  }
  void OnData(std::string_view data) override { out_->body.append(data); }
  void OnEnd(http2::Headers trailers) override {
    out_->trailers = std::move(trailers);
    out_->ended = true;
  }
  void OnReset(uint32_t, bool unprocessed, std::string why) override {
    out_->reset = true;
    out_->unprocessed = unprocessed;
    out_->why = std::move(why);
  }

 private:
  Response* out_;
};

class ServerRecorder : public http2::Session::Delegate {
 public:
  void OnRequest(int32_t id, http2::Request request) override { requests[id] = std::move(request); }
  void OnStreamClosed(int32_t) override {}
  std::map<int32_t, http2::Request> requests;
};

class H2ClientSessionTest : public testing::Test {
 protected:
  // Moves bytes both ways until neither side has anything to say.
  void Pump() {
    for (int round = 0; round < 1000; ++round) {
      std::string to_server, to_client;
      client_.Produce(&to_client_scratch_);
      to_server.swap(to_client_scratch_);
      if (!to_server.empty()) {
        ASSERT_TRUE(server_.Receive(reinterpret_cast<const uint8_t*>(to_server.data()), to_server.size()).ok());
      }
      ASSERT_TRUE(server_.Produce(&to_client, 1 << 30).ok());
      if (!to_client.empty()) {
        ASSERT_TRUE(client_.Receive(reinterpret_cast<const uint8_t*>(to_client.data()), to_client.size()).ok());
      }
      if (to_server.empty() && to_client.empty()) return;
    }
    FAIL() << "the sessions never went quiet";
  }

  int32_t Submit(H2Request request, Response* out) {
    return client_.Submit(std::move(request), std::make_shared<Recorder>(out));
  }

  static H2Request Request(std::string path, std::string body = "", http2::Headers headers = {}) {
    H2Request r;
    r.path = std::move(path);
    r.authority = "upstream";
    r.body = std::move(body);
    r.headers = std::move(headers);
    return r;
  }

  ServerRecorder server_delegate_;
  http2::Session server_{http2::SessionOptions{}, "test", &server_delegate_};
  H2ClientSession client_;
  std::string to_client_scratch_;
};

TEST_F(H2ClientSessionTest, RequestResponseWithTrailers) {
  Response r;
  int32_t id = Submit(Request("/pkg.Svc/M", "hello", {{"content-type", "application/grpc"}, {"x-user-id", "u"}}), &r);
  EXPECT_EQ(id, 1);
  Pump();
  ASSERT_EQ(server_delegate_.requests.count(id), 1u);
  const http2::Request& got = server_delegate_.requests[id];
  EXPECT_EQ(got.method, "POST");
  EXPECT_EQ(got.path, "/pkg.Svc/M");
  EXPECT_EQ(got.authority, "upstream");
  EXPECT_EQ(got.body, "hello");
  EXPECT_EQ(http2::FindHeader(got.headers, "x-user-id"), "u");
  server_.Send(id, {.status = 200, .headers = {{"content-type", "application/grpc"}}, .data = "world"});
  server_.Send(id, {.data = "!", .end = true, .trailers = {{"grpc-status", "0"}}});
  Pump();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(http2::FindHeader(r.headers, "content-type"), "application/grpc");
  EXPECT_EQ(r.body, "world!");
  EXPECT_TRUE(r.ended);
  EXPECT_EQ(r.trailers, (http2::Headers{{"grpc-status", "0"}}));
  EXPECT_EQ(client_.open_streams(), 0u);
}

TEST_F(H2ClientSessionTest, HeadersOnlyResponseAndGetWithoutBody) {
  Response r;
  int32_t id = Submit(Request("/x"), &r);
  Pump();
  EXPECT_TRUE(server_delegate_.requests[id].body.empty());
  server_.Send(id, {.status = 200, .headers = {{"grpc-status", "14"}}, .end = true});
  Pump();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(http2::FindHeader(r.headers, "grpc-status"), "14");
  EXPECT_TRUE(r.ended);
  EXPECT_TRUE(r.trailers.empty());
}

TEST_F(H2ClientSessionTest, LargeBodiesBothWaysRespectFlowControl) {
  std::string big(20 << 20, 'a');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + (i / 4096) % 26);
  Response r;
  int32_t id = Submit(Request("/big", big), &r);
  Pump();
  ASSERT_EQ(server_delegate_.requests[id].body.size(), big.size());
  EXPECT_EQ(server_delegate_.requests[id].body, big);
  server_.Send(id, {.status = 200, .data = big, .end = true});
  Pump();
  EXPECT_EQ(r.body.size(), big.size());
  EXPECT_TRUE(r.body == big);
  EXPECT_TRUE(r.ended);
}

TEST_F(H2ClientSessionTest, ManyConcurrentStreamsAndServerStreaming) {
  std::vector<Response> responses(50);
  std::vector<int32_t> ids;
  for (int i = 0; i < 50; ++i) ids.push_back(Submit(Request("/s", std::to_string(i)), &responses[i]));
  Pump();
  for (int i = 49; i >= 0; --i) {  // answered out of order, in several parts
    server_.Send(ids[i], {.status = 200, .data = "a"});
    server_.Send(ids[i], {.data = server_delegate_.requests[ids[i]].body});
    server_.Send(ids[i], {.end = true, .trailers = {{"grpc-status", "0"}}});
  }
  Pump();
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(responses[i].body, "a" + std::to_string(i));
    EXPECT_TRUE(responses[i].ended);
  }
}

TEST_F(H2ClientSessionTest, ServerResetAndClientCancel) {
  Response reset, cancelled, fine;
  int32_t a = Submit(Request("/a", "x"), &reset);
  int32_t b = Submit(Request("/b", "y"), &cancelled);
  int32_t c = Submit(Request("/c", "z"), &fine);
  Pump();
  server_.Reset(a, http2::kRefusedStream);
  client_.Cancel(b);
  server_.Send(c, {.status = 200, .data = "ok", .end = true});
  Pump();
  EXPECT_TRUE(reset.reset);
  EXPECT_TRUE(reset.unprocessed);  // REFUSED_STREAM: safe to send elsewhere
  EXPECT_FALSE(cancelled.reset);   // a cancelled stream hears nothing more
  EXPECT_FALSE(cancelled.ended);
  EXPECT_EQ(fine.body, "ok");
  EXPECT_EQ(client_.open_streams(), 0u);
}

TEST_F(H2ClientSessionTest, GoawayRefusesNewerStreamsAndNewSubmits) {
  Response first;
  int32_t a = Submit(Request("/a", "x"), &first);
  Pump();
  server_.Goaway();
  Pump();
  EXPECT_FALSE(client_.accepting());
  Response later;
  EXPECT_EQ(Submit(Request("/b"), &later), 0);
  server_.Send(a, {.status = 200, .data = "done", .end = true});  // streams it saw still finish
  Pump();
  EXPECT_EQ(first.body, "done");
}

TEST_F(H2ClientSessionTest, ConnectionFailureFailsOpenStreams) {
  Response sent, queued;
  Submit(Request("/a", "x"), &sent);
  Pump();
  client_.Fail("connection reset");
  EXPECT_TRUE(sent.reset);
  EXPECT_FALSE(sent.unprocessed);  // its request went out: the upstream may have run it
  EXPECT_EQ(sent.why, "connection reset");
  H2ClientSession fresh;
  fresh.Submit(Request("/b", "y"), std::make_shared<Recorder>(&queued));
  fresh.Fail("cannot connect");
  EXPECT_TRUE(queued.unprocessed);  // nothing was written: safe to retry anywhere
}

TEST_F(H2ClientSessionTest, GarbageFromThePeerIsAConnectionError) {
  Response r;
  Submit(Request("/a", "x"), &r);
  std::string out;
  client_.Produce(&out);
  const std::string garbage = "HTTP/1.1 400 Bad Request\r\n\r\n";
  Status s = client_.Receive(reinterpret_cast<const uint8_t*>(garbage.data()), garbage.size());
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(r.reset);
  EXPECT_FALSE(client_.accepting());
}

}  // namespace
}  // namespace mf::router
