#include "common/logging.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace mf::log {
namespace {

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override { CaptureForTest(&out_); }
  void TearDown() override {
    CaptureForTest(nullptr);
    SetJson(false);
    SetLevel(Level::kInfo);
  }
  std::string out_;
};

TEST_F(LoggingTest, TextLineCarriesFieldsAndQuotesWhenNeeded) {
  Info("model loaded", {{"model", "digits"}, {"path", "/a b"}});
  EXPECT_NE(out_.find(" INFO model loaded model=digits path=\"/a b\"\n"), std::string::npos) << out_;
}

TEST_F(LoggingTest, JsonLinesIncludeRequestId) {
  SetJson(true);
  {
    RequestIdScope scope("abc123");
    Warning("slow", {{"ms", "12"}});
  }
  Info("after");
  auto first = nlohmann::json::parse(out_.substr(0, out_.find('\n')));
  EXPECT_EQ(first["level"], "warning");
  EXPECT_EQ(first["msg"], "slow");
  EXPECT_EQ(first["request_id"], "abc123");
  EXPECT_EQ(first["ms"], "12");
  auto second = nlohmann::json::parse(out_.substr(out_.find('\n') + 1));
  EXPECT_FALSE(second.contains("request_id"));
}

TEST_F(LoggingTest, LevelFilters) {
  SetLevel(Level::kWarning);
  Info("hidden");
  Error("shown");
  EXPECT_EQ(out_.find("hidden"), std::string::npos);
  EXPECT_NE(out_.find("shown"), std::string::npos);
  Level l;
  EXPECT_TRUE(ParseLevel("debug", &l));
  EXPECT_EQ(l, Level::kDebug);
  EXPECT_FALSE(ParseLevel("loud", &l));
}

TEST_F(LoggingTest, RequestIdsAreDistinctSixteenHexDigits) {
  EXPECT_NE(NewRequestId(), NewRequestId());
  for (int i = 0; i < 100; ++i) {
    const std::string id = NewRequestId();
    EXPECT_EQ(id.size(), 16u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
  }
}

}  // namespace
}  // namespace mf::log
