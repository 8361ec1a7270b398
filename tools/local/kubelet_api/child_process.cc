#include "tools/local/kubelet_api/child_process.h"

#include <fcntl.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mf::local {
namespace {

constexpr char kDefaultPath[] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Owns one descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int* out() {
    Reset();
    return &fd_;
  }
  int Release() { return std::exchange(fd_, -1); }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// What the child reports through the status pipe when it fails before execve() succeeds.
enum class Stage : int { kChdir = 1, kExec = 2, kTerminal = 3 };
struct ChildFailure {
  Stage stage;
  int error;
};

bool MakePipe(Fd* read_end, Fd* write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  *read_end->out() = fds[0];
  *write_end->out() = fds[1];
  return true;
}

void SetNonBlocking(int fd) {
  if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

[[noreturn]] void FailInChild(int status_fd, Stage stage) {
  const ChildFailure failure{stage, errno};
  [[maybe_unused]] ssize_t n = write(status_fd, &failure, sizeof(failure));
  _exit(127);
}

// Between fork() and execve() only async-signal-safe calls: everything is prepared beforehand.
[[noreturn]] void RunChild(const char* exe, char* const* argv, char* const* envp, const char* working_dir, bool tty,
                           int in, int out, int err, int status_fd) {
  // The server's signal mask and ignored signals (SIGPIPE, typically) must not leak into the command.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &default_action, nullptr);

  setsid();
  if (tty && ioctl(in, TIOCSCTTY, 0) != 0) FailInChild(status_fd, Stage::kTerminal);
  dup2(in, STDIN_FILENO);
  dup2(out, STDOUT_FILENO);
  dup2(err, STDERR_FILENO);
  if (working_dir[0] != '\0' && chdir(working_dir) != 0) FailInChild(status_fd, Stage::kChdir);
  // Descriptors other threads opened without O_CLOEXEC must not leak into the command either.
  if (status_fd > 3) syscall(SYS_close_range, 3u, static_cast<unsigned>(status_fd - 1), 0u);
  syscall(SYS_close_range, static_cast<unsigned>(status_fd + 1), ~0u, 0u);
  execve(exe, argv, envp);
  FailInChild(status_fd, Stage::kExec);
}

Status FailureStatus(const ChildFailure& failure, const std::string& exe, const ChildSpec& spec) {
  const std::string reason = std::strerror(failure.error);
  switch (failure.stage) {
    case Stage::kChdir:
      return FailedPrecondition("cannot enter the working directory " + spec.working_dir.string() + ": " + reason);
    case Stage::kTerminal:
      return Internal("cannot attach the terminal to the command: " + reason);
    case Stage::kExec:
      break;
  }
  const std::string what = "exec: \"" + exe + "\": " + reason;
  return failure.error == ENOENT ? NotFound(what) : FailedPrecondition(what);
}

}  // namespace

StatusOr<std::string> FindExecutable(const std::string& program, const std::string& path_list) {
  if (program.empty()) return InvalidArgument("the command is empty");
  if (program.find('/') != std::string::npos) return program;
  size_t start = 0;
  while (start <= path_list.size()) {
    size_t end = path_list.find(':', start);
    if (end == std::string::npos) end = path_list.size();
    std::string dir = path_list.substr(start, end - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    start = end + 1;
  }
  return NotFound("exec: \"" + program + "\": executable file not found in $PATH");
}

StatusOr<Child> SpawnChild(const ChildSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("the command is empty");
  std::string path_list = kDefaultPath;
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : spec.env) {
    if (name == "PATH") path_list = value;
    env_strings.push_back(name + "=" + value);
  }
  MF_ASSIGN_OR_RETURN(std::string exe, FindExecutable(spec.argv[0], path_list));
  std::vector<char*> argv;
  for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string working_dir = spec.working_dir.string();

  Fd dev_null(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (dev_null.get() < 0) return Internal(std::string("cannot open /dev/null: ") + std::strerror(errno));
  // Our ends and the child's ends of its standard streams.
  Fd in_ours, in_theirs, out_ours, out_theirs, err_ours, err_theirs;
  if (spec.tty) {
    if (openpty(out_ours.out(), in_theirs.out(), nullptr, nullptr, nullptr) != 0) {
      return Internal(std::string("cannot open a pseudo-terminal: ") + std::strerror(errno));
    }
    fcntl(out_ours.get(), F_SETFD, FD_CLOEXEC);
    fcntl(in_theirs.get(), F_SETFD, FD_CLOEXEC);
    *in_ours.out() = fcntl(out_ours.get(), F_DUPFD_CLOEXEC, 0);
  } else {
    bool ok = (!spec.pipe_stdin || MakePipe(&in_theirs, &in_ours)) &&
              (!spec.pipe_stdout || MakePipe(&out_ours, &out_theirs)) &&
              (!spec.pipe_stderr || MakePipe(&err_ours, &err_theirs));
    if (!ok) return Internal(std::string("cannot create pipes for the command: ") + std::strerror(errno));
  }
  const int child_in = in_theirs.get() >= 0 ? in_theirs.get() : dev_null.get();
  const int child_out = spec.tty ? in_theirs.get() : (out_theirs.get() >= 0 ? out_theirs.get() : dev_null.get());
  const int child_err = spec.tty ? in_theirs.get() : (err_theirs.get() >= 0 ? err_theirs.get() : dev_null.get());
  Fd status_read, status_write;
  if (!MakePipe(&status_read, &status_write)) {
    return Internal(std::string("cannot create a pipe: ") + std::strerror(errno));
  }

  const pid_t pid = fork();
  if (pid < 0) return Unavailable(std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    RunChild(exe.c_str(), argv.data(), envp.data(), working_dir.c_str(), spec.tty, child_in, child_out, child_err,
             status_write.get());
  }
  status_write.Reset();
  in_theirs.Reset();
  out_theirs.Reset();
  err_theirs.Reset();
  // EOF (close-on-exec) means execve() succeeded; a ChildFailure means it did not.
  ChildFailure failure{};
  ssize_t n;
  do {
    n = read(status_read.get(), &failure, sizeof(failure));
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof(failure))) {
    ReapChild(pid, /*block=*/true);
    return FailureStatus(failure, exe, spec);
  }

  Child child;
  child.pid = pid;
  child.pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (child.pidfd >= 0) fcntl(child.pidfd, F_SETFD, FD_CLOEXEC);
  child.stdin_fd = in_ours.Release();
  child.stdout_fd = out_ours.Release();
  child.stderr_fd = err_ours.Release();
  for (int fd : {child.stdin_fd, child.stdout_fd, child.stderr_fd}) SetNonBlocking(fd);
  return child;
}

std::optional<int> ReapChild(pid_t pid, bool block) {
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return std::nullopt;
  if (r < 0) return -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::optional<int> PeekExit(pid_t pid) {
  siginfo_t info{};
  int r;
  do {
    r = waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (r < 0 && errno == EINTR);
  if (r < 0) return -1;
  if (info.si_pid == 0) return std::nullopt;
  if (info.si_code == CLD_EXITED) return info.si_status;
  return 128 + info.si_status;
}

void KillProcessGroup(pid_t pgid) {
  if (pgid > 0) kill(-pgid, SIGKILL);
}

Status SetTerminalSize(int master_fd, uint16_t columns, uint16_t rows) {
  struct winsize size {};
  size.ws_col = columns;
  size.ws_row = rows;
  if (ioctl(master_fd, TIOCSWINSZ, &size) != 0) {
    return Internal(std::string("cannot set the terminal size: ") + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace mf::local
