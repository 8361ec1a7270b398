#include "tools/local/cluster/host_sockets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace mf::local {
namespace {

constexpr size_t kMaxMessage = 256;

StatusOr<sockaddr_un> UnixAddress(const std::filesystem::path& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string text = path.string();
  if (text.size() >= sizeof(addr.sun_path)) {
    return InvalidArgument("the socket path " + text + " is too long (at most " +
                           std::to_string(sizeof(addr.sun_path) - 1) + " bytes); use a shorter --data-dir");
  }
  std::memcpy(addr.sun_path, text.c_str(), text.size() + 1);
  return addr;
}

bool IsLoopback(const std::string& ip) {
  in_addr a{};
  return inet_pton(AF_INET, ip.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

// Binds and listens; returns the fd or an error text.
int BindListener(const std::string& ip, uint16_t port, std::string* error) {
  if (!IsLoopback(ip)) {
    *error = "refused: " + ip + " is not a 127.0.0.0/8 address";
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, SOMAXCONN) != 0) {
    *error = ip + ":" + std::to_string(port) + ": " + std::strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `text` and, when fd >= 0, the descriptor with it.
void Reply(int conn, const std::string& text, int fd) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  (void)sendmsg(conn, &msg, MSG_NOSIGNAL);
}

[[noreturn]] void RunBroker(int listener, pid_t parent) {
  while (getppid() == parent) {
    pollfd p{listener, POLLIN, 0};
    if (poll(&p, 1, 1000) <= 0) continue;  // wakes every second to notice a dead parent
    int conn = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    char buffer[kMaxMessage];
    ssize_t n = recv(conn, buffer, sizeof buffer - 1, 0);
    if (n > 0) {
      std::istringstream request(std::string(buffer, static_cast<size_t>(n)));
      std::string ip;
      unsigned port = 0;
      std::string error;
      int fd = -1;
      if (!(request >> ip >> port) || port > 65535) {
        error = "malformed request";
      } else {
        fd = BindListener(ip, static_cast<uint16_t>(port), &error);
      }
      Reply(conn, fd >= 0 ? "ok" : error, fd);
      if (fd >= 0) close(fd);
    }
    close(conn);
  }
  _exit(0);
}

}  // namespace

StatusOr<pid_t> StartHostSocketBroker(const std::filesystem::path& path) {
  MF_ASSIGN_OR_RETURN(sockaddr_un addr, UnixAddress(path));
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  unlink(path.c_str());
  int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (listener < 0) return Internal(std::string("socket: ") + std::strerror(errno));
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listener, 16) != 0) {
    std::string why = std::strerror(errno);
    close(listener);
    return Internal("cannot listen on " + path.string() + ": " + why);
  }
  chmod(path.c_str(), 0600);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(listener);
    return Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    RunBroker(listener, parent);
  }
  close(listener);
  return pid;
}

StatusOr<int> OpenHostListener(const std::filesystem::path& broker, const std::string& ip, uint16_t port) {
  if (!IsLoopback(ip)) return InvalidArgument(ip + " is not a 127.0.0.0/8 address; host listeners stay on loopback");
  MF_ASSIGN_OR_RETURN(sockaddr_un addr, UnixAddress(broker));
  int conn = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (conn < 0) return Internal(std::string("socket: ") + std::strerror(errno));
  if (connect(conn, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::string why = std::strerror(errno);
    close(conn);
    return Unavailable("cannot reach the host socket broker at " + broker.string() + ": " + why);
  }
  std::string request = ip + " " + std::to_string(port);
  if (send(conn, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
    close(conn);
    return Unavailable("the host socket broker went away");
  }
  char buffer[kMaxMessage];
  iovec iov{buffer, sizeof buffer};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
  close(conn);
  if (n <= 0) return Unavailable("the host socket broker did not answer");
  std::string text(buffer, static_cast<size_t>(n));
  int fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  }
  if (text != "ok" || fd < 0) {
    if (fd >= 0) close(fd);
    return Unavailable("cannot listen on the host at " + ip + ":" + std::to_string(port) + ": " + text);
  }
  return fd;
}

}  // namespace mf::local
