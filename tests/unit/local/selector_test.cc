#include "tools/local/store/selector.h"

#include <gtest/gtest.h>

namespace mf::local {
namespace {

using json = nlohmann::json;

TEST(LabelSelectorTest, MatchesEveryOperator) {
  json labels = {{"app", "web"}, {"tier", "front"}, {"canary", "true"}};
  auto matches = [&](const char* text) {
    auto s = LabelSelector::Parse(text);
    EXPECT_TRUE(s.ok()) << text << ": " << s.status().ToString();
    return s.ok() && s->Matches(labels);
  };
  EXPECT_TRUE(matches(""));
  EXPECT_TRUE(matches("app=web"));
  EXPECT_TRUE(matches("app==web,tier=front"));
  EXPECT_FALSE(matches("app=db"));
  EXPECT_TRUE(matches("app!=db"));
  EXPECT_FALSE(matches("app!=web"));
  EXPECT_TRUE(matches("tier in (front, back)"));
  EXPECT_FALSE(matches("tier notin (front,back)"));
  EXPECT_TRUE(matches("missing notin (x)"));
  EXPECT_TRUE(matches("canary"));
  EXPECT_FALSE(matches("!canary"));
  EXPECT_TRUE(matches("!missing,app in (web),tier"));
}

TEST(LabelSelectorTest, RejectsMalformedSelectors) {
  for (const char* bad : {"app in (a", "app in ()", "app=web,,tier=x", "app bogus (x)", "=x", "app=a b"}) {
    EXPECT_FALSE(LabelSelector::Parse(bad).ok()) << bad;
  }
}

TEST(LabelSelectorTest, FromObjectCombinesMatchLabelsAndExpressions) {
  auto s = LabelSelector::FromObject(json::parse(R"({"matchLabels":{"app":"web"},
      "matchExpressions":[{"key":"tier","operator":"In","values":["front"]}]})"));
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->Matches({{"app", "web"}, {"tier", "front"}}));
  EXPECT_FALSE(s->Matches({{"app", "web"}, {"tier", "back"}}));
  EXPECT_FALSE(LabelSelector::FromObject(json::parse(R"({"matchExpressions":[{"key":"a","operator":"In"}]})")).ok());
}

TEST(FieldSelectorTest, MatchesDottedPaths) {
  json pod = {{"metadata", {{"name", "p1"}, {"namespace", "ns"}}},
              {"spec", {{"nodeName", "local"}}},
              {"status", {{"phase", "Running"}}}};
  auto matches = [&](const char* text) {
    auto s = FieldSelector::Parse(text);
    EXPECT_TRUE(s.ok()) << text;
    return s.ok() && s->Matches(pod);
  };
  EXPECT_TRUE(matches("metadata.name=p1"));
  EXPECT_TRUE(matches("status.phase==Running,spec.nodeName=local"));
  EXPECT_FALSE(matches("status.phase!=Running"));
  EXPECT_TRUE(matches("spec.schedulerName="));  // missing compares as ""
  EXPECT_FALSE(FieldSelector::Parse("metadata.name").ok());
  EXPECT_FALSE(FieldSelector::Parse("metadata..name=x").ok());
}

}  // namespace
}  // namespace mf::local
