// The server's request-reading path without sockets: Beast's parser under our limits, fed in
// arbitrary pieces, plus body decoding. Also built with ASan+UBSan (http_wire_sanitized_test).
#include "http/wire.h"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>

#include "http/body_codec.h"

namespace mf::http::wire {
namespace {

using Progress = RequestReader::Progress;

struct Outcome {
  std::vector<Request> requests;
  int rejected_status = 0;
  std::string rejection;
};

// Feeds `bytes` `step` bytes at a time, as a socket might deliver them.
Outcome Read(std::string_view bytes, size_t step, const Limits& limits = {}) {
  Outcome out;
  RequestReader reader(limits);
  reader.Reset();
  boost::beast::flat_buffer buffer;
  for (size_t offset = 0; offset < bytes.size();) {
    size_t n = std::min(step, bytes.size() - offset);
    auto dst = buffer.prepare(n);
    std::memcpy(dst.data(), bytes.data() + offset, n);
    buffer.commit(n);
    offset += n;
    for (bool more = true; more;) {
      switch (reader.Feed(buffer)) {
        case Progress::kNeedMore:
          more = false;
          break;
        case Progress::kHeaderDone:
          break;
        case Progress::kRejected:
          out.rejected_status = reader.rejection().status;
          out.rejection = reader.rejection().message;
          return out;
        case Progress::kMessageDone: {
          Request r;
          if (auto rejected = ToRequest(reader.parser().release(), limits, &r)) {
            out.rejected_status = rejected->status;
            out.rejection = rejected->message;
            return out;
          }
          out.requests.push_back(std::move(r));
          reader.Reset();
          break;
        }
      }
    }
  }
  return out;
}

TEST(RequestReaderTest, SameResultWhateverTheReadSizes) {
  const std::string wire =
      "POST /v1/models/m:predict?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\nX-Request-Id: r1\r\n\r\n"
      "hello world"
      "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n"
      "PUT /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nchunk\r\n3\r\ned!\r\n0\r\n\r\n";
  for (size_t step : {1ul, 2ul, 3ul, 7ul, 64ul, 4096ul}) {
    Outcome o = Read(wire, step);
    ASSERT_EQ(o.rejected_status, 0) << o.rejection;
    ASSERT_EQ(o.requests.size(), 3u) << "step " << step;
    EXPECT_EQ(o.requests[0].method, "POST");
    EXPECT_EQ(o.requests[0].path(), "/v1/models/m:predict");
    EXPECT_EQ(o.requests[0].body, "hello world");
    EXPECT_EQ(o.requests[0].headers.Get("x-request-id"), "r1");
    EXPECT_EQ(o.requests[1].target, "/healthz");
    EXPECT_EQ(o.requests[2].body, "chunked!");
  }
}

TEST(RequestReaderTest, LimitsGive431And413) {
  Limits small{.max_header_bytes = 256, .max_body_bytes = 16};
  Outcome o = Read("GET / HTTP/1.1\r\nX: " + std::string(1000, 'a') + "\r\n\r\n", 100, small);
  EXPECT_EQ(o.rejected_status, 431);
  o = Read("POST / HTTP/1.1\r\nContent-Length: 17\r\n\r\n", 100, small);
  EXPECT_EQ(o.rejected_status, 413);  // refused from the header, before any body byte
  EXPECT_NE(o.rejection.find("limit of 16 bytes"), std::string::npos);
  o = Read("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n" + std::string(32, 'b') + "\r\n0\r\n\r\n", 5,
           small);
  EXPECT_EQ(o.rejected_status, 413);  // chunked bodies are counted as they arrive
}

TEST(RequestReaderTest, GzipBodyIsInflatedAndEncodingHeaderDropped) {
  std::string plain(5000, 'q');
  std::string gz = GzipCompress(plain);
  Outcome o = Read(
      "POST / HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: " + std::to_string(gz.size()) + "\r\n\r\n" + gz,
      1000, {.max_body_bytes = 8000});
  ASSERT_EQ(o.rejected_status, 0) << o.rejection;
  ASSERT_EQ(o.requests.size(), 1u);
  EXPECT_EQ(o.requests[0].body, plain);
  EXPECT_FALSE(o.requests[0].headers.Has("Content-Encoding"));
  EXPECT_EQ(o.requests[0].headers.Get("Content-Length"), "5000");

  o = Read(
      "POST / HTTP/1.1\r\nContent-Encoding: gzip\r\nContent-Length: " + std::to_string(gz.size()) + "\r\n\r\n" + gz,
      1000, {.max_body_bytes = 4000});
  EXPECT_EQ(o.rejected_status, 413);
}

TEST(RequestReaderTest, MalformedAndUnsupportedInput) {
  EXPECT_EQ(Read("GARBAGE\r\n\r\n", 4).rejected_status, 400);
  EXPECT_EQ(Read("GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 64).rejected_status, 400);
  EXPECT_EQ(Read("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Encoding: br\r\n\r\nabc", 64).rejected_status, 415);
  EXPECT_EQ(Read("POST / HTTP/1.1\r\nContent-Length: 3\r\nExpect: teapot\r\n\r\nabc", 64).rejected_status, 417);
  EXPECT_EQ(Read("GET http://evil/ HTTP/1.1\r\n\r\n", 64).rejected_status, 400);
}

TEST(RequestReaderTest, ExpectContinueIsReportedBeforeTheBody) {
  RequestReader reader({});
  reader.Reset();
  boost::beast::flat_buffer buffer;
  std::string head = "POST / HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n";
  auto dst = buffer.prepare(head.size());
  std::memcpy(dst.data(), head.data(), head.size());
  buffer.commit(head.size());
  EXPECT_EQ(reader.Feed(buffer), Progress::kHeaderDone);
  EXPECT_TRUE(reader.WantsContinue());
  EXPECT_EQ(reader.Feed(buffer), Progress::kNeedMore);
}

TEST(ResponseHeadTest, RejectsHeaderInjection) {
  EXPECT_TRUE(IsValidHeaderField("X-Ok", "value with spaces"));
  EXPECT_FALSE(IsValidHeaderField("X-Bad", "a\r\nInjected: 1"));
  EXPECT_FALSE(IsValidHeaderField("Bad Name", "v"));
  EXPECT_FALSE(IsValidHeaderField("", "v"));
  Response r = Response::Text(201, "x");
  std::string out;
  ASSERT_TRUE(AppendStatusAndHeaders(r, &out));
  EXPECT_EQ(out, "HTTP/1.1 201 Created\r\nContent-Type: text/plain; charset=utf-8\r\n");
  r.status = 42;
  EXPECT_FALSE(AppendStatusAndHeaders(r, &out));
}

}  // namespace
}  // namespace mf::http::wire
