// SyncOnce on local sources in a temporary directory: where files land, digests, the restarted
// sidecar's skip, atomic replacement, and that a failure leaves the model volume as it was.
#include "server/sync/sync.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/sync/local_source.h"
#include "server/sync/sha256.h"
#include "tests/unit/sync/temp_dir.h"

namespace mf::sync {
namespace {

namespace fs = std::filesystem;
using testing::Names;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;

class SyncTest : public ::testing::Test {
 protected:
  fs::path src() const { return tmp_.path() / "src"; }
  fs::path models() const { return tmp_.path() / "models" / "resnet"; }
  fs::path dest() const { return models() / "1"; }

  SyncRequest Request(const fs::path& source_path, std::string sha256 = "") {
    auto source = ParseSource("file://" + source_path.string(), "/mnt/pvc");
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    return SyncRequest{*source, dest(), std::move(sha256)};
  }

  StatusOr<SyncResult> Sync(const SyncRequest& request) { return SyncOnce(request, client_, cancellation_); }

  TempDir tmp_;
  http::Client client_;
  Cancellation cancellation_;
};

TEST_F(SyncTest, SingleFileLandsUnderItsNameWithAMarker) {
  WriteFile(src() / "model.onnx", "onnx bytes");
  auto result = Sync(Request(src() / "model.onnx"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_FALSE(result->already_present);
  EXPECT_EQ(result->content.bytes, 10u);
  EXPECT_EQ(result->content.sha256, Sha256Hex("onnx bytes"));
  EXPECT_EQ(result->content.file_name, "model.onnx");
  EXPECT_EQ(ReadFile(dest() / "model.onnx"), "onnx bytes");
  EXPECT_EQ(Names(dest()), (std::set<std::string>{"model.onnx", kMarkerName}));
  EXPECT_EQ(Names(models()), std::set<std::string>{"1"});  // no staging directory left
  auto marker = ReadMarker(dest());
  ASSERT_TRUE(marker.has_value());
  EXPECT_EQ(marker->source, "file://" + (src() / "model.onnx").string());
  EXPECT_TRUE(SameContent(marker->content, result->content));
}

TEST_F(SyncTest, DirectoryIsCopiedRecursivelyWithInsideSymlinksKept) {
  WriteFile(src() / "model.onnx", "graph");
  WriteFile(src() / "assets" / "vocab.txt", "a b c");
  fs::create_directories(src() / "empty");
  fs::create_symlink("../model.onnx", src() / "assets" / "model-link.onnx");
  fs::create_symlink(src() / "assets", src() / "assets-link");  // absolute, but inside
  auto result = Sync(Request(src()));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->content.bytes, 10u);
  EXPECT_EQ(result->content.file_name, "");
  EXPECT_EQ(ReadFile(dest() / "model.onnx"), "graph");
  EXPECT_EQ(ReadFile(dest() / "assets" / "vocab.txt"), "a b c");
  EXPECT_TRUE(fs::is_directory(dest() / "empty"));
  EXPECT_EQ(fs::read_symlink(dest() / "assets" / "model-link.onnx"), "../model.onnx");
  EXPECT_EQ(fs::read_symlink(dest() / "assets-link"), "assets");
  EXPECT_EQ(ReadFile(dest() / "assets-link" / "vocab.txt"), "a b c");
}

TEST_F(SyncTest, DirectoryDigestDependsOnNamesAndBytes) {
  WriteFile(src() / "a", "1");
  WriteFile(src() / "b", "2");
  auto first = ReadLocalSource(*ParseSource("file://" + src().string(), "/"), nullptr, cancellation_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  fs::rename(src() / "b", src() / "c");
  auto renamed = ReadLocalSource(*ParseSource("file://" + src().string(), "/"), nullptr, cancellation_);
  ASSERT_TRUE(renamed.ok());
  EXPECT_NE(first->sha256, renamed->sha256);
  EXPECT_EQ(first->bytes, renamed->bytes);
}

TEST_F(SyncTest, SymlinksOutOfTheSourceAreRefused) {
  WriteFile(src() / "model.onnx", "graph");
  WriteFile(tmp_.path() / "secret", "do not copy");
  fs::create_symlink(tmp_.path() / "secret", src() / "escape");
  auto result = Sync(Request(src()));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("points outside it"), std::string::npos) << result.status().message();
  EXPECT_FALSE(fs::exists(dest()));
  EXPECT_TRUE(Names(models()).empty());

  fs::remove(src() / "escape");
  fs::create_symlink(src() / "nowhere", src() / "broken");
  result = Sync(Request(src()));
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("is broken"), std::string::npos) << result.status().message();
  EXPECT_TRUE(Names(models()).empty());
}

TEST_F(SyncTest, PvcSourceMustStayInsideItsClaim) {
  fs::path pvc_root = tmp_.path() / "pvc";
  WriteFile(pvc_root / "claim" / "resnet" / "model.onnx", "graph");
  WriteFile(pvc_root / "other" / "model.onnx", "someone else's");
  fs::create_symlink(pvc_root / "other" / "model.onnx", pvc_root / "claim" / "escape.onnx");
  auto inside = ParseSource("pvc://claim/resnet/model.onnx", pvc_root.string());
  ASSERT_TRUE(inside.ok());
  auto result = SyncOnce(SyncRequest{*inside, dest(), ""}, client_, cancellation_);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(ReadFile(dest() / "model.onnx"), "graph");

  auto escaping = ParseSource("pvc://claim/escape.onnx", pvc_root.string());
  ASSERT_TRUE(escaping.ok());
  result = SyncOnce(SyncRequest{*escaping, dest(), ""}, client_, cancellation_);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("outside"), std::string::npos) << result.status().message();
}

TEST_F(SyncTest, Sha256IsCheckedBeforePublishing) {
  WriteFile(src() / "model.onnx", "graph");
  std::string good = Sha256Hex("graph");
  auto result = Sync(Request(src() / "model.onnx", good));
  ASSERT_TRUE(result.ok()) << result.status().ToString();

  fs::remove_all(dest());
  std::string wrong(64, 'a');
  result = Sync(Request(src() / "model.onnx", wrong));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(result.status().message().find("expected " + wrong), std::string::npos) << result.status().message();
  EXPECT_NE(result.status().message().find("got " + good), std::string::npos) << result.status().message();
  EXPECT_TRUE(Names(models()).empty());
}

TEST_F(SyncTest, Sha256WithADirectoryIsInvalidArgument) {
  WriteFile(src() / "model.onnx", "graph");
  auto result = Sync(Request(src(), Sha256Hex("graph")));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find("is a directory"), std::string::npos) << result.status().message();
  EXPECT_TRUE(Names(models()).empty());
}

TEST_F(SyncTest, SameContentIsNotCopiedAgain) {
  WriteFile(src() / "model.onnx", "graph");
  ASSERT_TRUE(Sync(Request(src() / "model.onnx")).ok());
  WriteFile(dest() / "sentinel", "");  // survives only when the directory is left alone
  auto again = Sync(Request(src() / "model.onnx"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->already_present);
  EXPECT_EQ(again->content.sha256, Sha256Hex("graph"));
  EXPECT_TRUE(fs::exists(dest() / "sentinel"));
}

TEST_F(SyncTest, WithSha256TheMarkerAloneSkipsTheCopy) {
  WriteFile(src() / "model.onnx", "graph");
  ASSERT_TRUE(Sync(Request(src() / "model.onnx", Sha256Hex("graph"))).ok());
  fs::remove(src() / "model.onnx");  // not even read on the restart
  auto again = Sync(Request(src() / "model.onnx", Sha256Hex("graph")));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->already_present);
  EXPECT_EQ(again->content.bytes, 5u);
}

TEST_F(SyncTest, AMarkedFileDeletedByHandIsWrittenAgain) {
  WriteFile(src() / "model.onnx", "graph");
  ASSERT_TRUE(Sync(Request(src() / "model.onnx", Sha256Hex("graph"))).ok());
  fs::remove(dest() / "model.onnx");
  auto again = Sync(Request(src() / "model.onnx", Sha256Hex("graph")));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_FALSE(again->already_present);
  EXPECT_EQ(ReadFile(dest() / "model.onnx"), "graph");
}

TEST_F(SyncTest, DifferentContentReplacesTheDestination) {
  WriteFile(src() / "model.onnx", "version one");
  ASSERT_TRUE(Sync(Request(src() / "model.onnx")).ok());
  WriteFile(dest() / "sentinel", "");
  WriteFile(src() / "model.onnx", "version two");
  auto result = Sync(Request(src() / "model.onnx"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_FALSE(result->already_present);
  EXPECT_EQ(ReadFile(dest() / "model.onnx"), "version two");
  EXPECT_FALSE(fs::exists(dest() / "sentinel"));
  EXPECT_EQ(Names(models()), std::set<std::string>{"1"});  // the old one is gone, nothing set aside
}

TEST_F(SyncTest, AnUnmarkedDestinationIsReplaced) {
  WriteFile(dest() / "model.onnx", "put there by hand");
  WriteFile(src() / "model.onnx", "graph");
  auto result = Sync(Request(src() / "model.onnx"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(ReadFile(dest() / "model.onnx"), "graph");
  EXPECT_EQ(Names(models()), std::set<std::string>{"1"});
}

TEST_F(SyncTest, ReplaceWithoutExchangeRenamesTheOldAsideAndRemovesIt) {
  WriteFile(dest() / "old.onnx", "old");
  WriteFile(models() / "staged" / "new.onnx", "new");
  ASSERT_TRUE(ReplaceDirectory(models() / "staged", dest(), /*allow_exchange=*/false).ok());
  EXPECT_EQ(Names(dest()), std::set<std::string>{"new.onnx"});
  EXPECT_EQ(Names(models()), std::set<std::string>{"1"});

  WriteFile(models() / "staged" / "newer.onnx", "newer");
  ASSERT_TRUE(ReplaceDirectory(models() / "staged", dest(), /*allow_exchange=*/true).ok());
  EXPECT_EQ(Names(dest()), std::set<std::string>{"newer.onnx"});
  EXPECT_EQ(Names(models()), std::set<std::string>{"1"});
}

TEST_F(SyncTest, AMissingSourceIsNotFoundAndLeavesNothing) {
  auto result = Sync(Request(src() / "model.onnx"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound);
  EXPECT_NE(result.status().message().find("does not exist"), std::string::npos);
  EXPECT_FALSE(fs::exists(dest()));
}

TEST_F(SyncTest, AnEmptyDirectoryIsNotReadyYet) {
  fs::create_directories(src());
  auto result = Sync(Request(src()));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_TRUE(Names(models()).empty());
}

TEST_F(SyncTest, AFailureHalfwayThroughLeavesNoStagingAndTheOldVersion) {
  WriteFile(src() / "model.onnx", "version one");
  ASSERT_TRUE(Sync(Request(src())).ok());
  WriteFile(src() / "a-first.onnx", "copied before the failure");
  ASSERT_EQ(::mkfifo((src() / "z-fifo").c_str(), 0644), 0);
  auto result = Sync(Request(src()));
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("is not a regular file, directory or symlink"), std::string::npos)
      << result.status().message();
  EXPECT_EQ(Names(models()), std::set<std::string>{"1"});
  EXPECT_EQ(Names(dest()), (std::set<std::string>{"model.onnx", kMarkerName}));
}

TEST_F(SyncTest, CancellationStopsACopyAndLeavesNothing) {
  WriteFile(src() / "model.onnx", "graph");
  cancellation_.Cancel();
  auto result = Sync(Request(src() / "model.onnx"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kCancelled);
  EXPECT_TRUE(Names(models()).empty());
}

TEST_F(SyncTest, LeftoversOfGoneSyncsAreRemovedAndOthersKept) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // now a pid no process has
  std::string gone = std::to_string(child);
  WriteFile(models() / (".1.tmp-" + gone) / "model.onnx", "half written");
  WriteFile(models() / (".1.old-" + gone) / "model.onnx", "set aside");
  WriteFile(models() / ".1.tmp-1" / "model.onnx", "pid 1 is alive");
  WriteFile(models() / (".2.tmp-" + gone), "another version's");
  WriteFile(src() / "model.onnx", "graph");
  ASSERT_TRUE(Sync(Request(src() / "model.onnx")).ok());
  EXPECT_EQ(Names(models()), (std::set<std::string>{"1", ".1.tmp-1", ".2.tmp-" + gone}));
}

TEST(Backoff, DoublesFromTheInitialDelayUpToTheCapWithJitter) {
  RetryPolicy policy{5, std::chrono::milliseconds(500), std::chrono::milliseconds(30'000)};
  struct Case {
    int retry;
    double jitter;
    int64_t want_ms;
  };
  const Case cases[] = {
      {1, 0.0, 250},    {1, 0.999, 499},  {2, 0.0, 500},     {2, 1.0, 1000},      {3, 0.5, 1500},  {6, 0.0, 8000},
      {7, 1.0, 30'000}, {7, 0.0, 15'000}, {60, 1.0, 30'000}, {1000, 0.0, 15'000}, {3, -5.0, 1000}, {3, 7.0, 2000},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(BackoffDelay(policy, c.retry, c.jitter).count(), c.want_ms) << c.retry << " " << c.jitter;
  }
  EXPECT_EQ(BackoffDelay({5, std::chrono::milliseconds(0), std::chrono::milliseconds(100)}, 4, 1.0).count(), 0);
  EXPECT_EQ(BackoffDelay({5, std::chrono::milliseconds(900), std::chrono::milliseconds(100)}, 1, 1.0).count(), 100);
}

RetryPolicy Fast(int attempts) { return {attempts, std::chrono::milliseconds(1), std::chrono::milliseconds(4)}; }

TEST(RetryWithBackoff, RetriesUntilAnAttemptSucceeds) {
  Cancellation cancellation;
  int calls = 0;
  Status status = RetryWithBackoff(Fast(5), cancellation, [&](int attempt) {
    EXPECT_EQ(attempt, ++calls);
    return calls < 3 ? Unavailable("not yet") : Status::Ok();
  });
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(calls, 3);
}

TEST(RetryWithBackoff, GivesUpAfterTheLastAttemptWithItsError) {
  Cancellation cancellation;
  int calls = 0;
  Status status = RetryWithBackoff(Fast(3), cancellation, [&](int) {
    ++calls;
    return NotFound("no model yet");
  });
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "no model yet (after 3 attempts)");
}

TEST(RetryWithBackoff, DoesNotRetryWhatNoRetryCanFix) {
  Cancellation cancellation;
  int calls = 0;
  Status status = RetryWithBackoff(Fast(5), cancellation, [&](int) {
    ++calls;
    return InvalidArgument("--sha256 with a directory");
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
}

TEST(RetryWithBackoff, CancellationEndsABackoffWaitAtOnce) {
  Cancellation cancellation;
  RetryPolicy slow{5, std::chrono::milliseconds(60'000), std::chrono::milliseconds(60'000)};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancellation.Cancel(15);
  });
  auto start = std::chrono::steady_clock::now();
  int calls = 0;
  Status status = RetryWithBackoff(slow, cancellation, [&](int) {
    ++calls;
    return Unavailable("still uploading");
  });
  canceller.join();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(status.code(), StatusCode::kCancelled);
  EXPECT_EQ(cancellation.signal(), 15);
}

TEST(Cancellation, HooksRunOnCancelOrAtOnceWhenAlreadyCancelled) {
  Cancellation cancellation;
  int runs = 0;
  cancellation.SetHook([&] { ++runs; });
  cancellation.Cancel();
  cancellation.Cancel();
  EXPECT_EQ(runs, 1);
  cancellation.SetHook([&] { ++runs; });
  EXPECT_EQ(runs, 2);
  EXPECT_TRUE(cancellation.WaitFor(std::chrono::hours(1)));
}

TEST(Sha256, MatchesKnownDigestsAndParsesHex) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto parsed = ParseSha256Hex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, Sha256Hex("abc"));
  for (std::string bad : {std::string(63, 'a'), std::string(65, 'a'), std::string(64, 'g'), std::string()}) {
    EXPECT_EQ(ParseSha256Hex(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace mf::sync
