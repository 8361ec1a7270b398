#include "bench/server/lean_grpc_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <deque>
#include <memory>

#include "http2/frame.h"
#include "http2/hpack.h"

namespace mf::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace frame = http2::frame;

// What this client lets the server send before a WINDOW_UPDATE: large, as grpc++ negotiates.
constexpr int64_t kStreamWindow = 16 << 20;
constexpr int64_t kConnectionWindow = 64 << 20;

struct Call {
  int32_t stream = 0;  // 0: no call in flight
  Clock::time_point sent;
  size_t request_sent = 0;  // bytes of the gRPC-framed request written so far
  int64_t send_window = 0;
  int http_status = 0;
  bool grpc_ok = false;
  std::string body;
};

// :status and grpc-status of an answer's header blocks.
class AnswerFields final : public http2::hpack::FieldSink {
 public:
  explicit AnswerFields(Call* call) : call_(call) {}
  void OnField(std::string_view name, std::string_view value) override {
    if (name == ":status") call_->http_status = value == "200" ? 200 : 1;
    if (name == "grpc-status") call_->grpc_ok = value == "0";
  }

 private:
  Call* call_;
};

class Run;

// One HTTP/2 connection carrying some of the calls, as a gRPC channel multiplexes its callers'.
class Connection {
 public:
  Connection(Run* run, int fd, size_t calls) : run_(run), fd_(fd), calls_(calls) {}
  ~Connection() { close(fd_); }

  int fd() const { return fd_; }
  bool wants_write() const { return !out_.empty(); }

  // Writes the connection preface (SETTINGS, a large connection window).
  void Open();
  // Sends the first `calls` of this connection's calls; each is re-sent while the phase lasts.
  void Launch(size_t calls);
  bool OnReadable();  // false: the connection failed
  bool Flush();

 private:
  void Send(Call& call);
  void Pump();
  bool Parse();
  bool OnFrame(const frame::Header& h, const uint8_t* payload, size_t length);
  bool OnHeaderBlock(int32_t stream, bool end_stream);
  void Complete(Call& call, bool good);
  Call* Find(int32_t stream);
  bool Fail(std::string why);

  Run* run_;
  int fd_;
  std::vector<Call> calls_;
  http2::hpack::Encoder encoder_;
  http2::hpack::Decoder decoder_;
  int32_t next_stream_ = 1;
  std::string in_;
  std::string out_;
  std::string block_;
  int32_t block_stream_ = 0;
  bool block_ends_stream_ = false;
  std::deque<Call*> sending_;  // calls with request bytes still to write
  int64_t send_window_ = http2::kDefaultWindowBytes;
  int64_t peer_initial_window_ = http2::kDefaultWindowBytes;
  size_t peer_max_frame_ = http2::kDefaultMaxFrameBytes;
  int64_t received_ = 0;  // DATA bytes since the last connection WINDOW_UPDATE
};

class Run {
 public:
  Run(const GrpcLoad& load, LoadResult* result) : load_(load), result_(result) {
    frame_.push_back('\0');
    for (int shift = 24; shift >= 0; shift -= 8)
      frame_.push_back(static_cast<char>((load.message.size() >> shift) & 0xff));
    frame_ += load.message;
    authority_ = load.host + ":" + load.port;
  }

  const GrpcLoad& load() const { return load_; }
  const std::string& frame() const { return frame_; }
  const std::string& authority() const { return authority_; }
  bool measuring() const { return measuring_; }
  bool resend(Clock::time_point now) const { return now < deadline_; }

  void Record(Clock::time_point sent, Clock::time_point now, bool good) {
    if (!measuring_) {
      warm_errors_ += good ? 0 : 1;
      return;
    }
    if (good) {
      result_->latencies_ms.push_back(std::chrono::duration<double, std::milli>(now - sent).count());
    } else {
      ++result_->errors;
    }
  }
  void SetFailure(std::string why) {
    if (failure_.empty()) failure_ = std::move(why);
  }
  const std::string& failure() const { return failure_; }
  long warm_errors() const { return warm_errors_; }

  void CallStarted() { ++in_flight_; }
  void CallEnded() { --in_flight_; }

  // Runs every connection until no call is in flight, or `limit` passes. epoll, level-triggered,
  // as wrk: a wakeup costs what is ready, not a check of every connection (poll() on 64
  // connections cost ~1 µs of kernel time per call).
  bool Loop(std::vector<std::unique_ptr<Connection>>& connections, Clock::time_point limit) {
    const int epoll = epoll_create1(EPOLL_CLOEXEC);
    if (epoll < 0) return Fail("epoll_create1 failed");
    // EPOLLOUT only while a connection has bytes the socket did not take (rare).
    std::vector<bool> watching_out(connections.size(), false);
    auto watch = [&](size_t i, int op) {
      epoll_event event{};
      event.events = watching_out[i] ? EPOLLIN | EPOLLOUT : EPOLLIN;
      event.data.u64 = i;
      return epoll_ctl(epoll, op, connections[i]->fd(), &event) == 0;
    };
    bool ok = true;
    for (size_t i = 0; ok && i < connections.size(); ++i) {
      watching_out[i] = connections[i]->wants_write();
      ok = watch(i, EPOLL_CTL_ADD) || Fail("epoll_ctl failed");
    }
    std::array<epoll_event, 64> ready;
    while (ok && in_flight_ > 0) {
      if (Clock::now() > limit) {
        ok = Fail("calls still unanswered 30 s after the end");
        break;
      }
      const int n = epoll_wait(epoll, ready.data(), static_cast<int>(ready.size()), 1000);
      if (n < 0 && errno != EINTR) ok = Fail("epoll_wait failed");
      for (int k = 0; ok && k < n; ++k) {
        const size_t i = ready[k].data.u64;
        Connection& connection = *connections[i];
        if ((ready[k].events & EPOLLOUT) != 0) ok = connection.Flush();
        if (ok && (ready[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0) ok = connection.OnReadable();
        if (ok && connection.wants_write() != watching_out[i]) {
          watching_out[i] = !watching_out[i];
          ok = watch(i, EPOLL_CTL_MOD) || Fail("epoll_ctl failed");
        }
      }
    }
    close(epoll);
    return ok;
  }

  void StartPhase(bool measuring, Clock::time_point deadline) {
    measuring_ = measuring;
    deadline_ = deadline;
  }

 private:
  bool Fail(std::string why) {
    SetFailure(std::move(why));
    return false;
  }

  size_t in_flight_ = 0;  // calls sent and not yet answered, every connection together
  const GrpcLoad& load_;
  LoadResult* result_;
  std::string frame_;
  std::string authority_;
  Clock::time_point deadline_;
  bool measuring_ = false;
  long warm_errors_ = 0;
  std::string failure_;
};

void Connection::Open() {
  out_.append(http2::kClientPreface);
  frame::AppendHeader(12, frame::kSettings, 0, 0, &out_);
  frame::AppendSetting(frame::kEnablePush, 0, &out_);
  frame::AppendSetting(frame::kInitialWindowSize, static_cast<uint32_t>(kStreamWindow), &out_);
  frame::AppendWindowUpdate(0, static_cast<uint32_t>(kConnectionWindow - http2::kDefaultWindowBytes), &out_);
}

void Connection::Launch(size_t calls) {
  for (size_t i = 0; i < std::min(calls, calls_.size()); ++i) Send(calls_[i]);
  Pump();
  Flush();
}

void Connection::Send(Call& call) {
  call.stream = next_stream_;
  next_stream_ += 2;
  call.request_sent = 0;
  call.send_window = peer_initial_window_;
  call.http_status = 0;
  call.grpc_ok = false;
  call.body.clear();
  call.sent = Clock::now();
  std::string block;
  encoder_.BeginBlock(&block);
  encoder_.Add(":method", "POST", &block);
  encoder_.Add(":scheme", "http", &block);
  encoder_.Add(":path", run_->load().path, &block);
  encoder_.Add(":authority", run_->authority(), &block);
  encoder_.Add("content-type", "application/grpc", &block);
  encoder_.Add("te", "trailers", &block);
  encoder_.Add("grpc-timeout", "30S", &block);
  frame::AppendHeader(static_cast<uint32_t>(block.size()), frame::kHeaders, frame::kEndHeaders, call.stream, &out_);
  out_ += block;
  sending_.push_back(&call);
  run_->CallStarted();
}

// Writes request DATA as far as the windows let it; the last frame ends the stream.
void Connection::Pump() {
  const std::string& request = run_->frame();
  while (!sending_.empty()) {
    Call& call = *sending_.front();
    const size_t left = request.size() - call.request_sent;
    const int64_t window = std::min(send_window_, call.send_window);
    if (left > 0 && window <= 0) return;  // WINDOW_UPDATE will call again
    const size_t n = std::min({left, peer_max_frame_, static_cast<size_t>(std::max<int64_t>(window, 0))});
    const bool last = n == left;
    frame::AppendHeader(static_cast<uint32_t>(n), frame::kData, last ? frame::kEndStream : 0, call.stream, &out_);
    out_.append(request, call.request_sent, n);
    call.request_sent += n;
    send_window_ -= static_cast<int64_t>(n);
    call.send_window -= static_cast<int64_t>(n);
    if (last) sending_.pop_front();
  }
}

bool Connection::Flush() {
  while (!out_.empty()) {
    const ssize_t n = send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;  // POLLOUT resumes
      return Fail("write failed");
    }
    out_.erase(0, static_cast<size_t>(n));
  }
  return true;
}

bool Connection::OnReadable() {
  char buffer[64 * 1024];
  const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
  if (n == 0) return Fail("the server closed the connection");
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? true : Fail("read failed");
  in_.append(buffer, static_cast<size_t>(n));
  if (!Parse()) return false;
  Pump();
  return Flush();
}

bool Connection::Parse() {
  size_t at = 0;
  while (in_.size() - at >= http2::kFrameHeaderBytes) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(in_.data() + at);
    const frame::Header h = frame::ParseHeader(bytes);
    if (in_.size() - at - http2::kFrameHeaderBytes < h.length) break;
    if (!OnFrame(h, bytes + http2::kFrameHeaderBytes, h.length)) return false;
    at += http2::kFrameHeaderBytes + h.length;
  }
  in_.erase(0, at);
  return true;
}

bool Connection::OnFrame(const frame::Header& h, const uint8_t* payload, size_t length) {
  switch (h.type) {
    case frame::kSettings:
      if ((h.flags & frame::kAck) != 0) return true;
      for (size_t at = 0; at + 6 <= length; at += 6) {
        const uint16_t id = static_cast<uint16_t>((payload[at] << 8) | payload[at + 1]);
        const uint32_t value = frame::ReadU32(payload + at + 2);
        if (id == frame::kInitialWindowSize) {
          for (Call& call : calls_) call.send_window += int64_t{value} - peer_initial_window_;
          peer_initial_window_ = value;
        } else if (id == frame::kMaxFrameSize) {
          peer_max_frame_ = value;
        } else if (id == frame::kHeaderTableSize) {
          encoder_.SetPeerMaxTableSize(value);
        }
      }
      frame::AppendHeader(0, frame::kSettings, frame::kAck, 0, &out_);
      return true;
    case frame::kPing:
      if ((h.flags & frame::kAck) == 0 && length == 8) {
        frame::AppendHeader(8, frame::kPing, frame::kAck, 0, &out_);
        out_.append(reinterpret_cast<const char*>(payload), 8);
      }
      return true;
    case frame::kWindowUpdate: {
      const int64_t increment = frame::ReadU32(payload) & 0x7fffffff;
      if (h.stream_id == 0) {
        send_window_ += increment;
      } else if (Call* call = Find(h.stream_id)) {
        call->send_window += increment;
      }
      return true;
    }
    case frame::kGoaway:
      return Fail("the server sent GOAWAY");
    case frame::kRstStream:
      if (Call* call = Find(h.stream_id)) Complete(*call, false);
      return true;
    case frame::kData: {
      received_ += static_cast<int64_t>(length);
      if (received_ >= kConnectionWindow / 2) {
        frame::AppendWindowUpdate(0, static_cast<uint32_t>(received_), &out_);
        received_ = 0;
      }
      Call* call = Find(h.stream_id);
      if (call == nullptr) return true;
      const frame::Content content = frame::StripPadding(frame::kData, h.flags, payload, length);
      if (content.problem != frame::Content::kNone) return Fail("bad DATA padding from the server");
      call->body.append(reinterpret_cast<const char*>(content.data), content.size);
      if (call->body.size() > static_cast<size_t>(kStreamWindow)) return Fail("an answer larger than its window");
      if ((h.flags & frame::kEndStream) != 0) Complete(*call, true);
      return true;
    }
    case frame::kHeaders: {
      const frame::Content content = frame::StripPadding(frame::kHeaders, h.flags, payload, length);
      if (content.problem != frame::Content::kNone) return Fail("bad HEADERS from the server");
      block_.assign(reinterpret_cast<const char*>(content.data), content.size);
      block_stream_ = h.stream_id;
      block_ends_stream_ = (h.flags & frame::kEndStream) != 0;
      return (h.flags & frame::kEndHeaders) == 0 || OnHeaderBlock(block_stream_, block_ends_stream_);
    }
    case frame::kContinuation:
      if (h.stream_id != block_stream_) return Fail("CONTINUATION out of place");
      block_.append(reinterpret_cast<const char*>(payload), length);
      return (h.flags & frame::kEndHeaders) == 0 || OnHeaderBlock(block_stream_, block_ends_stream_);
    default:
      return true;
  }
}

bool Connection::OnHeaderBlock(int32_t stream, bool end_stream) {
  Call* call = Find(stream);
  Call ignored;
  AnswerFields fields(call != nullptr ? call : &ignored);
  Status status = decoder_.Decode(block_, fields);
  if (!status.ok()) return Fail("HPACK error from the server: " + status.message());
  if (call != nullptr && end_stream) Complete(*call, true);
  return true;
}

void Connection::Complete(Call& call, bool ended) {
  const Clock::time_point now = Clock::now();
  // What a gRPC client accepts: HTTP 200, grpc-status 0 and exactly one message that checks.
  const std::string& body = call.body;
  bool good = ended && call.http_status == 200 && call.grpc_ok && body.size() >= 5 && body[0] == 0;
  if (good) {
    const size_t length = (size_t{static_cast<uint8_t>(body[1])} << 24) |
                          (size_t{static_cast<uint8_t>(body[2])} << 16) | (size_t{static_cast<uint8_t>(body[3])} << 8) |
                          static_cast<uint8_t>(body[4]);
    good = length == body.size() - 5 && run_->load().check(std::string_view(body).substr(5));
  }
  run_->Record(call.sent, now, good);
  sending_.erase(std::remove(sending_.begin(), sending_.end(), &call), sending_.end());
  run_->CallEnded();
  call.stream = 0;
  if (run_->resend(now)) Send(call);
}

Call* Connection::Find(int32_t stream) {
  for (Call& call : calls_) {
    if (call.stream == stream && stream != 0) return &call;
  }
  return nullptr;
}

bool Connection::Fail(std::string why) {
  run_->SetFailure(std::move(why));
  return false;
}

// A connected, non-blocking TCP socket with Nagle off; -1 with `failure` set otherwise.
int Connect(const std::string& host, const std::string& port, std::string* failure) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || found == nullptr) {
    *failure = "cannot resolve " + host + ":" + port;
    return -1;
  }
  int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  const bool connected = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0;
  freeaddrinfo(found);
  if (!connected) {
    if (fd >= 0) close(fd);
    *failure = "cannot connect to " + host + ":" + port;
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

}  // namespace

bool RunLeanGrpc(const GrpcLoad& load, LoadResult* result, std::string* failure) {
  Run run(load, result);
  std::vector<std::unique_ptr<Connection>> connections;
  for (int i = 0; i < load.connections; ++i) {
    const int fd = Connect(load.host, load.port, failure);
    if (fd < 0) return false;
    const int calls = load.clients / load.connections + (i < load.clients % load.connections ? 1 : 0);
    connections.push_back(std::make_unique<Connection>(&run, fd, static_cast<size_t>(calls)));
    connections.back()->Open();
  }
  // Warm-up: one call per connection before the clock starts, on the connections the load then
  // uses (in steady state a channel's HPACK tables and windows are warm too).
  run.StartPhase(false, Clock::now());
  for (auto& connection : connections) connection->Launch(1);
  if (!run.Loop(connections, Clock::now() + std::chrono::seconds(30)) || run.warm_errors() > 0) {
    *failure = run.failure().empty() ? "the warm-up calls failed" : run.failure();
    return false;
  }
  const Clock::time_point begin = Clock::now();
  run.StartPhase(true, begin + std::chrono::seconds(load.seconds));
  for (auto& connection : connections) connection->Launch(SIZE_MAX);
  const bool ok = run.Loop(connections, begin + std::chrono::seconds(load.seconds + 30));
  result->elapsed_s = std::chrono::duration<double>(Clock::now() - begin).count();
  if (!ok) *failure = run.failure();
  return ok;
}

}  // namespace mf::bench
