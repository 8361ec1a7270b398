#include "tools/local/kubelet/probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mf::local {
namespace {

using Millis = std::chrono::milliseconds;

StatusOr<int> ResolvePort(const Json& port, const Json& container) {
  if (port.is_number_integer()) {
    int64_t p = port.get<int64_t>();
    if (p < 1 || p > 65535) return InvalidArgument("probe port " + std::to_string(p) + " is out of range");
    return static_cast<int>(p);
  }
  if (port.is_string()) {
    std::string name = port.get<std::string>();
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos && name.size() < 6) {
      return ResolvePort(Json(std::stoll(name)), container);
    }
    if (auto ports = container.find("ports"); ports != container.end() && ports->is_array()) {
      for (const Json& p : *ports) {
        if (StringAt(p, {"name"}) == name) return ResolvePort(p.value("containerPort", Json()), container);
      }
    }
    return InvalidArgument("probe names port \"" + name + "\" which the container does not declare");
  }
  return InvalidArgument("probe port must be a number or a container port name");
}

// A connected TCP socket, or an error message. The socket is non-blocking.
int ConnectWithin(const std::string& host, int port, std::chrono::steady_clock::time_point deadline,
                  std::string* error) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    *error = "probe host \"" + host + "\" is not an IPv4 address";
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 && errno != EINPROGRESS) {
    *error = "dial tcp " + host + ":" + std::to_string(port) + ": " + std::strerror(errno);
    close(fd);
    return -1;
  }
  pollfd p{fd, POLLOUT, 0};
  auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
  if (poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0))) != 1) {
    *error = "dial tcp " + host + ":" + std::to_string(port) + ": i/o timeout";
    close(fd);
    return -1;
  }
  int err = 0;
  socklen_t len = sizeof(err);
  getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) {
    *error = "dial tcp " + host + ":" + std::to_string(port) + ": " + std::strerror(err);
    close(fd);
    return -1;
  }
  return fd;
}

ProbeOutcome HttpGet(const Json& action, const std::string& pod_ip, const Json& container, Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  if (StringAt(action, {"scheme"}, "HTTP") != "HTTP") {
    return {false, "only HTTP probes are supported by the local kubelet (scheme " + StringAt(action, {"scheme"}) + ")"};
  }
  auto port = ResolvePort(action.value("port", Json()), container);
  if (!port.ok()) return {false, port.status().message()};
  std::string host = StringAt(action, {"host"}, pod_ip);
  std::string path = StringAt(action, {"path"}, "/");
  if (path.empty() || path[0] != '/') path = "/" + path;
  std::string error;
  int fd = ConnectWithin(host, *port, deadline, &error);
  if (fd < 0) return {false, "Get \"http://" + host + ":" + std::to_string(*port) + path + "\": " + error};
  std::string request = "GET " + path + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(*port) +
                        "\r\nUser-Agent: kube-probe/1.32\r\nAccept: */*\r\nConnection: close\r\n";
  if (auto headers = action.find("httpHeaders"); headers != action.end() && headers->is_array()) {
    for (const Json& h : *headers) request += StringAt(h, {"name"}) + ": " + StringAt(h, {"value"}) + "\r\n";
  }
  request += "\r\n";
  size_t sent = 0;
  std::string response;
  while (true) {
    auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      close(fd);
      return {false, "Get \"http://" + host + ":" + std::to_string(*port) + path + "\": context deadline exceeded"};
    }
    pollfd p{fd, static_cast<short>(sent < request.size() ? POLLOUT : POLLIN), 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    if (sent < request.size()) {
      ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
      continue;
    }
    char buf[1024];
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
    if (response.find("\r\n") != std::string::npos) break;  // the status line is all we need
  }
  close(fd);
  // "HTTP/1.1 200 OK"
  int code = 0;
  if (response.size() >= 12 && response.compare(0, 5, "HTTP/") == 0) {
    code = std::atoi(response.c_str() + response.find(' ') + 1);
  }
  if (code >= 200 && code < 400) return {true, ""};
  if (code == 0) return {false, "HTTP probe got no valid response from " + host + ":" + std::to_string(*port)};
  return {false, "HTTP probe failed with statuscode: " + std::to_string(code)};
}

}  // namespace

StatusOr<ProbeTiming> ParseProbeTiming(const Json& probe) {
  ProbeTiming t;
  auto field = [&](const char* name, int64_t fallback, int64_t min) -> StatusOr<int64_t> {
    int64_t v = IntAt(probe, {name}, fallback);
    if (v < min) {
      return InvalidArgument(std::string("probe ") + name + " must be >= " + std::to_string(min));
    }
    return v;
  };
  MF_ASSIGN_OR_RETURN(int64_t delay, field("initialDelaySeconds", 0, 0));
  MF_ASSIGN_OR_RETURN(int64_t period, field("periodSeconds", 10, 1));
  MF_ASSIGN_OR_RETURN(int64_t timeout, field("timeoutSeconds", 1, 1));
  MF_ASSIGN_OR_RETURN(int64_t success, field("successThreshold", 1, 1));
  MF_ASSIGN_OR_RETURN(int64_t failure, field("failureThreshold", 3, 1));
  t.initial_delay = std::chrono::seconds(delay);
  t.period = std::chrono::seconds(period);
  t.timeout = std::chrono::seconds(timeout);
  t.success_threshold = static_cast<int>(success);
  t.failure_threshold = static_cast<int>(failure);
  return t;
}

ProbeOutcome RunProbe(const Json& probe, const std::string& pod_ip, const Json& container, const SpawnSpec& exec_base,
                      Millis timeout) {
  if (probe.contains("httpGet")) return HttpGet(probe["httpGet"], pod_ip, container, timeout);
  if (probe.contains("tcpSocket")) {
    const Json& action = probe["tcpSocket"];
    auto port = ResolvePort(action.value("port", Json()), container);
    if (!port.ok()) return {false, port.status().message()};
    std::string error;
    int fd =
        ConnectWithin(StringAt(action, {"host"}, pod_ip), *port, std::chrono::steady_clock::now() + timeout, &error);
    if (fd < 0) return {false, error};
    close(fd);
    return {true, ""};
  }
  if (probe.contains("exec")) {
    SpawnSpec spec = exec_base;
    spec.argv.clear();
    const Json& command = ObjectAt(probe, {"exec"}).value("command", Json::array());
    for (const Json& c : command) {
      if (c.is_string()) spec.argv.push_back(c.get<std::string>());
    }
    if (spec.argv.empty()) return {false, "exec probe has no command"};
    auto result = RunWithTimeout(spec, timeout);
    if (!result.ok()) return {false, result.status().message()};
    if (result->timed_out) return {false, "command timed out"};
    if (result->exit_code != 0) {
      return {false, "command exited with code " + std::to_string(result->exit_code)};
    }
    return {true, ""};
  }
  return {false, "probe has no httpGet, tcpSocket or exec action (grpc probes are not supported locally)"};
}

bool ProbeTracker::Due(TimePoint started, TimePoint now) const {
  if (now < started + timing_.initial_delay) return false;
  return !last_run_ || now >= *last_run_ + timing_.period;
}

bool ProbeTracker::Record(bool success, TimePoint now) {
  last_run_ = now;
  bool before = healthy_;
  if (success) {
    consecutive_failures_ = 0;
    if (++consecutive_successes_ >= timing_.success_threshold) healthy_ = true;
  } else {
    consecutive_successes_ = 0;
    if (++consecutive_failures_ >= timing_.failure_threshold) healthy_ = false;
  }
  return healthy_ != before;
}

}  // namespace mf::local
