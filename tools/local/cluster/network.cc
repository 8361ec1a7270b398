#include "tools/local/cluster/network.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace mf::local {
namespace {

Status WriteProcFile(const std::string& path, const std::string& text) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Internal("cannot open " + path + ": " + std::strerror(errno));
  ssize_t n = write(fd, text.data(), text.size());
  int err = errno;
  close(fd);
  if (n != static_cast<ssize_t>(text.size())) return Internal("cannot write " + path + ": " + std::strerror(err));
  return Status::Ok();
}

// Runs iproute2's `ip` with `args` and waits for it (single-threaded caller: fork is safe).
Status RunIp(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::string program = "ip";
  argv.push_back(program.data());
  std::vector<std::string> copy = args;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return Internal(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    execvp("ip", argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string line = "ip";
    for (const auto& a : args) line += " " + a;
    return Internal("`" + line + "` failed (exit " + std::to_string(WEXITSTATUS(status)) +
                    "); is iproute2 installed (apt-get install iproute2)?");
  }
  return Status::Ok();
}

}  // namespace

Status EnterClusterNetwork() {
  const uid_t uid = geteuid();
  const gid_t gid = getegid();
  int flags = CLONE_NEWNET | (uid == 0 ? 0 : CLONE_NEWUSER);
  if (unshare(flags) != 0) {
    return FailedPrecondition(std::string("cannot create the cluster's network namespace (unshare: ") +
                              std::strerror(errno) +
                              "); run as root, or allow unprivileged user namespaces "
                              "(sysctl kernel.unprivileged_userns_clone=1)");
  }
  if (uid != 0) {
    MF_RETURN_IF_ERROR(WriteProcFile("/proc/self/setgroups", "deny"));
    MF_RETURN_IF_ERROR(WriteProcFile("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1"));
    MF_RETURN_IF_ERROR(WriteProcFile("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1"));
  }
  MF_RETURN_IF_ERROR(RunIp({"link", "set", "lo", "up"}));
  MF_RETURN_IF_ERROR(RunIp({"route", "add", "local", kPodCidr, "dev", "lo"}));
  MF_RETURN_IF_ERROR(RunIp({"route", "add", "local", kServiceCidr, "dev", "lo"}));
  return Status::Ok();
}

}  // namespace mf::local
