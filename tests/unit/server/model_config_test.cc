#include "server/repository/model_config.h"

#include <gtest/gtest.h>

#include "server/repository/version_scanner.h"

namespace mf::server {
namespace {

TEST(SelectVersionsTest, Table) {
  const std::set<int64_t> disk = {1, 2, 5, 9};
  struct Case {
    VersionPolicy policy;
    std::set<int64_t> want;
  } cases[] = {
      {VersionPolicy::Latest(1), {9}},           {VersionPolicy::Latest(2), {5, 9}},
      {VersionPolicy::Latest(10), {1, 2, 5, 9}}, {VersionPolicy::All(), {1, 2, 5, 9}},
      {VersionPolicy::Specific({2, 3}), {2}},    {VersionPolicy::Specific({7}), {}},
  };
  for (const Case& c : cases) EXPECT_EQ(SelectVersions(c.policy, disk), c.want);
  EXPECT_TRUE(SelectVersions(VersionPolicy::Latest(1), {}).empty());
}

TEST(ValidateModelConfigTest, RefusesBadConfigs) {
  ModelConfig good{"digits", "/models/digits", VersionPolicy::Latest(1), {{"stable", 1}}};
  EXPECT_TRUE(ValidateModelConfig(good).ok());

  auto with = [&](auto edit) {
    ModelConfig c = good;
    edit(c);
    return ValidateModelConfig(c);
  };
  EXPECT_EQ(with([](ModelConfig& c) { c.name = ""; }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ModelConfig& c) { c.name = "a/b"; }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ModelConfig& c) { c.base_path = ""; }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ModelConfig& c) { c.policy = VersionPolicy::Latest(0); }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ModelConfig& c) { c.policy = VersionPolicy::Specific({}); }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ModelConfig& c) { c.policy = VersionPolicy::Specific({-1}); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ModelConfig& c) { c.version_labels = {{"", 1}}; }).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](ModelConfig& c) { c.version_labels = {{"x", -2}}; }).code(), StatusCode::kInvalidArgument);
  Status s = with([](ModelConfig& c) { c.policy = VersionPolicy::Latest(0); });
  EXPECT_NE(s.message().find("num_versions"), std::string::npos) << s.message();
}

TEST(ParseVersionDirNameTest, Table) {
  struct Case {
    const char* name;
    bool ok;
    int64_t version;
  } cases[] = {
      {"1", true, 1},
      {"0", true, 0},
      {"0042", true, 42},
      {"9223372036854775807", true, INT64_MAX},
      {"9223372036854775808", false, 0},
      {"", false, 0},
      {"-1", false, 0},
      {"1.partial", false, 0},
      {"tmp", false, 0},
      {" 1", false, 0},
      {"99999999999999999999", false, 0},
  };
  for (const Case& c : cases) {
    int64_t v = -7;
    EXPECT_EQ(ParseVersionDirName(c.name, &v), c.ok) << c.name;
    if (c.ok) {
      EXPECT_EQ(v, c.version) << c.name;
    }
  }
}

}  // namespace
}  // namespace mf::server
