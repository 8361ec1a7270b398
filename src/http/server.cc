// The Beast server: the shared io skeleton (http/io_server.h) hands each connection to one io
// thread (round robin); a Session then lives on that thread only. Cross-thread entry points (Responder, Stream) post to
// the session's io_context, so session state needs no lock; only a stream's chunk queue, which producers fill from
// their own threads, has a mutex. With TLS configured a session wraps its socket in an OpenSSL stream and handshakes
// first; every read and write of the HTTP exchange goes through AsyncReadSome / AsyncWrite, which pick the plain socket
// or the TLS stream, so the plain path is the same code with one branch.
#include "http/server.h"

#include <openssl/err.h>
#include <openssl/x509.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/histogram.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "common/coarse_clock.h"
#include "common/logging.h"
#include "http/io_server.h"
#include "http/wire.h"
#include "metrics/metrics.h"

namespace mf::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace internal {

class Session;

// State every io thread shares; immutable after Start() except the atomics.
struct Core {
  ServerOptions options;
  wire::Limits limits;
  Handler handler;
  std::unique_ptr<ssl::context> tls;  // null: plain HTTP
  ConnectionCounts connections;
  std::atomic<uint64_t> requests{0};
  prometheus::Family<prometheus::Counter>* requests_total = nullptr;
  prometheus::Histogram* duration = nullptr;
};

// One io thread (see http/io_server.h) with the request counters its sessions use.
struct Worker : IoWorker<Session> {
  std::unordered_map<uint32_t, prometheus::Counter*> counters;  // (method, code) -> counter
};

// The server's answer to a request it refuses (bad syntax, limits).
Response RejectionResponse(const wire::Rejection& r) {
  Response response = Response::FromStatus(Status(StatusCode::kInvalidArgument, r.message));
  response.status = r.status;
  return response;
}

// The Date header value, formatted at most once a second per io thread.
std::string_view HttpDate() {
  thread_local std::time_t cached_second = 0;
  thread_local char text[64];
  thread_local size_t length = 0;
  std::time_t now = std::time(nullptr);
  if (now != cached_second) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    length = std::strftime(text, sizeof(text), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cached_second = now;
  }
  return std::string_view(text, length);
}

// A bounded, printable incoming x-request-id is propagated; anything else is replaced.
bool UsableRequestId(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (unsigned char c : id) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

uint32_t MethodIndex(std::string_view m) {
  static constexpr std::array<std::string_view, 7> kKnown = {"GET",   "POST", "PUT",    "DELETE",
                                                             "PATCH", "HEAD", "OPTIONS"};
  for (uint32_t i = 0; i < kKnown.size(); ++i) {
    if (kKnown[i] == m) return i;
  }
  return kKnown.size();
}

std::string_view MethodLabel(uint32_t index) {
  static constexpr std::array<std::string_view, 8> kLabels = {"GET",   "POST", "PUT",     "DELETE",
                                                              "PATCH", "HEAD", "OPTIONS", "OTHER"};
  return kLabels[index];
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<Worker> worker, std::shared_ptr<Core> core, tcp::socket socket)
      : worker_(std::move(worker)), core_(std::move(core)), socket_(std::move(socket)), reader_(core_->limits) {
    if (core_->tls) tls_.emplace(std::move(socket_), *core_->tls);
  }

  // All of the following run on the session's io thread unless they say otherwise.
  void Start() {
    worker_->connections.insert(this);
    beast::error_code ec;
    auto endpoint = Socket().remote_endpoint(ec);
    if (!ec) remote_ = endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
    Socket().set_option(tcp::no_delay(true), ec);
    if (core_->connections.draining) return Close();
    if (tls_) return Handshake();
    ReadRequest();
  }

  void Drain() {
    switch (state_) {
      case State::kIdle:
        return Close();
      case State::kStreaming:
        return StreamClose();
      default:
        return;  // finishes its request, then closes because the server is draining
    }
  }

  // Called by the worker's sweep timer: closes the connection when its current phase (idle wait,
  // request read, response write) has run past its deadline.
  void CloseIfExpired(Clock::time_point now) {
    if (now < deadline_) return;
    if (state_ == State::kReading) {
      mf::log::Debug("http request read timed out", {{"remote", remote_}});
    }
    Close();
  }

  void Close() {
    if (state_ == State::kClosed) return;
    bool was_streaming = state_ == State::kStreaming;
    state_ = State::kClosed;
    deadline_ = Clock::time_point::max();
    worker_->connections.erase(this);
    beast::error_code ec;
    Socket().shutdown(tcp::socket::shutdown_both, ec);
    Socket().close(ec);
    if (was_streaming) EndStream();
    core_->connections.ConnectionClosed();
  }

  asio::io_context& context() { return worker_->ioc; }
  bool stopped() const { return worker_->ioc.stopped(); }

  // The answer to the current request (posted by the Exchange).
  void WriteResponse(Response response) {
    if (state_ != State::kHandling) return;  // connection already gone
    if (core_->connections.draining) keep_alive_ = false;
    head_.clear();
    if (!wire::AppendStatusAndHeaders(response, &head_)) {
      mf::log::Error("http handler produced an invalid response; answering 500",
                     {{"status", std::to_string(response.status)}});
      response = Response::Text(500, "handler produced an invalid response header\n");
      head_.clear();
      (void)wire::AppendStatusAndHeaders(response, &head_);
    }
    AppendServerHeaders(response.headers);
    bool bodyless = response.status < 200 || response.status == 204 || response.status == 304;
    if (!bodyless) wire::AppendContentLength(response.body.size(), &head_);
    if (!keep_alive_) {
      wire::AppendHeader("Connection", "close", &head_);
    } else if (http10_) {
      wire::AppendHeader("Connection", "keep-alive", &head_);  // HTTP/1.0 closes unless told
    }
    head_.append("\r\n", 2);
    body_ = std::move(response.body);
    if (bodyless || head_request_) body_.clear();
    status_ = response.status;
    state_ = State::kWriting;
    deadline_ = CoarseNow() + core_->options.write_timeout;
    std::array<asio::const_buffer, 2> buffers = {asio::buffer(head_), asio::buffer(body_)};
    AsyncWrite(buffers, [self = shared_from_this()](beast::error_code ec, size_t) { self->OnResponseWritten(ec); });
  }

  // --- streaming (the chunk queue is shared with producer threads) ---

  void StartStream(int status, Headers headers) {
    if (state_ != State::kHandling) return EndStream();
    Response response;
    response.status = status;
    response.headers = std::move(headers);
    head_.clear();
    if (!wire::AppendStatusAndHeaders(response, &head_)) {
      mf::log::Error("http stream has an invalid header; closing", {{"status", std::to_string(status)}});
      return Close();
    }
    AppendServerHeaders(response.headers);
    wire::AppendHeader("Transfer-Encoding", "chunked", &head_);
    // A stream ends the connection: the peer-gone watch below consumes the socket's input.
    wire::AppendHeader("Connection", "close", &head_);
    head_.append("\r\n", 2);
    status_ = status;
    state_ = State::kStreaming;
    body_.clear();
    LogAndCount();
    stream_writing_ = true;
    deadline_ = CoarseNow() + core_->options.write_timeout;
    AsyncWrite(asio::buffer(head_),
               [self = shared_from_this()](beast::error_code ec, size_t) { self->OnStreamWritten(ec, 0, false); });
    WatchForPeerGone();
  }

  // Any thread.
  bool StreamWrite(std::string chunk) {
    if (chunk.empty()) return !stream_ended_.load();
    std::lock_guard lock(stream_mu_);
    if (stream_ended_ || stream_close_requested_) return false;
    stream_buffered_ += chunk.size();
    stream_queue_.push_back(std::move(chunk));
    ScheduleFlushLocked();
    return true;
  }

  // Any thread.
  void StreamClose() {
    std::lock_guard lock(stream_mu_);
    if (stream_ended_ || stream_close_requested_) return;
    stream_close_requested_ = true;
    ScheduleFlushLocked();
  }

  bool stream_ended() const { return stream_ended_.load(); }
  size_t stream_buffered() const {
    std::lock_guard lock(stream_mu_);
    return stream_buffered_;
  }

  // Any thread.
  void StreamOnClose(std::function<void()> callback) {
    {
      std::lock_guard lock(stream_mu_);
      if (!stream_ended_) {
        stream_callbacks_.push_back(std::move(callback));
        return;
      }
    }
    callback();
  }

  // Ends the stream (peer gone, closed, drained) and runs the OnClose callbacks once.
  void EndStream() {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard lock(stream_mu_);
      if (stream_ended_) return;
      stream_ended_ = true;
      stream_queue_.clear();
      stream_buffered_ = 0;
      callbacks.swap(stream_callbacks_);
    }
    for (auto& cb : callbacks) {
      try {
        cb();
      } catch (const std::exception& e) {
        mf::log::Error("http stream OnClose callback threw", {{"error", e.what()}});
      }
    }
    Close();
  }

 private:
  enum class State { kIdle, kReading, kHandling, kWriting, kStreaming, kClosed };

  // Starts the next request: parses what is buffered (pipelining) or waits for bytes.
  void ReadRequest() {
    reader_.Reset();
    if (buffer_.size() > 0) {
      state_ = State::kReading;
      deadline_ = CoarseNow() + core_->options.read_timeout;
      return Parse();
    }
    state_ = State::kIdle;
    deadline_ = CoarseNow() + core_->options.idle_timeout;
    ReadMore();
  }

  void ReadMore() {
    // Beast's parser is fed by hand (put) rather than through async_read: one read system call
    // and no composed operation per request on the hot path.
    AsyncReadSome(buffer_.prepare(kReadChunk),
                  [self = shared_from_this()](beast::error_code ec, size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(beast::error_code ec, size_t n) {
    if (state_ == State::kClosed) return;
    if (ec) return Close();  // peer closed or reset, timed out (swept) or drained
    buffer_.commit(n);
    if (state_ == State::kIdle) {
      state_ = State::kReading;
      deadline_ = CoarseNow() + core_->options.read_timeout;
    }
    Parse();
  }

  void Parse() {
    for (;;) {
      switch (reader_.Feed(buffer_)) {
        case wire::RequestReader::Progress::kNeedMore:
          return ReadMore();
        case wire::RequestReader::Progress::kRejected:
          return Reject(reader_.rejection());
        case wire::RequestReader::Progress::kHeaderDone:
          start_ = Clock::now();
          if (reader_.WantsContinue() && buffer_.size() == 0) return SendContinue();
          continue;
        case wire::RequestReader::Progress::kMessageDone:
          if (start_ == Clock::time_point()) start_ = Clock::now();
          return OnRequest();
      }
    }
  }

  // The header passed every check (size limits included), so invite the body.
  void SendContinue() {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    AsyncWrite(asio::buffer(kContinue.data(), kContinue.size()),
               [self = shared_from_this()](beast::error_code ec, size_t) {
                 if (self->state_ == State::kClosed) return;
                 if (ec) return self->Close();
                 self->ReadMore();
               });
  }

  // Answers a refused request and closes: the rest of the input is not trustworthy.
  void Reject(const wire::Rejection& rejection) {
    keep_alive_ = false;
    head_request_ = false;
    if (start_ == Clock::time_point()) start_ = Clock::now();
    method_index_ = MethodIndex(wire::ToStd(reader_.parser().get().method_string()));
    target_ = std::string(wire::ToStd(reader_.parser().get().target()));
    request_id_ = mf::log::NewRequestId();
    state_ = State::kHandling;
    WriteResponse(RejectionResponse(rejection));
  }

  void OnRequest() {
    state_ = State::kHandling;
    deadline_ = Clock::time_point::max();  // the handler takes the time it needs
    keep_alive_ = reader_.parser().get().keep_alive();
    http10_ = reader_.parser().get().version() < 11;
    Request request;
    if (auto rejected = wire::ToRequest(reader_.parser().release(), core_->limits, &request)) {
      return Reject(*rejected);
    }
    method_index_ = MethodIndex(request.method);
    head_request_ = request.method == "HEAD";
    if (mf::log::Enabled(mf::log::Level::kDebug)) target_ = request.target;
    auto incoming_id = request.headers.Get("x-request-id");
    request_id_ = incoming_id && UsableRequestId(*incoming_id) ? std::string(*incoming_id) : mf::log::NewRequestId();
    request.request_id = request_id_;
    request.remote_address = remote_;
    core_->requests.fetch_add(1, std::memory_order_relaxed);
    mf::log::RequestIdScope scope(request_id_);
    try {
      // Last statement touching the session: the handler may answer inline (and the answer may
      // already be on its way to the socket when it returns).
      core_->handler(std::move(request), Responder(std::make_shared<Exchange>(shared_from_this())));
    } catch (const std::exception& e) {
      // The Responder died with the handler's frame, so the client gets a 500.
      mf::log::Error("http handler threw", {{"error", e.what()}});
    }
  }

  void AppendServerHeaders(const Headers& headers) {
    wire::AppendHeader("Date", HttpDate(), &head_);
    if (!core_->options.server_header.empty()) wire::AppendHeader("Server", core_->options.server_header, &head_);
    if (!headers.Has("x-request-id")) wire::AppendHeader("x-request-id", request_id_, &head_);
    for (const auto& [name, value] : core_->options.response_headers.fields()) {
      if (!headers.Has(name)) wire::AppendHeader(name, value, &head_);
    }
  }

  void LogAndCount() {
    if (core_->requests_total != nullptr) {
      uint32_t key = method_index_ * 1000 + static_cast<uint32_t>(status_);
      auto [it, inserted] = worker_->counters.try_emplace(key, nullptr);
      if (inserted) {
        it->second = &core_->requests_total->Add({{"server", core_->options.metrics_label},
                                                  {"method", std::string(MethodLabel(method_index_))},
                                                  {"code", std::to_string(status_)}});
      }
      it->second->Increment();
      core_->duration->Observe(std::chrono::duration<double>(Clock::now() - start_).count());
    }
    if (mf::log::Enabled(mf::log::Level::kDebug)) {
      auto micros = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_).count();
      mf::log::Debug("http request", {{"request_id", request_id_},
                                      {"method", std::string(MethodLabel(method_index_))},
                                      {"target", target_},
                                      {"status", std::to_string(status_)},
                                      {"bytes", std::to_string(body_.size())},
                                      {"duration_us", std::to_string(micros)},
                                      {"remote", remote_}});
    }
  }

  void OnResponseWritten(beast::error_code ec) {
    if (state_ == State::kClosed) return;
    LogAndCount();
    start_ = Clock::time_point();
    if (ec) return Close();
    if (!keep_alive_ || core_->connections.draining) return LingerClose();
    body_.clear();
    ReadRequest();
  }

  // Closes after the peer has seen our last bytes: half-close, then drain unread input briefly,
  // so a client still sending a refused body receives the answer instead of a reset.
  void LingerClose() {
    beast::error_code ec;
    // With TLS this ends the connection without a close_notify alert: the response was framed
    // (Content-Length or chunked), so clients treat the end of the stream as complete.
    Socket().shutdown(tcp::socket::shutdown_send, ec);
    if (ec) return Close();
    state_ = State::kWriting;  // not idle: Drain() must not cut it short
    deadline_ = CoarseNow() + std::chrono::seconds(2);
    DiscardUntilEof();
  }

  // Reads the socket itself, TLS or not: the bytes are thrown away, only the end matters.
  void DiscardUntilEof() {
    discard_.resize(16 * 1024);
    Socket().async_read_some(asio::buffer(discard_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->state_ == State::kClosed) return;
      if (ec) return self->Close();
      self->DiscardUntilEof();
    });
  }

  // While streaming, a pending read tells us when the peer hangs up (its input is discarded).
  // It reads the socket under any TLS layer: the TLS stream's writes go on undisturbed, since a
  // socket takes one read and one write at a time.
  void WatchForPeerGone() {
    discard_.resize(4096);
    Socket().async_read_some(asio::buffer(discard_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->state_ != State::kStreaming) return;
      if (ec) return self->EndStream();
      self->WatchForPeerGone();
    });
  }

  void ScheduleFlushLocked() {
    if (stream_flush_scheduled_) return;
    stream_flush_scheduled_ = true;
    asio::post(worker_->ioc, [self = shared_from_this()] { self->FlushStream(); });
  }

  void FlushStream() {
    if (state_ != State::kStreaming) return;
    bool finish;
    {
      std::lock_guard lock(stream_mu_);
      stream_flush_scheduled_ = false;
      if (stream_writing_) return;  // the write in flight flushes again when done
      finish = stream_close_requested_;
      if (stream_queue_.empty() && !finish) return;
      stream_out_.clear();
      for (const std::string& chunk : stream_queue_) {
        char size[20];
        int n = std::snprintf(size, sizeof(size), "%zx\r\n", chunk.size());
        stream_out_.append(size, static_cast<size_t>(n));
        stream_out_.append(chunk);
        stream_out_.append("\r\n", 2);
      }
      stream_queue_.clear();
      if (finish) stream_out_.append("0\r\n\r\n");
      stream_writing_ = true;
    }
    size_t payload = stream_out_.size();
    deadline_ = CoarseNow() + core_->options.write_timeout;
    AsyncWrite(asio::buffer(stream_out_), [self = shared_from_this(), payload, finish](beast::error_code ec, size_t) {
      self->OnStreamWritten(ec, payload, finish);
    });
  }

  void OnStreamWritten(beast::error_code ec, size_t framed_bytes, bool finished) {
    {
      std::lock_guard lock(stream_mu_);
      stream_writing_ = false;
      // framed_bytes counts the chunk framing too; clamp so the figure never wraps.
      stream_buffered_ -= std::min(stream_buffered_, framed_bytes);
    }
    if (state_ != State::kStreaming) return;
    deadline_ = Clock::time_point::max();  // an idle stream may stay open indefinitely
    if (ec || finished) return EndStream();
    FlushStream();
  }

  static constexpr size_t kReadChunk = 16 * 1024;

  // The TCP socket, under the TLS stream when there is one.
  tcp::socket& Socket() { return tls_ ? tls_->next_layer() : socket_; }

  template <class Buffers, class Completion>
  void AsyncReadSome(const Buffers& buffers, Completion&& completion) {
    if (tls_) return tls_->async_read_some(buffers, std::forward<Completion>(completion));
    socket_.async_read_some(buffers, std::forward<Completion>(completion));
  }

  template <class Buffers, class Completion>
  void AsyncWrite(const Buffers& buffers, Completion&& completion) {
    if (tls_) return asio::async_write(*tls_, buffers, std::forward<Completion>(completion));
    asio::async_write(socket_, buffers, std::forward<Completion>(completion));
  }

  // TLS first: the handshake counts as reading the first request (read_timeout applies). The
  // first bytes are peeked: a plain HTTP request gets Go's (and so kube-apiserver's) answer
  // instead of a bare close, so whoever typed http:// for https:// sees why.
  void Handshake() {
    state_ = State::kReading;
    deadline_ = CoarseNow() + core_->options.read_timeout;
    Socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      if (self->state_ == State::kClosed) return;
      if (ec) return self->Close();
      std::array<char, 5> head{};
      size_t n = self->Socket().receive(asio::buffer(head), tcp::socket::message_peek, ec);
      if (ec || n == 0) return self->Close();
      constexpr unsigned char kTlsHandshakeRecord = 0x16;
      if (static_cast<unsigned char>(head[0]) != kTlsHandshakeRecord) {
        return self->RefusePlainHttp(std::string_view(head.data(), n));
      }
      self->StartTlsHandshake();
    });
  }

  void RefusePlainHttp(std::string_view head) {
    // net/http's tlsRecordHeaderLooksLikeHTTP: anything else is closed without an answer.
    static constexpr std::array<std::string_view, 5> kHttpStarts = {"GET /", "HEAD ", "POST ", "PUT /", "OPTIO"};
    bool http = std::any_of(kHttpStarts.begin(), kHttpStarts.end(),
                            [&](std::string_view start) { return start.substr(0, head.size()) == head; });
    if (!http) return Close();
    static constexpr std::string_view kAnswer =
        "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";
    state_ = State::kWriting;
    deadline_ = CoarseNow() + core_->options.write_timeout;
    asio::async_write(Socket(), asio::buffer(kAnswer.data(), kAnswer.size()),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (self->state_ == State::kClosed) return;
                        if (ec) return self->Close();
                        self->LingerClose();  // the unread request must not turn into a reset
                      });
  }

  void StartTlsHandshake() {
    tls_->async_handshake(ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
      if (self->state_ == State::kClosed) return;
      if (ec) {
        mf::log::Debug("tls handshake failed", {{"remote", self->remote_}, {"error", ec.message()}});
        return self->Close();
      }
      if (self->core_->connections.draining) return self->Close();
      self->ReadRequest();
    });
  }

  std::shared_ptr<Worker> worker_;  // first member: keeps the io_context alive for the socket
  std::shared_ptr<Core> core_;
  tcp::socket socket_;  // moved into tls_ when TLS is on
  std::optional<ssl::stream<tcp::socket>> tls_;
  beast::flat_buffer buffer_;
  wire::RequestReader reader_;
  State state_ = State::kIdle;
  Clock::time_point deadline_ = Clock::time_point::max();  // enforced by the worker's sweep
  bool keep_alive_ = true;
  bool http10_ = false;
  bool head_request_ = false;
  uint32_t method_index_ = 0;
  int status_ = 0;
  Clock::time_point start_;
  std::string remote_;
  std::string request_id_;
  std::string target_;  // kept only for the debug access log
  std::string head_;
  std::string body_;
  std::string discard_;

  mutable std::mutex stream_mu_;
  std::deque<std::string> stream_queue_;
  size_t stream_buffered_ = 0;
  bool stream_close_requested_ = false;
  bool stream_flush_scheduled_ = false;
  bool stream_writing_ = false;
  std::atomic<bool> stream_ended_{false};
  std::vector<std::function<void()>> stream_callbacks_;
  std::string stream_out_;
};

// One request's answer slot, shared by the copies of its Responder.
class Exchange {
 public:
  explicit Exchange(std::shared_ptr<Session> session) : session_(std::move(session)) {}
  ~Exchange() {
    if (answered_.load() || session_->stopped()) return;
    Respond(Response::Text(500, "handler did not respond\n"));
  }

  bool answered() const { return answered_.load(); }

  void Respond(Response response) {
    if (answered_.exchange(true)) return;
    asio::dispatch(session_->context(), [session = session_, response = std::move(response)]() mutable {
      session->WriteResponse(std::move(response));
    });
  }

  std::shared_ptr<Session> Stream(int status, Headers headers) {
    if (answered_.exchange(true)) return nullptr;
    asio::dispatch(session_->context(), [session = session_, status, headers = std::move(headers)]() mutable {
      session->StartStream(status, std::move(headers));
    });
    return session_;
  }

 private:
  std::shared_ptr<Session> session_;
  std::atomic<bool> answered_{false};
};

// The Stream handed to handlers. Dropping the last reference closes the stream.
class StreamHandle final : public Stream {
 public:
  explicit StreamHandle(std::shared_ptr<Session> session) : session_(std::move(session)) {}
  ~StreamHandle() override {
    if (session_ != nullptr) session_->StreamClose();
  }
  bool Write(std::string chunk) override { return session_ != nullptr && session_->StreamWrite(std::move(chunk)); }
  void Close() override {
    if (session_ != nullptr) session_->StreamClose();
  }
  bool closed() const override { return session_ == nullptr || session_->stream_ended(); }
  size_t buffered_bytes() const override { return session_ == nullptr ? 0 : session_->stream_buffered(); }
  void OnClose(std::function<void()> callback) override {
    if (session_ == nullptr) return callback();
    session_->StreamOnClose(std::move(callback));
  }

 private:
  std::shared_ptr<Session> session_;  // null: the request had already been answered
};

}  // namespace internal

Responder::Responder(std::shared_ptr<internal::Exchange> exchange) : exchange_(std::move(exchange)) {}

void Responder::Respond(Response response) { exchange_->Respond(std::move(response)); }

std::shared_ptr<Stream> Responder::StartStream(int status, Headers headers) {
  return std::make_shared<internal::StreamHandle>(exchange_->Stream(status, std::move(headers)));
}

bool Responder::answered() const { return exchange_->answered(); }

class Server::Impl {
 public:
  Impl(ServerOptions options, Handler handler)
      : core_(std::make_shared<internal::Core>()), io_("http", &core_->connections) {
    core_->options = std::move(options);
    core_->handler = std::move(handler);
    core_->limits = {core_->options.max_header_bytes, core_->options.max_body_bytes,
                     core_->options.decode_request_bodies};
  }

  Status Start() {
    if (io_.started()) return FailedPrecondition("http server already started");
    if (!core_->handler) return InvalidArgument("http server needs a handler");
    MF_RETURN_IF_ERROR(ConfigureTls());
    const ServerOptions& o = core_->options;
    MF_RETURN_IF_ERROR(io_.Listen(o.address, o.port, o.io_threads));
    // Before Run(): sessions read these without a lock.
    if (!o.metrics_label.empty()) {
      auto registry = metrics::DefaultRegistry();
      core_->requests_total = &prometheus::BuildCounter()
                                   .Name("http_requests_total")
                                   .Help("HTTP requests answered, by server, method and status code")
                                   .Register(*registry);
      core_->duration = &prometheus::BuildHistogram()
                             .Name("http_request_duration_seconds")
                             .Help("Time from the end of the request header to the end of the response")
                             .Register(*registry)
                             .Add({{"server", o.metrics_label}}, metrics::LatencySecondsBuckets());
    }
    auto shortest = std::min({o.read_timeout, o.idle_timeout, o.write_timeout});
    io_.Run(SweepInterval(shortest, std::chrono::milliseconds(250)),
            [core = core_](const std::shared_ptr<internal::Worker>& worker, tcp::socket socket) {
              std::make_shared<internal::Session>(worker, core, std::move(socket))->Start();
            });
    mf::log::Info("http server listening", {{"address", o.address},
                                            {"port", std::to_string(io_.port())},
                                            {"tls", core_->tls ? "true" : "false"},
                                            {"io_threads", std::to_string(io_.io_threads())}});
    return Status::Ok();
  }

  IoServer<internal::Worker>& io() { return io_; }
  const IoServer<internal::Worker>& io() const { return io_; }

  ServerStats stats() const {
    const ConnectionCounts& c = core_->connections;
    return {c.accepted.load(), c.open.load(), core_->requests.load()};
  }

 private:
  Status ConfigureTls() {
    const auto& o = core_->options;
    if (o.tls_certificate_chain_pem.empty() && o.tls_private_key_pem.empty()) return Status::Ok();
    if (o.tls_certificate_chain_pem.empty() || o.tls_private_key_pem.empty()) {
      return InvalidArgument("https needs both a certificate chain and a private key");
    }
    auto tls = std::make_unique<ssl::context>(ssl::context::tls_server);
    tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                     ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
    beast::error_code ec;
    tls->use_certificate_chain(asio::buffer(o.tls_certificate_chain_pem), ec);
    if (ec) return InvalidArgument("the TLS certificate chain does not load: " + ec.message());
    tls->use_private_key(asio::buffer(o.tls_private_key_pem), ssl::context::pem, ec);
    if (ec && ec.category() == asio::error::get_ssl_category() &&
        ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == X509_R_KEY_VALUES_MISMATCH) {
      return InvalidArgument("the TLS private key does not belong to the certificate");
    }
    if (ec) return InvalidArgument("the TLS private key does not load: " + ec.message());
    if (SSL_CTX_check_private_key(tls->native_handle()) != 1) {
      return InvalidArgument("the TLS private key does not belong to the certificate");
    }
    core_->tls = std::move(tls);
    return Status::Ok();
  }

  std::shared_ptr<internal::Core> core_;
  IoServer<internal::Worker> io_;  // after core_: counts into core_->connections
};

Server::Server(ServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}
Server::~Server() = default;
Status Server::Start() { return impl_->Start(); }
uint16_t Server::port() const { return impl_->io().port(); }
bool Server::Drain(std::chrono::milliseconds deadline) { return impl_->io().Drain(deadline); }
void Server::Stop() { impl_->io().Stop(); }
ServerStats Server::stats() const { return impl_->stats(); }

int WaitForTerminationSignal() {
  asio::io_context ioc(1);
  asio::signal_set signals(ioc, SIGINT, SIGTERM);
  int received = 0;
  signals.async_wait([&](const beast::error_code& ec, int signal) {
    if (!ec) received = signal;
  });
  ioc.run();
  return received;
}

}  // namespace mf::http
