// Log options and tails of the kubelet API's container logs (tools/local/kubelet_api/container_log.h).
#include "tools/local/kubelet_api/container_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace mf::local {
namespace {

TEST(LogOptionsTest, ParsesTheApiServersQuery) {
  auto options = ParseLogOptions(ParseQuery("follow=true&tailLines=10&limitBytes=500&stream=All"));
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_TRUE(options->follow);
  EXPECT_FALSE(options->previous);
  EXPECT_EQ(options->tail_lines, 10);
  EXPECT_EQ(options->limit_bytes, 500);

  options = ParseLogOptions(ParseQuery("previous=true&tail=3"));
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->previous);
  EXPECT_EQ(options->tail_lines, 3);
  options = ParseLogOptions(ParseQuery("tail=all"));
  ASSERT_TRUE(options.ok());
  EXPECT_FALSE(options->tail_lines.has_value());
}

TEST(LogOptionsTest, RefusesWhatRawLogsCannotAnswer) {
  struct Case {
    const char* query;
    const char* message_part;
  };
  const Case cases[] = {
      {"timestamps=true", "timestamps"},
      {"sinceSeconds=10", "sinceSeconds"},
      {"sinceTime=2026-01-01T00:00:00Z", "sinceTime"},
      {"stream=Stdout", "stream=Stdout"},
      {"tailLines=-1", "tailLines"},
      {"tailLines=ten", "tailLines"},
      {"limitBytes=0", "limitBytes"},
      {"follow=maybe", "follow"},
  };
  for (const auto& c : cases) {
    auto options = ParseLogOptions(ParseQuery(c.query));
    ASSERT_FALSE(options.ok()) << c.query;
    EXPECT_EQ(options.status().code(), StatusCode::kInvalidArgument) << c.query;
    EXPECT_NE(options.status().message().find(c.message_part), std::string::npos) << options.status().message();
  }
}

class TailOffsetTest : public ::testing::Test {
 protected:
  uint64_t Tail(const std::string& content, int64_t lines) {
    const std::string path = ::testing::TempDir() + "/tail_offset_test.log";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
    const int fd = open(path.c_str(), O_RDONLY);
    auto offset = TailOffset(fd, content.size(), lines);
    close(fd);
    std::remove(path.c_str());
    EXPECT_TRUE(offset.ok());
    return offset.ok() ? *offset : 0;
  }
};

TEST_F(TailOffsetTest, FindsTheLastLines) {
  EXPECT_EQ(Tail("a\nb\nc\n", 1), 4u);
  EXPECT_EQ(Tail("a\nb\nc\n", 2), 2u);
  EXPECT_EQ(Tail("a\nb\nc\n", 3), 0u);
  EXPECT_EQ(Tail("a\nb\nc\n", 10), 0u);
  EXPECT_EQ(Tail("a\nb\nc\n", 0), 6u);
  EXPECT_EQ(Tail("a\nb\npartial", 1), 4u);  // an unterminated last line is a line
  EXPECT_EQ(Tail("a\n\n\n", 2), 2u);        // empty lines count
  EXPECT_EQ(Tail("", 5), 0u);
}

TEST_F(TailOffsetTest, WorksAcrossReadBlocks) {
  std::string content;
  for (int i = 0; i < 20000; ++i) content += "line " + std::to_string(i) + "\n";
  const uint64_t offset = Tail(content, 3);
  EXPECT_EQ(content.substr(offset), "line 19997\nline 19998\nline 19999\n");
}

}  // namespace
}  // namespace mf::local
