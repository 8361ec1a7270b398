// Our server and our client against each other, plus raw sockets where exact bytes matter.
#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <queue>
#include <thread>

#include "common/logging.h"
#include "http/body_codec.h"
#include "http/client.h"
#include "http/server.h"
#include "tests/unit/http/test_util.h"

namespace mf::http {
namespace {

using namespace std::chrono_literals;
using testing::Connect;
using testing::PeerClosed;
using testing::ReceiveUntil;
using testing::SendAll;

Handler Echo() {
  return Sync([](const Request& r) {
    Response resp = Response::Text(200, r.body, "application/octet-stream");
    resp.headers.Set("X-Method", r.method);
    resp.headers.Set("X-Target", r.target);
    return resp;
  });
}

class ServerClientTest : public ::testing::Test {
 protected:
  void StartServer(ServerOptions options = {}) {
    options.address = "127.0.0.1";
    options.port = 0;
    if (options.io_threads == 0) options.io_threads = 2;
    server_ = std::make_unique<Server>(options, router_.AsHandler());
    ASSERT_TRUE(server_->Start().ok());
  }
  std::string Url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(server_->port()) + std::string(path);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  Router router_;
  std::unique_ptr<Server> server_;
};

TEST_F(ServerClientTest, KeepAliveReusesOneSocket) {
  router_.Add("GET", "/ping", Sync([](const Request&) { return Response::Text(200, "pong"); }));
  StartServer();
  Client client;
  for (int i = 0; i < 20; ++i) {
    auto r = client.Get(Url("/ping"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "pong");
  }
  EXPECT_EQ(server_->stats().connections_accepted, 1u);
  EXPECT_EQ(server_->stats().requests, 20u);
  EXPECT_EQ(client.stats().connections_opened, 1u);
}

TEST_F(ServerClientTest, SharedClientAcrossThreads) {
  router_.Add("POST", "/echo", Echo());
  StartServer();
  Client client;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::string body = "t" + std::to_string(t) + "-" + std::to_string(i);
        auto r = client.Post(Url("/echo"), body, "text/plain");
        if (r.ok() && r->body == body) ok++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 400);
  // Connections are pooled: at most one per concurrent caller.
  EXPECT_LE(server_->stats().connections_accepted, 8u);
}

TEST_F(ServerClientTest, TwentyMegabyteBodiesBothWays) {
  router_.Add("POST", "/echo", Echo());
  StartServer({.max_body_bytes = 32 << 20});
  std::string big(20 << 20, 'x');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + (i / 4096) % 26);
  Client client;
  auto r = client.Post(Url("/echo"), big, "application/octet-stream");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body.size(), big.size());
  EXPECT_TRUE(r->body == big);
}

TEST_F(ServerClientTest, BodyOverLimitGets413WithClearMessage) {
  router_.Add("POST", "/echo", Echo());
  StartServer({.max_body_bytes = 1024});
  Client client;
  auto r = client.Post(Url("/echo"), std::string(2048, 'x'), "text/plain");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(r->body.find("larger than the server's limit of 1024 bytes"), std::string::npos) << r->body;
  // The server stays healthy for the next caller.
  auto small = client.Post(Url("/echo"), "ok", "text/plain");
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->body, "ok");
}

TEST_F(ServerClientTest, ExpectContinueInvitesBodyOrRefusesEarly) {
  router_.Add("POST", "/echo", Echo());
  StartServer({.max_body_bytes = 1024});
  int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
  std::string got = ReceiveUntil(fd, 2s, [](const std::string& s) { return s.find("\r\n\r\n") != std::string::npos; });
  EXPECT_EQ(got, "HTTP/1.1 100 Continue\r\n\r\n");
  SendAll(fd, "hello");
  got = ReceiveUntil(fd, 2s, [](const std::string& s) { return s.ends_with("hello"); });
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200 OK\r\n")) << got;
  ::close(fd);

  fd = Connect(server_->port());
  SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n");
  got = ReceiveUntil(fd, 2s);  // 413 then close, without a 100 Continue
  EXPECT_TRUE(got.starts_with("HTTP/1.1 413 ")) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos);
  ::close(fd);
}

TEST_F(ServerClientTest, OversizedHeaderGets431) {
  router_.Add("GET", "/", Echo());
  StartServer({.max_header_bytes = 2048});
  Client client;
  Headers h;
  h.Set("X-Big", std::string(4096, 'y'));
  auto r = client.Get(Url("/"), h);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 431);
}

TEST_F(ServerClientTest, MalformedRequestGets400AndClose) {
  StartServer();
  int fd = Connect(server_->port());
  SendAll(fd, "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n");
  std::string got = ReceiveUntil(fd, 2s);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 400 ")) << got;
  ::close(fd);
}

TEST_F(ServerClientTest, LastChunkSplitAcrossReadsIsHandled) {
  // Beast 1.74 asserts on this split (boostorg/beast#2861); wire::PutBuffered works around it.
  router_.Add("POST", "/echo", Echo());
  StartServer();
  int fd = Connect(server_->port());
  SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n");
  std::this_thread::sleep_for(30ms);
  SendAll(fd, "\r");
  std::this_thread::sleep_for(30ms);
  SendAll(fd, "\n");
  std::string got = ReceiveUntil(fd, 2s);
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200 OK\r\n")) << got;
  EXPECT_NE(got.find("Content-Length: 0\r\n"), std::string::npos) << got;
  ::close(fd);
}

TEST_F(ServerClientTest, GzipBodiesAreInflatedWithinTheLimit) {
  router_.Add("POST", "/echo", Echo());
  StartServer({.max_body_bytes = 1 << 20});
  Client client;
  ClientRequest req;
  req.method = "POST";
  req.url = Url("/echo");
  req.headers.Set("Content-Encoding", "gzip");
  std::string plain(200000, 'z');
  req.body = GzipCompress(plain);
  auto r = client.Do(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, plain);

  req.body = GzipCompress(std::string(4 << 20, '\0'));  // small on the wire, 4 MiB inflated
  r = client.Do(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(r->body.find("decompressed"), std::string::npos);

  req.body = "definitely not gzip";
  r = client.Do(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 400);

  req.headers.Set("Content-Encoding", "br");
  r = client.Do(req);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 415);
}

TEST_F(ServerClientTest, AsyncResponderCompletedFromAnotherThread) {
  std::mutex mu;
  std::condition_variable cv;
  std::queue<std::pair<Request, Responder>> parked;
  bool stop = false;
  router_.Add("POST", "/batch", [&](Request request, Responder responder) {
    std::lock_guard lock(mu);
    parked.emplace(std::move(request), std::move(responder));
    cv.notify_one();
  });
  StartServer();
  std::thread worker([&] {
    std::unique_lock lock(mu);
    while (true) {
      cv.wait(lock, [&] { return stop || !parked.empty(); });
      if (parked.empty()) return;
      auto [request, responder] = std::move(parked.front());
      parked.pop();
      lock.unlock();
      std::this_thread::sleep_for(5ms);  // the "batch" runs elsewhere
      responder.Respond(Response::Text(200, "done:" + request.body + ":" + mf::log::CurrentRequestId()));
      lock.lock();
    }
  });
  Client client;
  auto r = client.Post(Url("/batch"), "b1", "text/plain");
  {
    std::lock_guard lock(mu);
    stop = true;
    cv.notify_one();
  }
  worker.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "done:b1:");  // the worker thread has no request-id scope of its own
  EXPECT_EQ(r->status, 200);
}

TEST_F(ServerClientTest, RequestIdsAreHonouredOrGenerated) {
  router_.Add("GET", "/id", Sync([](const Request& r) {
                return Response::Text(200, r.request_id + "|" + mf::log::CurrentRequestId());
              }));
  StartServer();
  Client client;
  Headers h;
  h.Set("x-request-id", "abc-123");
  auto r = client.Get(Url("/id"), h);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "abc-123|abc-123");
  EXPECT_EQ(r->headers.Get("x-request-id"), "abc-123");
  r = client.Get(Url("/id"));
  ASSERT_TRUE(r.ok());
  auto id = r->headers.Get("x-request-id");
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(id->size(), 16u);
  EXPECT_EQ(r->body, std::string(*id) + "|" + std::string(*id));
}

TEST_F(ServerClientTest, RouterExactPrefixCatchAllAnd404And405) {
  router_.Add("GET", "/a", Sync([](const Request&) { return Response::Text(200, "exact"); }));
  router_.AddPrefix("GET", "/v1/", Sync([](const Request&) { return Response::Text(200, "v1"); }));
  router_.AddPrefix("GET", "/v1/models/", Sync([](const Request&) { return Response::Text(200, "models"); }));
  StartServer();
  Client client;
  EXPECT_EQ(client.Get(Url("/a"))->body, "exact");
  EXPECT_EQ(client.Get(Url("/v1/x"))->body, "v1");
  EXPECT_EQ(client.Get(Url("/v1/models/m"))->body, "models");
  EXPECT_EQ(client.Get(Url("/nope"))->status, 404);
  EXPECT_EQ(client.Post(Url("/a"), "", "text/plain")->status, 405);
  server_->Stop();

  Router with_catch_all;
  with_catch_all.SetCatchAll(
      Sync([](const Request& r) { return Response::Text(200, "all:" + std::string(r.path())); }));
  server_ =
      std::make_unique<Server>(ServerOptions{.address = "127.0.0.1", .io_threads = 1}, with_catch_all.AsHandler());
  ASSERT_TRUE(server_->Start().ok());
  EXPECT_EQ(client.Get(Url("/anything/here?x=1"))->body, "all:/anything/here");
}

TEST_F(ServerClientTest, HandlerThatNeverAnswersGets500AndThrowingToo) {
  router_.Add("GET", "/lost", [](Request, Responder) {});
  router_.Add("GET", "/throws", [](Request, Responder) -> void { throw std::runtime_error("boom"); });
  StartServer();
  Client client;
  auto r = client.Get(Url("/lost"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->body, "handler did not respond\n");
  r = client.Get(Url("/throws"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 500);
}

TEST_F(ServerClientTest, ConnectionCloseIsHonoured) {
  router_.Add("GET", "/", Sync([](const Request&) { return Response::Text(200, "x"); }));
  StartServer();
  int fd = Connect(server_->port());
  SendAll(fd, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string got = ReceiveUntil(fd, 2s);  // returns when the server closes
  EXPECT_NE(got.find("Connection: close\r\n"), std::string::npos) << got;
  EXPECT_TRUE(got.ends_with("\r\n\r\nx"));
  ::close(fd);
}

TEST_F(ServerClientTest, Http10KeepAliveIsAnnounced) {
  router_.Add("GET", "/", Sync([](const Request&) { return Response::Text(200, "x"); }));
  StartServer();
  int fd = Connect(server_->port());
  auto complete = [](const std::string& s) { return s.ends_with("\r\n\r\nx"); };
  SendAll(fd, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  std::string got = ReceiveUntil(fd, 2s, complete);
  EXPECT_NE(got.find("Connection: keep-alive\r\n"), std::string::npos) << got;
  SendAll(fd, "GET / HTTP/1.0\r\n\r\n");  // no keep-alive: answered, then closed
  got = ReceiveUntil(fd, 2s);
  EXPECT_NE(got.find("Connection: close\r\n"), std::string::npos) << got;
  EXPECT_TRUE(complete(got));
  EXPECT_EQ(server_->stats().connections_accepted, 1u);
  ::close(fd);
}

TEST_F(ServerClientTest, PipelinedRequestsAreAnsweredInOrder) {
  router_.Add("GET", "/", Echo());
  StartServer();
  int fd = Connect(server_->port());
  SendAll(fd, "GET /?1 HTTP/1.1\r\nHost: x\r\n\r\nGET /?2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string got = ReceiveUntil(fd, 2s);
  size_t first = got.find("X-Target: /?1");
  size_t second = got.find("X-Target: /?2");
  ASSERT_NE(first, std::string::npos) << got;
  ASSERT_NE(second, std::string::npos) << got;
  EXPECT_LT(first, second);
  ::close(fd);
}

TEST_F(ServerClientTest, ServerReadAndIdleTimeoutsCloseSlowPeers) {
  StartServer({.read_timeout = 200ms, .idle_timeout = 300ms});
  int fd = Connect(server_->port());
  SendAll(fd, "GET / HTTP/1.1\r\nHost:");  // never finishes the header
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(PeerClosed(fd, 3s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  ::close(fd);
  fd = Connect(server_->port());  // sends nothing at all
  EXPECT_TRUE(PeerClosed(fd, 3s));
  ::close(fd);
  // The count drops just after the close the peer saw.
  for (int i = 0; i < 100 && server_->stats().connections_open != 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(server_->stats().connections_open, 0u);
}

TEST_F(ServerClientTest, ClientReadTimeoutAndDeadline) {
  std::vector<Responder> parked;
  std::mutex mu;
  router_.Add("GET", "/slow", [&](Request, Responder r) {
    std::lock_guard lock(mu);
    parked.push_back(std::move(r));
  });
  StartServer();
  Client client({.read_timeout = 200ms});
  auto start = std::chrono::steady_clock::now();
  auto r = client.Get(Url("/slow"));
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);

  ClientRequest req;
  req.url = Url("/slow");
  req.read_timeout = 10s;
  req.deadline = 150ms;
  r = client.Do(req);
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded) << r.status().ToString();
  std::lock_guard lock(mu);
  parked.clear();
}

TEST_F(ServerClientTest, ConnectRefusedIsUnavailable) {
  Client client({.connect_timeout = 1s});
  auto r = client.Get("http://127.0.0.1:" + std::to_string(testing::FreePort()) + "/");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable) << r.status().ToString();
}

TEST(ClientAgainstBrokenServers, ServerClosingMidBodyIsDataLoss) {
  testing::ScriptedServer peer("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly-part");
  Client client;
  auto r = client.Get("http://127.0.0.1:" + std::to_string(peer.port()) + "/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("mid-body (after 9 of 100 bytes)"), std::string::npos) << r.status().ToString();
}

TEST(ClientAgainstBrokenServers, TruncatedChunkedBodyIsDataLoss) {
  testing::ScriptedServer peer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n10\r\nabc");
  Client client;
  auto r = client.Get("http://127.0.0.1:" + std::to_string(peer.port()) + "/");
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
}

TEST(ClientAgainstBrokenServers, MalformedResponseIsDataLoss) {
  testing::ScriptedServer peer("HTTP/1.1 two hundred\r\nContent-Length: 0\r\n\r\n");
  Client client;
  auto r = client.Get("http://127.0.0.1:" + std::to_string(peer.port()) + "/");
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
}

TEST(ClientAgainstBrokenServers, BodyDelimitedByCloseIsRead) {
  testing::ScriptedServer peer("HTTP/1.0 200 OK\r\n\r\nuntil the end");
  Client client;
  auto r = client.Get("http://127.0.0.1:" + std::to_string(peer.port()) + "/");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "until the end");
}

TEST(ClientAgainstBrokenServers, ChunkedBodyIsAssembled) {
  testing::ScriptedServer peer(
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nhello\r\n6\r\n "
      "world\r\n0\r\n\r\n");
  Client client;
  auto r = client.Get("http://127.0.0.1:" + std::to_string(peer.port()) + "/");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "hello world");
}

TEST(ClientAgainstBrokenServers, OversizedResponseIsResourceExhausted) {
  testing::ScriptedServer peer("HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'x'));
  Client client({.max_response_body_bytes = 1000});
  auto r = client.Get("http://127.0.0.1:" + std::to_string(peer.port()) + "/");
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
}

TEST_F(ServerClientTest, StreamIsReadChunkByChunk) {
  // Each chunk is written only after the client has seen the previous one, which proves the
  // client delivers chunks as they arrive rather than at the end.
  std::mutex mu;
  std::condition_variable cv;
  int seen = 0;
  std::thread producer;
  router_.Add("GET", "/watch", [&](Request, Responder responder) {
    auto stream = responder.StartStream(200, [] {
      Headers h;
      h.Set("Content-Type", "application/json");
      return h;
    }());
    producer = std::thread([&, stream] {
      for (int i = 0; i < 5; ++i) {
        stream->Write("{\"event\":" + std::to_string(i) + "}\n");
        std::unique_lock lock(mu);
        if (!cv.wait_for(lock, 5s, [&] { return seen > i; })) break;
      }
      stream->Close();
    });
  });
  StartServer();
  Client client;
  std::vector<std::string> lines;
  ClientRequest req;
  req.url = Url("/watch");
  auto r = client.StreamLines(req, [&](std::string_view line) {
    lines.emplace_back(line);
    std::lock_guard lock(mu);
    seen++;
    cv.notify_all();
    return true;
  });
  producer.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers.Get("Transfer-Encoding"), "chunked");
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[4], "{\"event\":4}");
}

TEST_F(ServerClientTest, ChunkedStreamReadWholeByDo) {
  router_.Add("GET", "/s", [](Request, Responder responder) {
    auto stream = responder.StartStream(200);
    for (int i = 0; i < 100; ++i) stream->Write(std::string(1000, static_cast<char>('a' + i % 26)));
    stream->Close();
  });
  StartServer();
  Client client;
  auto r = client.Get(Url("/s"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body.size(), 100000u);
  EXPECT_EQ(r->body.substr(99000, 3), "vvv");
}

TEST_F(ServerClientTest, CancelledWatchIsNoticedByTheServer) {
  std::promise<void> peer_gone;
  std::shared_ptr<Stream> stream;
  router_.Add("GET", "/watch", [&](Request, Responder responder) {
    stream = responder.StartStream(200);
    stream->OnClose([&] { peer_gone.set_value(); });
    stream->Write("first\n");
  });
  StartServer({.io_threads = 1});
  Client client;
  CancelToken cancel;
  ClientRequest req;
  req.url = Url("/watch");
  int lines = 0;
  auto r = client.StreamLines(
      req,
      [&](std::string_view) {
        lines++;
        std::thread([&] {
          std::this_thread::sleep_for(50ms);
          cancel.Cancel();
        }).detach();
        return true;
      },
      &cancel);
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
  EXPECT_EQ(lines, 1);
  EXPECT_EQ(peer_gone.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(stream->closed());
  EXPECT_FALSE(stream->Write("late"));
}

TEST_F(ServerClientTest, StreamBookkeepingAfterTheEnd) {
  std::promise<std::shared_ptr<Stream>> started;
  router_.Add("GET", "/w", [&](Request, Responder responder) {
    EXPECT_FALSE(responder.answered());
    auto stream = responder.StartStream(200);
    EXPECT_TRUE(responder.answered());
    responder.Respond(Response::Text(500, "ignored: the stream answered first"));
    stream->Write("only\n");
    stream->Close();
    EXPECT_FALSE(stream->Write("after close"));
    started.set_value(stream);
  });
  StartServer();
  Client client;
  auto r = client.Get(Url("/w"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "only\n");
  auto stream = started.get_future().get();
  for (int i = 0; i < 100 && !stream->closed(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(stream->closed());
  EXPECT_EQ(stream->buffered_bytes(), 0u);
  bool ran = false;
  stream->OnClose([&] { ran = true; });  // already ended: runs at once
  EXPECT_TRUE(ran);
}

TEST_F(ServerClientTest, StoppingAStreamEarlyFromTheCallback) {
  router_.Add("GET", "/w", [](Request, Responder responder) {
    auto stream = responder.StartStream(200);
    stream->Write("a\nb\nc\n");
  });
  StartServer();
  Client client;
  ClientRequest req;
  req.url = Url("/w");
  std::vector<std::string> got;
  auto r = client.StreamLines(req, [&](std::string_view l) {
    got.emplace_back(l);
    return got.size() < 2;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(got, (std::vector<std::string>{"a", "b"}));
}

TEST_F(ServerClientTest, NonSuccessStreamBodyIsReturnedWhole) {
  router_.Add("GET", "/w", Sync([](const Request&) { return Response::Json(410, "{\"reason\":\"Expired\"}"); }));
  StartServer();
  Client client;
  ClientRequest req;
  req.url = Url("/w");
  int calls = 0;
  auto r = client.Stream(req, [&](std::string_view) {
    calls++;
    return true;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 410);
  EXPECT_EQ(r->body, "{\"reason\":\"Expired\"}");
  EXPECT_EQ(calls, 0);
}

TEST_F(ServerClientTest, DrainCompletesInFlightRequestThenStops) {
  std::promise<Responder> parked;
  router_.Add("GET", "/slow", [&](Request, Responder r) { parked.set_value(std::move(r)); });
  router_.Add("GET", "/fast", Sync([](const Request&) { return Response::Text(200, "fast"); }));
  StartServer();
  Client client;
  // An idle keep-alive connection, which the drain must close.
  ASSERT_TRUE(client.Get(Url("/fast")).ok());
  auto in_flight = std::async(std::launch::async, [&] {
    Client other;
    return other.Get(Url("/slow"));
  });
  Responder responder = parked.get_future().get();
  auto drained = std::async(std::launch::async, [&] { return server_->Drain(5s); });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(drained.wait_for(0s), std::future_status::timeout);  // still waiting for /slow
  responder.Respond(Response::Text(200, "finished"));
  auto r = in_flight.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "finished");
  EXPECT_EQ(r->headers.Get("Connection"), "close");
  EXPECT_TRUE(drained.get());
  EXPECT_LT(Connect(server_->port()), 0);  // no longer accepting
}

TEST_F(ServerClientTest, DrainEndsStreamsAndHonoursDeadline) {
  std::shared_ptr<Stream> stream;
  router_.Add("GET", "/watch", [&](Request, Responder r) {
    stream = r.StartStream(200);
    stream->Write("x\n");
  });
  std::vector<Responder> never;
  std::mutex mu;
  router_.Add("GET", "/never", [&](Request, Responder r) {
    std::lock_guard lock(mu);
    never.push_back(std::move(r));
  });
  StartServer();
  auto watch = std::async(std::launch::async, [&] {
    Client c;
    ClientRequest req;
    req.url = Url("/watch");
    int n = 0;
    return std::make_pair(c.StreamLines(req,
                                        [&](std::string_view) {
                                          n++;
                                          return true;
                                        }),
                          n);
  });
  auto stuck = std::async(std::launch::async, [&] {
    Client c;
    return c.Get(Url("/never"));
  });
  for (int i = 0; i < 200 && (server_->stats().requests < 2); ++i) std::this_thread::sleep_for(10ms);
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(server_->Drain(300ms));  // /never cannot finish in time
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  auto [w, lines] = watch.get();
  ASSERT_TRUE(w.ok()) << w.status().ToString();  // ended cleanly by the terminating chunk
  EXPECT_EQ(lines, 1);
  EXPECT_FALSE(stuck.get().ok());
  std::lock_guard lock(mu);
  never.clear();  // answering after Stop() is harmless
}

TEST_F(ServerClientTest, HeadHasLengthButNoBody) {
  router_.Add("HEAD", "/h", Sync([](const Request&) { return Response::Text(200, "twelve bytes"); }));
  StartServer();
  int fd = Connect(server_->port());
  SendAll(fd, "HEAD /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string got = ReceiveUntil(fd, 2s);
  EXPECT_NE(got.find("Content-Length: 12\r\n"), std::string::npos) << got;
  EXPECT_TRUE(got.ends_with("\r\n\r\n")) << got;
  ::close(fd);
}

TEST_F(ServerClientTest, InvalidResponseHeaderBecomes500) {
  router_.Add("GET", "/bad", Sync([](const Request&) {
                Response r = Response::Text(200, "x");
                r.headers.Set("X-Injected", "a\r\nSet-Cookie: evil=1");
                return r;
              }));
  StartServer();
  Client client;
  auto r = client.Get(Url("/bad"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 500);
  EXPECT_FALSE(r->headers.Has("Set-Cookie"));
}

TEST_F(ServerClientTest, MetricsEndpointAndCounters) {
  router_.Add("GET", "/metrics", MetricsHandler());
  router_.Add("GET", "/x", Sync([](const Request&) { return Response::Text(200, "x"); }));
  StartServer({.metrics_label = "unit_test"});
  Client client;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client.Get(Url("/x")).ok());
  auto r = client.Get(Url("/metrics"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->headers.Get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r->body.find("http_requests_total{code=\"200\",method=\"GET\",server=\"unit_test\"} 3"), std::string::npos)
      << r->body;
  EXPECT_NE(r->body.find("http_request_duration_seconds_count{server=\"unit_test\"} 3"), std::string::npos);
}

TEST_F(ServerClientTest, StartFailsClearlyWhenPortIsTaken) {
  StartServer();
  Server second({.address = "127.0.0.1", .port = server_->port(), .io_threads = 1}, Echo());
  Status s = second.Start();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("cannot listen"), std::string::npos);
  Server bad({.address = "not-an-ip", .io_threads = 1}, Echo());
  EXPECT_EQ(bad.Start().code(), StatusCode::kInvalidArgument);
}

TEST_F(ServerClientTest, StalePooledConnectionIsReplaced) {
  router_.Add("GET", "/", Sync([](const Request&) { return Response::Text(200, "ok"); }));
  StartServer({.idle_timeout = 100ms});
  Client client;
  ASSERT_TRUE(client.Get(Url("/")).ok());
  std::this_thread::sleep_for(300ms);  // the server closes the idle connection
  auto r = client.Get(Url("/"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(client.stats().connections_opened, 2u);
}

}  // namespace
}  // namespace mf::http
