// src/http2/h2_server_session.cc in memory: an nghttp2 client session and the server Session exchange
// bytes directly, no sockets, so limits that need precise interleaving can be checked.
#include "http2/h2_server_session.h"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstring>
#include <list>
#include <map>
#include <string>
#include <vector>

namespace mf::http2 {
namespace {

class Recorder final : public Session::Delegate {
 public:
  void OnRequest(int32_t stream_id, Request request) override { requests[stream_id] = std::move(request); }
  void OnStreamClosed(int32_t stream_id) override { closed.push_back(stream_id); }
  std::map<int32_t, Request> requests;
  std::vector<int32_t> closed;
};

// A client session whose requests carry `body`; the answer's status and body per stream.
class Client {
 public:
  Client() {
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_on_header_callback(
        callbacks, [](nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                      const uint8_t* value, size_t valuelen, uint8_t, void* self) {
          if (std::string_view(reinterpret_cast<const char*>(name), namelen) == ":status") {
            static_cast<Client*>(self)->status[frame->hd.stream_id] =
                std::string(reinterpret_cast<const char*>(value), valuelen);
          }
          return 0;
        });
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        callbacks, [](nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* self) {
          static_cast<Client*>(self)->body[id].append(reinterpret_cast<const char*>(data), len);
          return 0;
        });
    nghttp2_session_client_new(&session_, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
  }
  ~Client() { nghttp2_session_del(session_); }

  int32_t Post(const std::string& path, std::string body) {
    bodies_.push_back({std::move(body), 0});
    const std::string method = ":method", post = "POST", scheme = ":scheme", http = "http", p = ":path",
                      authority = ":authority", host = "test";
    auto nv = [](const std::string& n, const std::string& v) {
      return nghttp2_nv{(uint8_t*)n.data(), (uint8_t*)v.data(), n.size(), v.size(), NGHTTP2_NV_FLAG_NONE};
    };
    nghttp2_nv headers[] = {nv(method, post), nv(scheme, http), nv(p, path), nv(authority, host)};
    nghttp2_data_provider provider;
    provider.source.ptr = &bodies_.back();
    provider.read_callback = [](nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                                nghttp2_data_source* source, void*) -> ssize_t {
      auto* b = static_cast<PendingBody*>(source->ptr);
      size_t n = std::min(length, b->data.size() - b->offset);
      std::memcpy(buf, b->data.data() + b->offset, n);
      b->offset += n;
      if (b->offset == b->data.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    };
    return nghttp2_submit_request(session_, nullptr, headers, 4, &provider, nullptr);
  }

  // Moves bytes both ways until neither side has anything to send.
  void Exchange(Session& server) {
    for (int round = 0; round < 10000; ++round) {
      std::string to_server;
      const uint8_t* data = nullptr;
      for (ssize_t n; (n = nghttp2_session_mem_send(session_, &data)) > 0;) to_server.append((const char*)data, n);
      if (!to_server.empty()) {
        ASSERT_TRUE(server.Receive((const uint8_t*)to_server.data(), to_server.size()).ok());
      }
      std::string to_client;
      ASSERT_TRUE(server.Produce(&to_client, 1 << 30).ok());
      if (!to_client.empty()) {
        ASSERT_GE(nghttp2_session_mem_recv(session_, (const uint8_t*)to_client.data(), to_client.size()), 0);
      }
      if (to_server.empty() && to_client.empty()) return;
    }
    FAIL() << "the sessions never went quiet";
  }

  std::map<int32_t, std::string> status;
  std::map<int32_t, std::string> body;

 private:
  struct PendingBody {
    std::string data;
    size_t offset;
  };
  nghttp2_session* session_ = nullptr;
  std::list<PendingBody> bodies_;
};

TEST(Http2Session, DeliversCompleteRequestsAndSendsResponsesInParts) {
  Recorder recorder;
  Session server(SessionOptions{}, "peer:1", &recorder);
  Client client;
  int32_t id = client.Post("/echo", std::string(300000, 'b'));
  client.Exchange(server);
  ASSERT_EQ(recorder.requests.count(id), 1u);
  EXPECT_EQ(recorder.requests[id].method, "POST");
  EXPECT_EQ(recorder.requests[id].path, "/echo");
  EXPECT_EQ(recorder.requests[id].peer, "peer:1");
  EXPECT_EQ(recorder.requests[id].body.size(), 300000u);
  server.Send(id, {.status = 200, .data = "part one, "});
  client.Exchange(server);
  server.Send(id, {.data = "part two", .end = true, .trailers = {{"x-done", "yes"}}});
  client.Exchange(server);
  EXPECT_EQ(client.status[id], "200");
  EXPECT_EQ(client.body[id], "part one, part two");
  EXPECT_EQ(recorder.closed, std::vector<int32_t>{id});
  EXPECT_EQ(server.open_streams(), 0u);
  server.Send(id, {.data = "after the end"});  // ignored, not a crash
}

TEST(Http2Session, ConcurrentUploadsPastTheConnectionBufferAreRefused) {
  SessionOptions options;
  options.max_request_body_bytes = 1 << 20;
  options.max_buffered_request_bytes = 1 << 20;
  Recorder recorder;
  Session server(options, "peer:1", &recorder);
  Client client;
  // Each body fits the per-request limit; the two interleaved do not fit the connection's.
  int32_t first = client.Post("/a", std::string(700000, 'a'));
  int32_t second = client.Post("/b", std::string(700000, 'b'));
  client.Exchange(server);
  ASSERT_EQ(recorder.requests.size(), 2u);
  int refused = recorder.requests[first].body_too_large + recorder.requests[second].body_too_large;
  EXPECT_EQ(refused, 1);
  for (int32_t id : {first, second}) {
    const Request& r = recorder.requests[id];
    EXPECT_EQ(r.body.size(), r.body_too_large ? 0u : 700000u);
    server.Send(id, {.status = r.body_too_large ? 413 : 200, .end = true});
  }
  client.Exchange(server);
  EXPECT_EQ(client.status[first] == "413" ? client.status[second] : client.status[first], "200");
  EXPECT_EQ(server.open_streams(), 0u);
  // The buffer is free again: the same upload alone is accepted.
  int32_t third = client.Post("/c", std::string(700000, 'c'));
  client.Exchange(server);
  EXPECT_FALSE(recorder.requests[third].body_too_large);
}

TEST(Http2Session, GoawayEndsTheSessionOnceStreamsFinish) {
  Recorder recorder;
  Session server(SessionOptions{}, "peer:1", &recorder);
  Client client;
  int32_t id = client.Post("/x", "body");
  client.Exchange(server);
  server.Goaway();
  client.Exchange(server);
  EXPECT_TRUE(server.alive());  // the stream is still open
  server.Send(id, {.status = 200, .end = true});
  client.Exchange(server);
  EXPECT_FALSE(server.alive());
}

}  // namespace
}  // namespace mf::http2

// Raw frames against the session: what a misbehaving or unusual client sends.
namespace mf::http2 {
namespace {

struct Frame {
  uint8_t type;
  uint8_t flags;
  int32_t stream;
  std::string payload;
};

std::string RawFrame(uint8_t type, uint8_t flags, int32_t stream, std::string_view payload) {
  std::string out;
  const uint32_t n = static_cast<uint32_t>(payload.size());
  out += {char(n >> 16), char(n >> 8), char(n), char(type), char(flags)};
  out += {char(stream >> 24), char(stream >> 16), char(stream >> 8), char(stream)};
  out.append(payload);
  return out;
}

// HPACK for POST /x over http, :authority a (static entries and one literal, no Huffman), then
// `extra`, already encoded.
std::string PostBlock(std::string_view extra = {}) {
  return std::string(
             "\x83\x86\x04\x02/x\x01\x01"
             "a",
             9) +
         std::string(extra);
}

// A literal field without indexing, new name (RFC 7541 6.2.2), lengths under 127.
std::string Literal(std::string_view name, std::string_view value) {
  return std::string(1, '\x00') + char(name.size()) + std::string(name) + char(value.size()) + std::string(value);
}

class RawClient {
 public:
  explicit RawClient(SessionOptions options = {}) : server_(options, "peer:1", &recorder_) {
    EXPECT_TRUE(Send(std::string(kClientPreface) + RawFrame(frame::kSettings, 0, 0, "")).ok());
  }
  Status Send(const std::string& bytes) {
    return server_.Receive(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  // Everything the server wrote since the last call, as frames.
  std::vector<Frame> Read() {
    std::string out;
    EXPECT_TRUE(server_.Produce(&out, 1 << 30).ok());
    std::vector<Frame> frames;
    for (size_t at = 0; at + 9 <= out.size();) {
      const frame::Header h = frame::ParseHeader(reinterpret_cast<const uint8_t*>(out.data() + at));
      frames.push_back({h.type, h.flags, h.stream_id, out.substr(at + 9, h.length)});
      at += 9 + h.length;
    }
    return frames;
  }
  static bool Has(const std::vector<Frame>& frames, uint8_t type, int32_t stream, uint32_t code = ~0u) {
    return std::any_of(frames.begin(), frames.end(), [&](const Frame& f) {
      if (f.type != type || f.stream != stream) return false;
      if (code == ~0u) return true;
      const size_t at = type == frame::kGoaway ? 4 : 0;
      return f.payload.size() >= at + 4 &&
             frame::ReadU32(reinterpret_cast<const uint8_t*>(f.payload.data() + at)) == code;
    });
  }
  Session& server() { return server_; }
  Recorder& recorder() { return recorder_; }

 private:
  Recorder recorder_;
  Session server_;
};

TEST(Http2SessionFrames, PingIsAcknowledgedWithItsPayload) {
  RawClient client;
  client.Read();
  ASSERT_TRUE(client.Send(RawFrame(frame::kPing, 0, 0, "12345678")).ok());
  auto frames = client.Read();
  ASSERT_TRUE(RawClient::Has(frames, frame::kPing, 0));
  EXPECT_EQ(frames.back().flags, frame::kAck);
  EXPECT_EQ(frames.back().payload, "12345678");
}

TEST(Http2SessionFrames, MalformedRequestsAreResetAndTheConnectionLivesOn) {
  const std::pair<int32_t, std::string> malformed[] = {
      {1, Literal("X-Upper", "v")},          // uppercase name
      {3, Literal("connection", "close")},   // HTTP/1.1 hop field
      {5, Literal("te", "gzip")},            // te other than trailers
      {7, Literal("x", "a\nb")},             // newline in a value
      {9, Literal(":weird", "1")},           // unknown pseudo-header
      {11, Literal("content-length", "5")},  // but no body follows
  };
  RawClient client;
  for (const auto& [id, extra] : malformed) {
    ASSERT_TRUE(
        client.Send(RawFrame(frame::kHeaders, frame::kEndHeaders | frame::kEndStream, id, PostBlock(extra))).ok());
    EXPECT_TRUE(RawClient::Has(client.Read(), frame::kRstStream, id, kProtocolError)) << "stream " << id;
  }
  // No :path at all (static :method POST, :scheme http only).
  ASSERT_TRUE(client.Send(RawFrame(frame::kHeaders, frame::kEndHeaders | frame::kEndStream, 13, "\x83\x86")).ok());
  EXPECT_TRUE(RawClient::Has(client.Read(), frame::kRstStream, 13, kProtocolError));
  EXPECT_TRUE(client.recorder().requests.empty());
  ASSERT_TRUE(client.Send(RawFrame(frame::kHeaders, frame::kEndHeaders | frame::kEndStream, 15, PostBlock())).ok());
  ASSERT_EQ(client.recorder().requests.count(15), 1u);
  EXPECT_EQ(client.recorder().requests[15].path, "/x");
  EXPECT_TRUE(client.server().alive());
}

TEST(Http2SessionFrames, PaddedHeaderBlockAcrossContinuationsWithTrailers) {
  RawClient client;
  const std::string block = PostBlock(Literal("content-length", "2"));
  // PADDED (2 bytes of padding) and PRIORITY (5 bytes), the block split in three.
  std::string first =
      std::string(1, '\x02') + std::string("\x00\x00\x00\x00\x0f", 5) + block.substr(0, 4) + std::string(2, '\0');
  ASSERT_TRUE(client
                  .Send(RawFrame(frame::kHeaders, frame::kPadded | frame::kPriorityFlag, 1, first) +
                        RawFrame(frame::kContinuation, 0, 1, block.substr(4, 5)) +
                        RawFrame(frame::kContinuation, frame::kEndHeaders, 1, block.substr(9)) +
                        RawFrame(frame::kData, 0, 1, "hi") +
                        RawFrame(frame::kHeaders, frame::kEndHeaders | frame::kEndStream, 1, Literal("x-sum", "7")))
                  .ok());
  ASSERT_EQ(client.recorder().requests.count(1), 1u);
  const Request& r = client.recorder().requests[1];
  EXPECT_EQ(r.path, "/x");
  EXPECT_EQ(r.authority, "a");
  EXPECT_EQ(r.body, "hi");
  EXPECT_EQ(FindHeader(r.trailers, "x-sum"), "7");
}

TEST(Http2SessionFrames, InterruptedHeaderBlockEndsTheConnectionWithGoaway) {
  RawClient client;
  client.Read();
  Status status = client.Send(RawFrame(frame::kHeaders, 0, 1, PostBlock()) + RawFrame(frame::kPing, 0, 0, "12345678"));
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(RawClient::Has(client.Read(), frame::kGoaway, 0, kProtocolError));
  EXPECT_FALSE(client.server().alive());
}

// Padding and priority fields that do not fit their frame end the connection, each with the
// code RFC 9113 6.1 / 6.2 gives it.
TEST(Http2SessionFrames, MalformedPaddingOrPriorityEndsTheConnectionWithItsCode) {
  struct Case {
    const char* what;
    std::string frames;
    uint32_t code;
  };
  const std::string open = RawFrame(frame::kHeaders, frame::kEndHeaders, 1, PostBlock());
  const std::vector<Case> cases = {
      {"DATA padded without a pad length", open + RawFrame(frame::kData, frame::kPadded, 1, ""), kProtocolError},
      {"DATA padding as long as the frame", open + RawFrame(frame::kData, frame::kPadded, 1, std::string("\x04xyz", 4)),
       kProtocolError},
      {"HEADERS padded without a pad length", RawFrame(frame::kHeaders, frame::kPadded | frame::kEndHeaders, 1, ""),
       kFrameSizeError},
      {"HEADERS too short for its priority",
       RawFrame(frame::kHeaders, frame::kPriorityFlag | frame::kEndHeaders, 1, "abcd"), kFrameSizeError},
      {"HEADERS padding past the block",
       RawFrame(frame::kHeaders, frame::kPadded | frame::kEndHeaders, 1,
                std::string(1, char(PostBlock().size() + 1)) + PostBlock()),
       kProtocolError},
  };
  for (const Case& c : cases) {
    RawClient client;
    client.Read();
    EXPECT_FALSE(client.Send(c.frames).ok()) << c.what;
    EXPECT_TRUE(RawClient::Has(client.Read(), frame::kGoaway, 0, c.code)) << c.what;
  }
  // At the limits: padding that fills all but the pad length byte, and an exact priority.
  RawClient client;
  client.Read();
  const std::string block = PostBlock();
  EXPECT_TRUE(client
                  .Send(RawFrame(frame::kHeaders, frame::kPadded | frame::kPriorityFlag | frame::kEndHeaders, 1,
                                 std::string(1, '\x02') + std::string(5, '\0') + block + "pp") +
                        RawFrame(frame::kData, frame::kPadded | frame::kEndStream, 1, std::string("\x02xpp", 4)))
                  .ok());
  ASSERT_EQ(client.recorder().requests.count(1), 1u);
  EXPECT_EQ(client.recorder().requests[1].body, "x");
}

TEST(Http2SessionFrames, StreamsBeyondTheLimitAreRefused) {
  SessionOptions options;
  options.max_concurrent_streams = 1;
  RawClient client(options);
  const uint8_t flags = frame::kEndHeaders | frame::kEndStream;
  ASSERT_TRUE(
      client.Send(RawFrame(frame::kHeaders, flags, 1, PostBlock()) + RawFrame(frame::kHeaders, flags, 3, PostBlock()))
          .ok());
  EXPECT_TRUE(RawClient::Has(client.Read(), frame::kRstStream, 3, kRefusedStream));
  EXPECT_EQ(client.recorder().requests.size(), 1u);
  client.server().Send(1, {.status = 200, .end = true});  // frees the slot
  ASSERT_TRUE(client.Send(RawFrame(frame::kHeaders, flags, 5, PostBlock())).ok());
  EXPECT_EQ(client.recorder().requests.count(5), 1u);
}

TEST(Http2SessionFrames, ResponseBodyWaitsForThePeersWindow) {
  RawClient client;
  // SETTINGS_INITIAL_WINDOW_SIZE = 10: each stream may receive 10 bytes until updated.
  ASSERT_TRUE(client
                  .Send(RawFrame(frame::kSettings, 0, 0, std::string("\x00\x04\x00\x00\x00\x0a", 6)) +
                        RawFrame(frame::kHeaders, frame::kEndHeaders | frame::kEndStream, 1, PostBlock()))
                  .ok());
  client.Read();
  client.server().Send(1, {.status = 200, .data = std::string(25, 'z'), .end = true});
  std::string body;
  auto collect = [&](const std::vector<Frame>& frames) {
    for (const Frame& f : frames) {
      if (f.type == frame::kData) body += f.payload;
    }
  };
  collect(client.Read());
  EXPECT_EQ(body.size(), 10u);
  EXPECT_TRUE(client.server().output_blocked());
  ASSERT_TRUE(client.Send(RawFrame(frame::kWindowUpdate, 0, 1, std::string("\x00\x00\x00\x0a", 4))).ok());
  collect(client.Read());
  EXPECT_EQ(body.size(), 20u);
  ASSERT_TRUE(client.Send(RawFrame(frame::kWindowUpdate, 0, 1, std::string("\x00\x00\x01\x00", 4))).ok());
  auto last = client.Read();
  collect(last);
  EXPECT_EQ(body, std::string(25, 'z'));
  EXPECT_TRUE(std::any_of(last.begin(), last.end(), [](const Frame& f) { return (f.flags & frame::kEndStream) != 0; }));
  EXPECT_FALSE(client.server().output_blocked());
  EXPECT_EQ(client.server().open_streams(), 0u);
}

TEST(Http2SessionFrames, PeerThatOnlySendsPingsIsToldToCalmDown) {
  RawClient client;
  std::string pings;
  for (int i = 0; i < 1200; ++i) pings += RawFrame(frame::kPing, 0, 0, "12345678");
  EXPECT_FALSE(client.Send(pings).ok());
  EXPECT_TRUE(RawClient::Has(client.Read(), frame::kGoaway, 0, kEnhanceYourCalm));
}

TEST(Http2SessionFrames, FramesOnAStreamNeverOpenedAreAConnectionError) {
  RawClient client;
  EXPECT_FALSE(client.Send(RawFrame(frame::kData, 0, 7, "x")).ok());
  EXPECT_TRUE(RawClient::Has(client.Read(), frame::kGoaway, 0, kProtocolError));
}

}  // namespace
}  // namespace mf::http2

namespace mf::http2 {
namespace {

// CVE-2023-44487: each stream opened and reset at once frees its slot while the server may
// still work on its request. A burst of resets is fine; an endless stream of them gets GOAWAY.
TEST(Http2SessionFrames, ClientThatKeepsResettingStreamsIsToldToCalmDown) {
  RawClient client;
  const std::string cancel("\x00\x00\x00\x08", 4);  // CANCEL
  std::string burst;
  for (int32_t id = 1; id < 2 * 900; id += 2) {
    burst +=
        RawFrame(frame::kHeaders, frame::kEndHeaders, id, PostBlock()) + RawFrame(frame::kRstStream, 0, id, cancel);
  }
  ASSERT_TRUE(client.Send(burst).ok());  // 900 resets: within the burst
  client.Read();
  std::string more;
  for (int32_t id = 2 * 900 + 1; id < 2 * 1200; id += 2) {
    more += RawFrame(frame::kHeaders, frame::kEndHeaders, id, PostBlock()) + RawFrame(frame::kRstStream, 0, id, cancel);
  }
  EXPECT_FALSE(client.Send(more).ok());
  EXPECT_TRUE(RawClient::Has(client.Read(), frame::kGoaway, 0, kEnhanceYourCalm));
  EXPECT_TRUE(client.recorder().requests.empty());  // none ended: none was handed on
}

}  // namespace
}  // namespace mf::http2

namespace mf::http2 {
namespace {

// Reads end anywhere: inside a frame header, inside a payload, between frames.
TEST(Http2SessionFrames, RequestsSplitAtAnyByteArriveWhole) {
  std::string body;
  for (int i = 0; i < 40000; ++i) body.push_back(static_cast<char>('a' + i % 26));
  std::string bytes = RawFrame(frame::kHeaders, frame::kEndHeaders, 1, PostBlock());
  for (size_t at = 0; at < body.size(); at += 16384) {
    const std::string part = body.substr(at, 16384);
    bytes += RawFrame(frame::kData, at + part.size() == body.size() ? frame::kEndStream : 0, 1, part);
  }
  for (size_t piece : {size_t{1}, size_t{7}, size_t{9}, size_t{10}, size_t{16393}, size_t{65536}}) {
    RawClient client;
    for (size_t at = 0; at < bytes.size(); at += piece) ASSERT_TRUE(client.Send(bytes.substr(at, piece)).ok());
    ASSERT_EQ(client.recorder().requests.count(1), 1u) << "pieces of " << piece;
    EXPECT_EQ(client.recorder().requests[1].body, body) << "pieces of " << piece;
  }
}

}  // namespace
}  // namespace mf::http2
