// Helpers for the HTTP tests: raw sockets to speak exact bytes to our server, a scripted raw
// server to misbehave towards our client, and a free loopback port.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

namespace mf::http::testing {

// A port that was free a moment ago (bind 0 on loopback).
inline uint16_t FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A blocking loopback TCP connection; -1 when refused.
inline int Connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline void SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// Reads until the peer closes, `stop(received)` is true, or `timeout` passes.
inline std::string ReceiveUntil(int fd, std::chrono::milliseconds timeout,
                                const std::function<bool(const std::string&)>& stop = nullptr) {
  std::string out;
  auto end = std::chrono::steady_clock::now() + timeout;
  char buf[16384];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) continue;
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (stop && stop(out)) break;
  }
  return out;
}

// True when the peer closed `fd` within `timeout` (recv returned 0 or an error).
inline bool PeerClosed(int fd, std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    if (::recv(fd, buf, sizeof(buf), 0) <= 0) return true;
  }
  return false;
}

// Accepts one connection, reads the request head, writes `reply`, then closes.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::string reply) : reply_(std::move(reply)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 4);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 10'000) <= 0) return;
      int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      ReceiveUntil(fd, std::chrono::seconds(5),
                   [](const std::string& s) { return s.find("\r\n\r\n") != std::string::npos; });
      SendAll(fd, reply_);
      ::shutdown(fd, SHUT_WR);
      ReceiveUntil(fd, std::chrono::milliseconds(200));
      ::close(fd);
    });
  }
  ~ScriptedServer() {
    thread_.join();
    ::close(listen_fd_);
  }
  uint16_t port() const { return port_; }

 private:
  std::string reply_;
  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

}  // namespace mf::http::testing
