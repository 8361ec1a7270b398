// Closed-loop REST load generator that times every request exactly: one poll() thread keeps one
// POST in flight on each of N keep-alive connections and re-sends the moment the answer is
// complete, like `wrk -t1 -cN`, but records each request's own latency (write to last byte) and
// reports percentiles over all of them. load_interference.py uses it next to wrk: on the shared
// 2-core VM wrk's p99 and this client's disagree while another model loads (docs/benchmarks.md).
// Every answer must be HTTP 200 with a complete Content-Length body, or it counts as an error.
// Prints one line: "rps=<r> p50_ms=<x> p99_ms=<y> p999_ms=<z> max_ms=<m> wrk_p99_ms=<w> errors=<n>".
// wrk_p99_ms is the p99 after the coordinated-omission correction wrk 4 applies to its own
// latencies (stats_correct in wrk's stats.c): each request slower than a connection's mean
// interval also counts as the requests an open-loop client would have sent meanwhile, so a few
// millisecond stalls, which barely move the raw p99 of two closed-loop connections, lift it.
//
// With a rate (requests/s, all connections together) it is an open-loop client instead, as real
// traffic is: request k is due at start + k / rate whatever the answers do, goes out on the
// first free connection, and its latency runs from when it was due (so a stall also counts for
// every request that came due during it, measured rather than estimated as wrk does).
//
//   rest_predict_load <port> <clients> <seconds> <path> <body file> [<rate>]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Connection {
  int fd = -1;
  Clock::time_point sent;
  std::string in;
};

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

bool SendAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// The length of the first complete response in `in` (0: not complete yet); `ok` tells whether it
// was a 200 with a Content-Length (the server always sends one).
size_t CompleteResponse(const std::string& in, bool* ok) {
  size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos) return 0;
  std::string_view head(in.data(), head_end);
  size_t length_at = head.find("Content-Length:");
  if (length_at == std::string_view::npos) length_at = head.find("content-length:");
  *ok = head.substr(0, 12) == "HTTP/1.1 200" && length_at != std::string_view::npos;
  size_t body = length_at == std::string_view::npos ? 0 : std::strtoul(head.data() + length_at + 15, nullptr, 10);
  size_t total = head_end + 4 + body;
  return in.size() >= total ? total : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: %s <port> <clients> <seconds> <path> <body file> [<rate>]\n", argv[0]);
    return 2;
  }
  const double rate = argc == 7 ? std::atof(argv[6]) : 0;  // 0: closed loop
  const int port = std::atoi(argv[1]);
  const int clients = std::atoi(argv[2]);
  const double seconds = std::atof(argv[3]);
  std::ifstream body_file(argv[5], std::ios::binary);
  std::stringstream body;
  body << body_file.rdbuf();
  if (port <= 0 || clients <= 0 || seconds <= 0 || rate < 0 || !body_file) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }
  const std::string request = "POST " + std::string(argv[4]) +
                              " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
                              std::to_string(body.str().size()) + "\r\n\r\n" + body.str();

  std::vector<Connection> connections(static_cast<size_t>(clients));
  std::vector<pollfd> polls(connections.size());
  for (size_t i = 0; i < connections.size(); ++i) {
    connections[i].fd = Connect(port);
    polls[i] = {connections[i].fd, POLLIN, 0};
  }
  std::vector<double> latencies_ms;
  latencies_ms.reserve(1 << 20);
  long errors = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  // Open loop: the next request's due time, and the connections with nothing in flight.
  long sent_count = 0;
  auto due = [&] {
    return start + std::chrono::duration_cast<Clock::duration>(
                       std::chrono::duration<double>(static_cast<double>(sent_count) / rate));
  };
  std::vector<size_t> idle;
  for (size_t i = 0; i < connections.size(); ++i) {
    Connection& c = connections[i];
    if (rate > 0) {
      idle.push_back(i);
      continue;
    }
    c.sent = Clock::now();
    if (!SendAll(c.fd, request)) return 1;
  }
  // Sends every request that is due on the idle connections; the poll timeout until the next one.
  auto send_due = [&]() -> int {
    if (rate <= 0) return 1000;
    for (auto now = Clock::now(); !idle.empty() && due() <= now; now = Clock::now()) {
      Connection& c = connections[idle.back()];
      idle.pop_back();
      c.sent = due();  // latency counts from when it was due, queueing at the client included
      ++sent_count;
      if (!SendAll(c.fd, request)) std::exit(1);
    }
    if (idle.empty()) return 1000;  // an answer frees a connection first
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(due() - Clock::now()).count();
    return static_cast<int>(std::clamp<long>(wait, 0, 1000));
  };
  char buffer[65536];
  while (Clock::now() < end) {
    if (poll(polls.data(), polls.size(), send_due()) < 0) return 1;
    for (size_t i = 0; i < polls.size(); ++i) {
      if ((polls[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      Connection& c = connections[i];
      ssize_t n = recv(c.fd, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        std::fprintf(stderr, "connection %zu closed by the server\n", i);
        return 1;
      }
      c.in.append(buffer, static_cast<size_t>(n));
      bool ok = false;
      size_t length = CompleteResponse(c.in, &ok);
      if (length == 0) continue;
      const auto now = Clock::now();
      latencies_ms.push_back(std::chrono::duration<double, std::milli>(now - c.sent).count());
      errors += ok ? 0 : 1;
      c.in.erase(0, length);
      if (rate > 0) {
        idle.push_back(i);
        continue;
      }
      c.sent = now;
      if (!SendAll(c.fd, request)) return 1;
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  for (Connection& c : connections) close(c.fd);
  if (latencies_ms.empty()) return 1;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto percentile = [](const std::vector<double>& sorted, double q) {
    return sorted[static_cast<size_t>(q * static_cast<double>(sorted.size() - 1))];
  };
  // wrk's correction: the expected interval is a connection's mean time per request; a latency L
  // adds samples at L - k * interval for every k with L - k * interval > interval.
  const double interval_ms = elapsed * 1e3 / (static_cast<double>(latencies_ms.size()) / clients);
  // An open-loop run needs no correction: its latencies already count from when each was due.
  std::vector<double> corrected = latencies_ms;
  for (double latency : rate > 0 ? std::vector<double>{} : latencies_ms) {
    for (double m = latency - interval_ms; latency >= 2 * interval_ms && m > interval_ms; m -= interval_ms) {
      corrected.push_back(m);
    }
  }
  std::sort(corrected.begin(), corrected.end());
  std::printf("rps=%.1f p50_ms=%.4f p99_ms=%.4f p999_ms=%.4f max_ms=%.4f wrk_p99_ms=%.4f errors=%ld\n",
              static_cast<double>(latencies_ms.size()) / elapsed, percentile(latencies_ms, 0.50),
              percentile(latencies_ms, 0.99), percentile(latencies_ms, 0.999), latencies_ms.back(),
              percentile(corrected, 0.99), errors);
  return 0;
}
