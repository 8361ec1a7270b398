// The exec child process (tools/local/kubelet_api/child_process.h): PATH lookup in the container's
// environment, clear errors for what cannot start, exit codes, process groups, terminals.
#include "tools/local/kubelet_api/child_process.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace mf::local {
namespace {

// Reads `fd` (non-blocking) until EOF or EIO, for at most a few seconds.
std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (int i = 0; i < 500; ++i) {
    pollfd p{fd, POLLIN, 0};
    poll(&p, 1, 10);
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      out.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EAGAIN) {
      break;
    }
  }
  return out;
}

// A zombie counts as gone: its parent (here, whatever reaps orphans) just has not reaped it yet.
bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, comm, state;
  if (!(stat >> pid_field >> comm >> state)) return false;
  return state != "Z";
}

ChildSpec Shell(const std::string& script) {
  ChildSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"GREETING", "hi"}};
  spec.pipe_stdout = true;
  spec.pipe_stderr = true;
  return spec;
}

void CloseAll(const Child& child) {
  for (int fd : {child.stdin_fd, child.stdout_fd, child.stderr_fd, child.pidfd}) {
    if (fd >= 0) close(fd);
  }
}

TEST(FindExecutableTest, SearchesTheGivenPath) {
  auto sh = FindExecutable("sh", "/nonexistent:/usr/bin:/bin");
  ASSERT_TRUE(sh.ok());
  EXPECT_TRUE(*sh == "/usr/bin/sh" || *sh == "/bin/sh") << *sh;
  EXPECT_EQ(*FindExecutable("./run.sh", "/bin"), "./run.sh");  // with a slash: as given
  auto missing = FindExecutable("no-such-program-here", "/usr/bin:/bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "exec: \"no-such-program-here\": executable file not found in $PATH");
  EXPECT_FALSE(FindExecutable("", "/bin").ok());
}

TEST(SpawnChildTest, RunsWithTheGivenEnvironmentAndDirectory) {
  ChildSpec spec = Shell("echo $GREETING; pwd; echo oops >&2; exit 7");
  spec.working_dir = "/tmp";
  auto child = SpawnChild(spec);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(ReadAll(child->stdout_fd), "hi\n/tmp\n");
  EXPECT_EQ(ReadAll(child->stderr_fd), "oops\n");
  EXPECT_EQ(ReapChild(child->pid, /*block=*/true), 7);
  CloseAll(*child);
}

TEST(SpawnChildTest, PeekExitLeavesAZombieUntilReaped) {
  auto child = SpawnChild(Shell("exit 3"));
  ASSERT_TRUE(child.ok());
  std::optional<int> code;
  for (int i = 0; i < 500 && !code; ++i) {
    code = PeekExit(child->pid);
    if (!code) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(code, 3);
  EXPECT_EQ(PeekExit(child->pid), 3);  // still there
  EXPECT_EQ(ReapChild(child->pid, /*block=*/false), 3);
  CloseAll(*child);
}

TEST(SpawnChildTest, KillingTheGroupKillsWhatTheCommandForked) {
  auto child = SpawnChild(Shell("sleep 100 & echo $!; wait"));
  ASSERT_TRUE(child.ok());
  std::string grandchild;
  char c;
  for (int i = 0; i < 500 && grandchild.find('\n') == std::string::npos; ++i) {
    pollfd p{child->stdout_fd, POLLIN, 0};
    poll(&p, 1, 10);
    if (read(child->stdout_fd, &c, 1) == 1) grandchild += c;
  }
  const pid_t sleeper = std::stoi(grandchild);
  KillProcessGroup(child->pid);
  EXPECT_EQ(ReapChild(child->pid, /*block=*/true), 128 + SIGKILL);
  bool gone = false;
  for (int i = 0; i < 500 && !gone; ++i) {
    gone = !Alive(sleeper);
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone);
  CloseAll(*child);
}

TEST(SpawnChildTest, ReportsWhatCannotStart) {
  ChildSpec spec = Shell("true");
  spec.argv = {"/nonexistent/program"};
  auto missing = SpawnChild(spec);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/program"), std::string::npos);

  const std::string plain_file = ::testing::TempDir() + "/child_process_test_not_executable";
  std::ofstream(plain_file) << "echo never\n";
  chmod(plain_file.c_str(), 0644);
  spec.argv = {plain_file};
  auto not_executable = SpawnChild(spec);
  std::remove(plain_file.c_str());
  ASSERT_FALSE(not_executable.ok());
  EXPECT_EQ(not_executable.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(not_executable.status().message().find("Permission denied"), std::string::npos)
      << not_executable.status().message();

  spec = Shell("true");
  spec.working_dir = "/nonexistent-dir";
  auto bad_dir = SpawnChild(spec);
  ASSERT_FALSE(bad_dir.ok());
  EXPECT_NE(bad_dir.status().message().find("/nonexistent-dir"), std::string::npos);
}

TEST(SpawnChildTest, TerminalSessionsGetATtyWithTheirSize) {
  ChildSpec spec;
  spec.argv = {"sh", "-c", "read line; stty size; test -t 0 && echo tty"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  spec.tty = true;
  spec.pipe_stdin = true;
  spec.pipe_stdout = true;
  auto child = SpawnChild(spec);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  EXPECT_EQ(child->stderr_fd, -1);
  ASSERT_TRUE(SetTerminalSize(child->stdout_fd, 120, 42).ok());
  ASSERT_EQ(write(child->stdin_fd, "go\n", 3), 3);
  const std::string out = ReadAll(child->stdout_fd);
  EXPECT_NE(out.find("42 120"), std::string::npos) << out;
  EXPECT_NE(out.find("tty"), std::string::npos) << out;
  EXPECT_EQ(ReapChild(child->pid, /*block=*/true), 0);
  CloseAll(*child);
}

}  // namespace
}  // namespace mf::local
