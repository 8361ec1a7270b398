// The process behind `kubectl exec`: started with fork/exec in a new session (so its pid is its
// process group and everything it forks can be killed together), with pipes for the streams the
// client asked for, or a pseudo-terminal for tty sessions. The caller owns every descriptor in
// Child and reaps the process.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace mf::local {

struct ChildSpec {
  std::vector<std::string> argv;                         // argv[0] is looked up in the PATH of `env` when it has no '/'
  std::vector<std::pair<std::string, std::string>> env;  // the complete environment
  std::filesystem::path working_dir;                     // empty: the server's own
  bool tty = false;                                      // a pseudo-terminal is the child's stdin, stdout and stderr
  bool pipe_stdin = false;                               // without tty: a pipe for stdin, else /dev/null
  bool pipe_stdout = false;                              // without tty: a pipe for stdout, else /dev/null
  bool pipe_stderr = false;                              // without tty: a pipe for stderr, else /dev/null
};

struct Child {
  pid_t pid = -1;      // also its process group id
  int stdin_fd = -1;   // write end (tty: a duplicate of the terminal's master side)
  int stdout_fd = -1;  // read end (tty: the master side, carrying stdout and stderr)
  int stderr_fd = -1;  // read end; -1 with tty
  int pidfd = -1;      // readable once the process exits; -1 where the kernel has no pidfd_open
};

// Starts the process. Descriptors returned are non-blocking and close-on-exec. A program that
// cannot be found or executed, or a working directory that cannot be entered, is an error here
// (NotFound / FailedPrecondition) rather than a child that exits 127.
StatusOr<Child> SpawnChild(const ChildSpec& spec);

// The path execve() gets for `program`: itself when it contains '/', else the first executable
// regular file named so in `path_list` (':'-separated; empty entries mean the working directory).
StatusOr<std::string> FindExecutable(const std::string& program, const std::string& path_list);

// The exit code of `pid` once it has ended, without reaping it: the zombie keeps its pid, and so
// its process group id, from being reused, so KillProcessGroup() stays safe until ReapChild().
// Codes as ReapChild's; nullopt while it runs.
std::optional<int> PeekExit(pid_t pid);

// The exit code of `pid` once it has ended (reaping it): its exit status, or 128 + the signal that
// killed it, as container runtimes report it; -1 when someone else reaped it already (a SIGCHLD
// handler calling waitpid(-1) in the host process steals it). nullopt while it runs (when !block).
std::optional<int> ReapChild(pid_t pid, bool block);

// SIGKILLs the whole process group (ignores a group that is already gone).
void KillProcessGroup(pid_t pgid);

// Sets the terminal size of a tty session (the TIOCSWINSZ ioctl on the master side).
Status SetTerminalSize(int master_fd, uint16_t columns, uint16_t rows);

}  // namespace mf::local
