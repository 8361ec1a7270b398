// Continue tokens and the list paging parameters.
#include "tools/local/apiserver/list_pagination.h"

#include <gtest/gtest.h>

namespace mf::local {
namespace {

TEST(ContinueTokenTest, RoundTripsNamespacedAndClusterScopedKeys) {
  for (const ContinueToken& token : {ContinueToken{42, "default", "pod-1"}, ContinueToken{7, "", "node-a"},
                                     ContinueToken{-1, "kube-system", "x"}}) {
    std::string text = EncodeContinueToken(token);
    EXPECT_EQ(text.find_first_of("+/="), std::string::npos) << text;  // base64url, unpadded
    auto back = DecodeContinueToken(text);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->resource_version, token.resource_version);
    EXPECT_EQ(back->ns, token.ns);
    EXPECT_EQ(back->name, token.name);
  }
}

TEST(ContinueTokenTest, HasKubeApiserversShape) {
  // {"rv":42,"start":"default/pod-1\u0000","v":"meta.k8s.io/v1"}, as kube-apiserver encodes it.
  auto token = DecodeContinueToken(
      "eyJydiI6NDIsInN0YXJ0IjoiZGVmYXVsdC9wb2QtMVx1MDAwMCIsInYiOiJtZXRhLms4cy5pby92MSJ9");
  ASSERT_TRUE(token.ok()) << token.status().ToString();
  EXPECT_EQ(token->resource_version, 42);
  EXPECT_EQ(token->ns, "default");
  EXPECT_EQ(token->name, "pod-1");
}

TEST(ContinueTokenTest, RefusesTokensWeDidNotIssue) {
  auto encode = [](const std::string& json_text) {
    static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string out;
    size_t i = 0;
    for (; i + 3 <= json_text.size(); i += 3) {
      uint32_t v = (uint8_t(json_text[i]) << 16) | (uint8_t(json_text[i + 1]) << 8) | uint8_t(json_text[i + 2]);
      for (int s : {18, 12, 6, 0}) out.push_back(kAlphabet[(v >> s) & 63]);
    }
    if (size_t rest = json_text.size() - i; rest > 0) {
      uint32_t v = uint8_t(json_text[i]) << 16 | (rest == 2 ? uint8_t(json_text[i + 1]) << 8 : 0);
      out.push_back(kAlphabet[(v >> 18) & 63]);
      out.push_back(kAlphabet[(v >> 12) & 63]);
      if (rest == 2) out.push_back(kAlphabet[(v >> 6) & 63]);
    }
    return out;
  };
  for (const std::string& bad : {std::string("!!!"), std::string("a"), encode("[1]"), encode("not json"),
                                 encode(R"({"v":"meta.k8s.io/v2","rv":1,"start":"a\u0000"})"),
                                 encode(R"({"v":"meta.k8s.io/v1","rv":0,"start":"a\u0000"})"),
                                 encode(R"({"v":"meta.k8s.io/v1","rv":-5,"start":"a\u0000"})"),
                                 encode(R"({"v":"meta.k8s.io/v1","rv":"1","start":"a\u0000"})"),
                                 encode(R"({"v":"meta.k8s.io/v1","rv":1,"start":"a"})"),
                                 encode(R"({"v":"meta.k8s.io/v1","rv":1,"start":"\u0000"})"),
                                 encode(R"({"v":"meta.k8s.io/v1","rv":1,"start":"/a\u0000"})"),
                                 encode(R"({"v":"meta.k8s.io/v1","rv":1,"start":"a/b/c\u0000"})"),
                                 encode(R"({"v":"meta.k8s.io/v1","rv":1})")}) {
    auto token = DecodeContinueToken(bad);
    EXPECT_EQ(token.status().code(), StatusCode::kFailedPrecondition) << bad;
    EXPECT_EQ(token.status().message().rfind("continue key is not valid", 0), 0u) << token.status().message();
  }
}

TEST(ListPagingTest, ReadsLimitContinueAndExactVersions) {
  auto none = ParseListPaging({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->limit, 0u);
  EXPECT_FALSE(none->continue_from);
  EXPECT_EQ(ParseListPaging({{"limit", "500"}})->limit, 500u);
  EXPECT_EQ(ParseListPaging({{"limit", "-3"}})->limit, 0u);  // <= 0: no limit
  EXPECT_FALSE(ParseListPaging({{"limit", "many"}}).ok());
  std::string token = EncodeContinueToken({9, "default", "a"});
  auto cont = ParseListPaging({{"limit", "2"}, {"continue", token}});
  ASSERT_TRUE(cont.ok());
  EXPECT_EQ(cont->continue_from->resource_version, 9);
  EXPECT_EQ(ParseListPaging({{"continue", token}, {"resourceVersion", "5"}}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_TRUE(ParseListPaging({{"continue", token}, {"resourceVersion", "0"}}).ok());
  EXPECT_EQ(ParseListPaging({{"resourceVersion", "12"}, {"resourceVersionMatch", "Exact"}})->exact_resource_version, 12u);
  EXPECT_EQ(ParseListPaging({{"resourceVersion", "12"}})->exact_resource_version, 0u);
  EXPECT_EQ(ParseListPaging({{"resourceVersion", "12"}})->min_resource_version, 12u);
  EXPECT_EQ(ParseListPaging({{"resourceVersion", "12"}, {"resourceVersionMatch", "NotOlderThan"}})->min_resource_version, 12u);
  EXPECT_EQ(ParseListPaging({{"resourceVersion", "0"}})->min_resource_version, 0u);
  EXPECT_FALSE(ParseListPaging({{"resourceVersion", "twelve"}}).ok());
  EXPECT_FALSE(ParseListPaging({{"resourceVersion", "0"}, {"resourceVersionMatch", "Exact"}}).ok());
  EXPECT_FALSE(ParseListPaging({{"resourceVersionMatch", "Exact"}}).ok());
  EXPECT_FALSE(ParseListPaging({{"resourceVersion", "3"}, {"resourceVersionMatch", "Sometimes"}}).ok());
}

TEST(ListPagingTest, TooLargeVersionStatusIsA504Timeout) {
  auto status = ResourceVersionTooLargeStatus(50, 40);
  EXPECT_EQ(status["code"], 504);
  EXPECT_EQ(status["reason"], "Timeout");
  EXPECT_EQ(status["message"], "Too large resource version: 50, current: 40");
  EXPECT_EQ(status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
}

TEST(ListPagingTest, ExpiredStatusCarriesAnInconsistentToken) {
  auto status = ExpiredContinueStatus({9, "default", "a"});
  EXPECT_EQ(status["code"], 410);
  EXPECT_EQ(status["reason"], "Expired");
  auto next = DecodeContinueToken(status["metadata"]["continue"].get<std::string>());
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->resource_version, -1);
  EXPECT_EQ(next->name, "a");
}

}  // namespace
}  // namespace mf::local
