#include "http/message.h"

#include <gtest/gtest.h>

#include "http/body_codec.h"
#include "http/url.h"

namespace mf::http {
namespace {

TEST(HeadersTest, CaseInsensitiveGetSetRemove) {
  Headers h;
  h.Add("Content-Type", "text/plain");
  h.Add("Set-Cookie", "a=1");
  h.Add("set-cookie", "b=2");
  EXPECT_EQ(h.Get("content-type"), "text/plain");
  EXPECT_FALSE(h.Get("missing").has_value());
  h.Set("SET-COOKIE", "c=3");
  EXPECT_EQ(h.fields().size(), 2u);
  EXPECT_EQ(h.Get("Set-Cookie"), "c=3");
  h.Remove("content-TYPE");
  EXPECT_FALSE(h.Has("Content-Type"));
}

TEST(RequestTest, PathAndQuery) {
  Request r;
  r.target = "/v1/models/m:predict?x=1&y=2";
  EXPECT_EQ(r.path(), "/v1/models/m:predict");
  EXPECT_EQ(r.query(), "x=1&y=2");
  r.target = "/healthz";
  EXPECT_EQ(r.query(), "");
}

TEST(ResponseTest, FromStatusEscapesAndMapsCode) {
  Response r = Response::FromStatus(NotFound("model \"m\"\nmissing"));
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.body, "{\"error\": \"model \\\"m\\\"\\nmissing\"}");
  EXPECT_EQ(r.headers.Get("Content-Type"), "application/json");
}

TEST(UrlTest, ParsesHostsPortsAndTargets) {
  auto u = ParseUrl("https://10.0.0.1:6443/api/v1/pods?watch=1");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "10.0.0.1");
  EXPECT_EQ(u->port, 6443);
  EXPECT_EQ(u->target, "/api/v1/pods?watch=1");
  EXPECT_EQ(u->HostHeader(), "10.0.0.1:6443");

  u = ParseUrl("http://example.com");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->target, "/");
  EXPECT_EQ(u->HostHeader(), "example.com");

  u = ParseUrl("http://[::1]:8080?q#frag");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->target, "/?q");
  EXPECT_EQ(u->HostHeader(), "[::1]:8080");
}

TEST(UrlTest, RejectsBadUrlsWithClearErrors) {
  for (const char* bad : {"ftp://x/", "http://", "http://host:0/", "http://host:99999/", "http://host:8x/",
                          "http://user:pw@host/", "http://[::1/", "http://host/a b"}) {
    auto u = ParseUrl(bad);
    EXPECT_FALSE(u.ok()) << bad;
    EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(BodyCodecTest, GzipRoundTripAndLimits) {
  std::string data(100000, 'a');
  for (size_t i = 0; i < data.size(); i += 7) data[i] = static_cast<char>('a' + i % 26);
  std::string gz = GzipCompress(data);
  EXPECT_LT(gz.size(), data.size());
  std::string out;
  EXPECT_EQ(Inflate(gz, data.size(), &out), InflateResult::kOk);
  EXPECT_EQ(out, data);
  EXPECT_EQ(Inflate(gz, data.size() - 1, &out), InflateResult::kTooLarge);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(Inflate(gz.substr(0, gz.size() / 2), data.size(), &out), InflateResult::kCorrupt);
  EXPECT_EQ(Inflate("not gzip at all", 1000, &out), InflateResult::kCorrupt);
  EXPECT_EQ(Inflate(gz + "trailing", data.size(), &out), InflateResult::kCorrupt);
}

TEST(BodyCodecTest, BombIsStoppedAtTheLimit) {
  std::string zeros(64 << 20, '\0');
  std::string gz = GzipCompress(zeros);
  ASSERT_LT(gz.size(), 128u * 1024);
  std::string out;
  EXPECT_EQ(Inflate(gz, 1 << 20, &out), InflateResult::kTooLarge);
}

}  // namespace
}  // namespace mf::http
