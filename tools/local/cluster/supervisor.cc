#include "tools/local/cluster/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/logging.h"

extern char** environ;

namespace mf::local {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kMaxBackoff = std::chrono::milliseconds(30'000);
constexpr auto kHealthyAfter = std::chrono::seconds(60);

}  // namespace

Supervisor::~Supervisor() { Stop(); }

StatusOr<pid_t> Supervisor::Spawn(const ComponentSpec& spec) {
  std::error_code ec;
  std::filesystem::create_directories(spec.log_path.parent_path(), ec);
  int log_fd = open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Internal("cannot open " + spec.log_path.string() + ": " + std::strerror(errno));
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: the parent has threads.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    setpgid(0, 0);
    int null_fd = open("/dev/null", O_RDONLY);
    dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    // No other descriptor of `up` (the host API listener, the broker's socket) reaches a component.
    close_range(3, ~0U, 0);
    execve(argv[0], argv.data(), environ);
    const char msg[] = "modelfleet-local: cannot execute the component\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(127);
  }
  close(log_fd);
  return pid;
}

Status Supervisor::Start(ComponentSpec spec) {
  if (access(spec.argv.at(0).c_str(), X_OK) != 0) {
    return NotFound(spec.argv[0] + " is not an executable (build it with scripts/build-go-tools.sh)");
  }
  MF_ASSIGN_OR_RETURN(pid_t pid, Spawn(spec));
  log::Info("started", {{"component", spec.name}, {"pid", std::to_string(pid)}});
  std::lock_guard lock(mu_);
  children_.push_back({.spec = std::move(spec),
                       .pid = pid,
                       .started = Clock::now(),
                       .restart_at = {},
                       .backoff = std::chrono::milliseconds(1000),
                       .restarts = 0});
  if (!monitor_.joinable() && !stopping_) monitor_ = std::thread([this] { Monitor(); });
  return Status::Ok();
}

pid_t Supervisor::PidOf(const std::string& name) const {
  std::lock_guard lock(mu_);
  for (const Child& c : children_) {
    if (c.spec.name == name) return c.pid;
  }
  return 0;
}

void Supervisor::Monitor() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(200));
    if (stopping_) break;
    const auto now = Clock::now();
    for (Child& c : children_) {
      if (c.pid > 0) {
        int status = 0;
        if (waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
        std::string how = WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                              : "exit code " + std::to_string(WEXITSTATUS(status));
        // A crash after a healthy minute starts again at once; a crash loop backs off.
        c.backoff =
            now - c.started > kHealthyAfter ? std::chrono::milliseconds(1000) : std::min(c.backoff * 2, kMaxBackoff);
        c.pid = 0;
        c.restart_at = now + c.backoff;
        log::Warning("component exited; restarting it", {{"component", c.spec.name},
                                                         {"status", how},
                                                         {"in_ms", std::to_string(c.backoff.count())},
                                                         {"log", c.spec.log_path.string()}});
      } else if (now >= c.restart_at) {
        auto pid = Spawn(c.spec);
        if (!pid.ok()) {
          c.restart_at = now + kMaxBackoff;
          log::Error("cannot restart component", {{"component", c.spec.name}, {"error", pid.status().message()}});
          continue;
        }
        c.pid = *pid;
        c.started = now;
        c.restarts++;
        log::Info(
            "restarted",
            {{"component", c.spec.name}, {"pid", std::to_string(c.pid)}, {"restarts", std::to_string(c.restarts)}});
      }
    }
  }
  TerminateAll();
}

void Supervisor::Stop(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    grace_ = grace;
  }
  wake_.notify_all();
  if (monitor_.joinable()) monitor_.join();
}

// On the monitor thread: a child's parent-death signal fires when the thread that forked it
// ends, so the thread that restarted children must outlive them.
void Supervisor::TerminateAll() {
  // Reverse start order: the node agent stops its pods while the API server still answers.
  for (auto it = children_.rbegin(); it != children_.rend(); ++it) {
    if (it->pid <= 0) continue;
    kill(-it->pid, SIGTERM);
    const auto deadline = Clock::now() + grace_;
    int status = 0;
    while (waitpid(it->pid, &status, WNOHANG) == 0) {
      if (Clock::now() >= deadline) {
        log::Warning("component did not stop in time; killing it", {{"component", it->spec.name}});
        kill(-it->pid, SIGKILL);
        waitpid(it->pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    it->pid = 0;
  }
}

}  // namespace mf::local
