// Local processes for containers: each one starts in its own session and process group
// (posix_spawn with POSIX_SPAWN_SETSID, safe in a threaded program) so that stopping a container
// signals everything it forked; stdout and stderr append to the container's log file.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "tools/local/kubelet/container_env.h"

namespace mf::local {

struct SpawnSpec {
  std::vector<std::string> argv;      // argv[0] is looked up in PATH when it has no '/'
  EnvList env;                        // the complete environment
  std::filesystem::path working_dir;  // empty: the kubelet's own
  std::filesystem::path log_path;     // empty: output discarded
};

// Starts the process; its pid is also its process group id. An unstartable program (missing,
// not executable) is an error here, not a child that exits 127.
StatusOr<pid_t> SpawnProcessGroup(const SpawnSpec& spec);

// Exit status of `pid` if it has ended (and reaps it): the exit code, or 128 + signal number
// when killed, as container runtimes report it. nullopt while it runs.
std::optional<int> TryReap(pid_t pid);

// Sends `signal` to the whole process group (ignores an already-gone group).
void SignalProcessGroup(pid_t pgid, int signal);

// Sends SIGTERM to the group, waits up to `grace` for the leader to exit, then SIGKILLs the
// group. Returns the leader's exit status.
int StopProcessGroup(pid_t pgid, std::chrono::milliseconds grace);

struct ExecResult {
  bool timed_out = false;
  int exit_code = -1;
};
// Runs a short command (exec probes) to completion or until `timeout`, then kills its group.
StatusOr<ExecResult> RunWithTimeout(const SpawnSpec& spec, std::chrono::milliseconds timeout);

// Records `pid` with its start time in `path`, so a later kubelet can recognise the process.
Status WritePidFile(const std::filesystem::path& path, pid_t pid);
// If `path` names a process group that is still running (same pid and start time, so never a
// recycled pid), SIGKILLs the group and waits up to `wait` for the leader to vanish. This is how
// a kubelet restarted after a crash removes the containers its predecessor left behind, which
// would otherwise keep the pod's address and ports. Returns whether it killed something.
bool KillStaleProcessGroup(const std::filesystem::path& path, std::chrono::milliseconds wait);

// Whether a live (not zombie) process with this pid is in the process table.
bool ProcessExists(pid_t pid);

}  // namespace mf::local
