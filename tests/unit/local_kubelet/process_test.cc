// Process groups: output capture, exit codes, and that stopping a container kills its children.
#include "tools/local/kubelet/process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace mf::local {
namespace {

using namespace std::chrono_literals;

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mf-proc-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Read(const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }
  int WaitExit(pid_t pid) {
    for (int i = 0; i < 500; ++i) {
      if (auto code = TryReap(pid)) return *code;
      std::this_thread::sleep_for(10ms);
    }
    ADD_FAILURE() << "process " << pid << " did not exit";
    return -1;
  }
  std::filesystem::path dir_;
};

TEST_F(ProcessTest, CapturesOutputEnvAndExitCode) {
  SpawnSpec spec{{"sh", "-c", "echo out $GREETING; echo err >&2; pwd; exit 7"},
                 {{"PATH", "/usr/bin:/bin"}, {"GREETING", "hi"}},
                 dir_,
                 dir_ / "c.log"};
  auto pid = SpawnProcessGroup(spec);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  EXPECT_EQ(WaitExit(*pid), 7);
  EXPECT_EQ(Read(dir_ / "c.log"), "out hi\nerr\n" + dir_.string() + "\n");
}

TEST_F(ProcessTest, MissingProgramIsAnError) {
  auto pid = SpawnProcessGroup({{"/nonexistent/program"}, {}, {}, {}});
  EXPECT_EQ(pid.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(pid.status().message().find("/nonexistent/program"), std::string::npos);
  EXPECT_FALSE(SpawnProcessGroup({{"true"}, {{"PATH", "/usr/bin:/bin"}}, dir_ / "missing-dir", {}}).ok());
}

TEST_F(ProcessTest, StopKillsTheWholeGroupIncludingIgnoringChildren) {
  // The child ignores SIGTERM, so only the SIGKILL after the grace period removes it.
  SpawnSpec spec{{"sh", "-c", "sh -c 'trap \"\" TERM; echo $$; exec sleep 100' & wait"},
                 {{"PATH", "/usr/bin:/bin"}},
                 dir_,
                 dir_ / "c.log"};
  auto pid = SpawnProcessGroup(spec);
  ASSERT_TRUE(pid.ok());
  pid_t child = 0;
  for (int i = 0; i < 200 && child == 0; ++i) {
    std::this_thread::sleep_for(10ms);
    std::string text = Read(dir_ / "c.log");
    if (!text.empty() && text.back() == '\n') child = std::stoi(text);
  }
  ASSERT_GT(child, 0);
  EXPECT_EQ(getpgid(child), *pid);
  ASSERT_TRUE(ProcessExists(child));
  auto start = std::chrono::steady_clock::now();
  int code = StopProcessGroup(*pid, 300ms);
  EXPECT_EQ(code, 128 + SIGTERM);  // the shell leader obeyed SIGTERM
  for (int i = 0; i < 100 && ProcessExists(child); ++i) std::this_thread::sleep_for(10ms);
  EXPECT_FALSE(ProcessExists(child));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST_F(ProcessTest, RunWithTimeoutKillsSlowCommands) {
  auto fast = RunWithTimeout({{"true"}, {{"PATH", "/usr/bin:/bin"}}, {}, {}}, 5s);
  ASSERT_TRUE(fast.ok());
  EXPECT_FALSE(fast->timed_out);
  EXPECT_EQ(fast->exit_code, 0);
  auto slow = RunWithTimeout({{"sleep", "30"}, {{"PATH", "/usr/bin:/bin"}}, {}, {}}, 100ms);
  ASSERT_TRUE(slow.ok());
  EXPECT_TRUE(slow->timed_out);
}

TEST_F(ProcessTest, StaleProcessGroupsFromAnEarlierKubeletAreKilledOnlyWhenTheyMatch) {
  auto pid = SpawnProcessGroup({{"sleep", "100"}, {{"PATH", "/usr/bin:/bin"}}, {}, {}});
  ASSERT_TRUE(pid.ok());
  ASSERT_TRUE(WritePidFile(dir_ / "c.pid", *pid).ok());
  // A record whose start time does not match (a recycled pid) is left alone.
  { std::ofstream(dir_ / "other.pid") << *pid << " 1\n"; }
  EXPECT_FALSE(KillStaleProcessGroup(dir_ / "other.pid", 100ms));
  EXPECT_TRUE(ProcessExists(*pid));
  EXPECT_FALSE(KillStaleProcessGroup(dir_ / "missing.pid", 100ms));
  { std::ofstream(dir_ / "garbage.pid") << "not a pid"; }
  EXPECT_FALSE(KillStaleProcessGroup(dir_ / "garbage.pid", 100ms));
  EXPECT_TRUE(KillStaleProcessGroup(dir_ / "c.pid", 2s));
  EXPECT_FALSE(ProcessExists(*pid));
  EXPECT_FALSE(KillStaleProcessGroup(dir_ / "c.pid", 100ms));  // gone now
}

}  // namespace
}  // namespace mf::local
