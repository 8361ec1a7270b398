#include "tools/local/kubelet/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace mf::local {
namespace {

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

}  // namespace

StatusOr<pid_t> SpawnProcessGroup(const SpawnSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("container has no program to run");
  std::vector<std::string> env_strings;
  env_strings.reserve(spec.env.size());
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  const std::string log = spec.log_path.empty() ? "/dev/null" : spec.log_path.string();
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  // Nothing else of the agent's (listening sockets, API connections) leaks into a container: a
  // container that outlives a crashed agent must not keep its ports bound.
  posix_spawn_file_actions_addclosefrom_np(&actions, STDERR_FILENO + 1);
  std::string cwd = spec.working_dir.string();
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  // The kubelet's own signal handling (blocked SIGTERM/SIGINT in a signal thread) must not leak.
  sigset_t empty, all;
  sigemptyset(&empty);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return FailedPrecondition("cannot start " + spec.argv[0] + (cwd.empty() ? "" : " in " + cwd) + ": " +
                              std::strerror(rc));
  }
  return pid;
}

std::optional<int> TryReap(pid_t pid) {
  int status = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid) return DecodeWaitStatus(status);
  if (r < 0 && errno == ECHILD) return -1;  // already reaped elsewhere: report as gone
  return std::nullopt;
}

void SignalProcessGroup(pid_t pgid, int signal) {
  if (pgid > 0) kill(-pgid, signal);
}

int StopProcessGroup(pid_t pgid, std::chrono::milliseconds grace) {
  SignalProcessGroup(pgid, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto code = TryReap(pgid)) {
      SignalProcessGroup(pgid, SIGKILL);  // children that outlived their leader
      return *code;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  SignalProcessGroup(pgid, SIGKILL);
  int status = 0;
  while (waitpid(pgid, &status, 0) < 0 && errno == EINTR) {
  }
  return DecodeWaitStatus(status);
}

StatusOr<ExecResult> RunWithTimeout(const SpawnSpec& spec, std::chrono::milliseconds timeout) {
  MF_ASSIGN_OR_RETURN(pid_t pid, SpawnProcessGroup(spec));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto code = TryReap(pid)) return ExecResult{false, *code};
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ExecResult{true, StopProcessGroup(pid, std::chrono::milliseconds(0))};
}

namespace {

// Field 22 of /proc/<pid>/stat: clock ticks since boot when the process started.
std::optional<uint64_t> StartTime(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return std::nullopt;
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(paren + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::stoull(field);
  }
  return std::nullopt;
}

}  // namespace

Status WritePidFile(const std::filesystem::path& path, pid_t pid) {
  auto start = StartTime(pid);
  if (!start) return NotFound("process " + std::to_string(pid) + " is gone");
  std::ofstream out(path, std::ios::trunc);
  out << pid << ' ' << *start << '\n';
  return out.flush() ? Status::Ok() : Internal("cannot write " + path.string());
}

bool KillStaleProcessGroup(const std::filesystem::path& path, std::chrono::milliseconds wait) {
  std::ifstream in(path);
  pid_t pid = 0;
  uint64_t start = 0;
  if (!(in >> pid >> start) || pid <= 1) return false;
  if (StartTime(pid) != start || getpgid(pid) != pid || !ProcessExists(pid)) return false;
  SignalProcessGroup(pid, SIGKILL);
  auto deadline = std::chrono::steady_clock::now() + wait;
  do {
    TryReap(pid);  // our own child when this kubelet process recorded it
    if (!ProcessExists(pid)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (std::chrono::steady_clock::now() < deadline);
  return true;
}

bool ProcessExists(pid_t pid) {
  // /proc/<pid>/stat: "pid (comm) S ...": a zombie has exited; only its parent has not reaped it.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

}  // namespace mf::local
