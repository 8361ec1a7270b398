// pods/log over the local kubelet's files: option parsing, tailLines / limitBytes, and following
// a file that grows until the container stops.
#include "tools/local/apiserver/pod_log.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

namespace mf::local {
namespace {

using namespace std::chrono_literals;

class TempLog {
 public:
  TempLog() {
    path_ = std::filesystem::temp_directory_path() /
            ("pod_log_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++) + ".log");
    std::ofstream(path_).close();
  }
  ~TempLog() { std::filesystem::remove(path_); }
  void Append(const std::string& text) {
    std::ofstream out(path_, std::ios::app | std::ios::binary);
    out << text;
  }
  std::string path() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

std::string Initial(const std::string& content, int64_t tail, int64_t limit) {
  TempLog log;
  log.Append(content);
  auto file = LogFile::Open(log.path());
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  auto text = file->ReadInitial(tail, limit);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return *text;
}

TEST(PodLogOptionsTest, ParsesWhatKubectlSends) {
  auto o = ParsePodLogOptions({{"container", "app"}, {"follow", "true"}, {"tailLines", "10"}, {"limitBytes", "500"},
                               {"previous", "false"}, {"timestamps", "false"}});
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->container, "app");
  EXPECT_TRUE(o->follow);
  EXPECT_FALSE(o->previous);
  EXPECT_EQ(o->tail_lines, 10);
  EXPECT_EQ(o->limit_bytes, 500);
  auto defaults = ParsePodLogOptions({});
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->tail_lines, -1);
  EXPECT_EQ(defaults->limit_bytes, -1);
  EXPECT_FALSE(defaults->follow);
}

TEST(PodLogOptionsTest, RefusesBadValuesAndUnsupportedOptions) {
  auto negative = ParsePodLogOptions({{"tailLines", "-1"}});
  EXPECT_EQ(negative.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(negative.status().message().find("tailLines: Invalid value: -1"), std::string::npos);
  EXPECT_EQ(ParsePodLogOptions({{"limitBytes", "0"}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParsePodLogOptions({{"tailLines", "ten"}}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ParsePodLogOptions({{"tailLines", ""}}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(ParsePodLogOptions({{"follow", "yes please"}}).status().code(), StatusCode::kFailedPrecondition);
  auto timestamps = ParsePodLogOptions({{"timestamps", "true"}});
  EXPECT_EQ(timestamps.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(timestamps.status().message().find("not supported"), std::string::npos);
  EXPECT_FALSE(ParsePodLogOptions({{"sinceSeconds", "10"}}).ok());
  EXPECT_FALSE(ParsePodLogOptions({{"sinceTime", "2026-01-01T00:00:00Z"}}).ok());
}

TEST(LogFileTest, TailLinesCountsLinesLikeTheKubelet) {
  EXPECT_EQ(Initial("a\nb\nc\n", -1, -1), "a\nb\nc\n");
  EXPECT_EQ(Initial("a\nb\nc\n", 2, -1), "b\nc\n");
  EXPECT_EQ(Initial("a\nb\nc\n", 3, -1), "a\nb\nc\n");
  EXPECT_EQ(Initial("a\nb\nc\n", 10, -1), "a\nb\nc\n");
  EXPECT_EQ(Initial("a\nb\nc\n", 0, -1), "");
  EXPECT_EQ(Initial("a\nb\nc", 1, -1), "c");  // a final line without its newline is a line
  EXPECT_EQ(Initial("a\nb\nc", 2, -1), "b\nc");
  EXPECT_EQ(Initial("a\n\n", 1, -1), "\n");
  EXPECT_EQ(Initial("", 5, -1), "");
}

TEST(LogFileTest, TailLinesAcrossReadBlocks) {
  // Lines that straddle the 64 KiB blocks the backwards scan reads.
  std::string content;
  for (int i = 0; i < 30000; ++i) content += "line " + std::to_string(i) + "\n";
  std::string expected;
  for (int i = 30000 - 12345; i < 30000; ++i) expected += "line " + std::to_string(i) + "\n";
  EXPECT_EQ(Initial(content, 12345, -1), expected);
  EXPECT_EQ(Initial(content, -1, -1).size(), content.size());
}

TEST(LogFileTest, LimitBytesCapsFromTheStartOfTheSelectedPart) {
  EXPECT_EQ(Initial("hello\nworld\n", -1, 3), "hel");
  EXPECT_EQ(Initial("hello\nworld\n", 1, 3), "wor");
  EXPECT_EQ(Initial("hello\nworld\n", -1, 100), "hello\nworld\n");
}

TEST(LogFileTest, OpenReportsAMissingFileAsNotFound) {
  EXPECT_EQ(LogFile::Open("/nonexistent/dir/x.log").status().code(), StatusCode::kNotFound);
}

TEST(LogFileTest, ReadNewReturnsOnlyAppendedBytesAndFollowsARenamedFile) {
  TempLog log;
  log.Append("one\n");
  auto file = LogFile::Open(log.path());
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file->ReadInitial(-1, -1), "one\n");
  EXPECT_EQ(*file->ReadNew(1024), "");
  log.Append("two\n");
  EXPECT_EQ(*file->ReadNew(2), "tw");
  EXPECT_EQ(*file->ReadNew(1024), "o\n");
  // The kubelet renames the log to *.previous.log on a restart: the open instance is still read.
  std::string moved = log.path() + ".previous";
  std::filesystem::rename(log.path(), moved);
  { std::ofstream(moved, std::ios::app) << "three\n"; }
  EXPECT_EQ(*file->ReadNew(1024), "three\n");
  std::filesystem::remove(moved);
}

// An http::Stream that records what it is given.
class RecordingStream final : public http::Stream {
 public:
  bool Write(std::string chunk) override {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    text_ += chunk;
    return true;
  }
  void Close() override {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  bool closed() const override {
    std::lock_guard lock(mu_);
    return closed_;
  }
  size_t buffered_bytes() const override { return 0; }
  void OnClose(std::function<void()>) override {}
  std::string text() const {
    std::lock_guard lock(mu_);
    return text_;
  }

 private:
  mutable std::mutex mu_;
  std::string text_;
  bool closed_ = false;
};

bool WaitFor(const std::function<bool()>& predicate, std::chrono::milliseconds timeout = 5s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (predicate()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return predicate();
}

TEST(FollowLogTest, StreamsNewOutputAndEndsWithEverythingOnceTheContainerStops) {
  TempLog log;
  log.Append("before\n");
  auto file = LogFile::Open(log.path());
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(*file->ReadInitial(-1, -1), "before\n");
  auto stream = std::make_shared<RecordingStream>();
  std::atomic<bool> running{true};
  std::atomic<bool> stopping{false};
  std::thread follower([&, f = std::move(file).value()]() mutable {
    FollowLog(std::move(f), stream, [&] { return running.load(); }, stopping, {.poll_interval = 10ms}, 7);
  });
  log.Append("first\n");
  EXPECT_TRUE(WaitFor([&] { return stream->text() == "first\n"; })) << stream->text();
  EXPECT_FALSE(stream->closed());
  log.Append("second\n");
  log.Append("last words\n");  // written before the exit is observed: still sent
  running = false;
  follower.join();
  EXPECT_EQ(stream->text(), "first\nsecond\nlast words\n");
  EXPECT_TRUE(stream->closed());
}

TEST(FollowLogTest, EndsWhenTheClientGoesAwayOrTheServerStops) {
  TempLog log;
  auto stream = std::make_shared<RecordingStream>();
  std::atomic<bool> stopping{false};
  auto file = LogFile::Open(log.path());
  ASSERT_TRUE(file.ok());
  std::thread follower([&, f = std::move(file).value()]() mutable {
    FollowLog(std::move(f), stream, [] { return true; }, stopping, {.poll_interval = 10ms}, 0);
  });
  stream->Close();  // the peer hung up
  follower.join();

  auto stream2 = std::make_shared<RecordingStream>();
  auto file2 = LogFile::Open(log.path());
  ASSERT_TRUE(file2.ok());
  std::thread follower2([&, f = std::move(file2).value()]() mutable {
    FollowLog(std::move(f), stream2, [] { return true; }, stopping, {.poll_interval = 10ms}, 0);
  });
  stopping = true;
  follower2.join();
  EXPECT_TRUE(stream2->closed());
}

TEST(FollowLogTest, LimitBytesCountsTheInitialPartAndEndsTheStream) {
  TempLog log;
  auto file = LogFile::Open(log.path());
  ASSERT_TRUE(file.ok());
  auto stream = std::make_shared<RecordingStream>();
  std::atomic<bool> stopping{false};
  log.Append("0123456789");
  FollowLog(std::move(file).value(), stream, [] { return true; }, stopping, {.poll_interval = 10ms, .limit_bytes = 6}, 2);
  EXPECT_EQ(stream->text(), "0123");
  EXPECT_TRUE(stream->closed());
}

}  // namespace
}  // namespace mf::local
