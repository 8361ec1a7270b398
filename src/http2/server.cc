// The HTTP/2 connections on the io skeleton shared with the HTTP/1.1 server
// (http/io_server.h): each Connection lives on the io thread it was handed to.
#include "http2/server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "common/logging.h"
#include "http/io_server.h"

namespace mf::http2 {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using ErrorCode = boost::system::error_code;
using http::ConnectionCounts;

namespace internal {
namespace {

constexpr size_t kReadBufferBytes = 256 * 1024;
// Frames are produced into one buffer per write; bigger answers go out in several writes so a
// multi-MiB tensor is not copied into one giant buffer first.
constexpr size_t kWriteChunkBytes = 1024 * 1024;

// Hands work to one io thread for as long as it runs. Once the server stopped, work is dropped
// (destroyed on the caller's thread), so a ResponseStream that outlives the server is harmless.
class Poster {
 public:
  explicit Poster(asio::io_context* ioc) : ioc_(ioc) {}

  // Runs `fn` inline when called on the io thread, else posts it; drops it after Disable().
  template <class Fn>
  void Run(Fn&& fn) {
    {
      std::lock_guard lock(mu_);
      if (ioc_ == nullptr) return;
      if (!ioc_->get_executor().running_in_this_thread()) {
        asio::post(*ioc_, std::forward<Fn>(fn));
        return;
      }
    }
    fn();
  }

  void Disable() {
    std::lock_guard lock(mu_);
    ioc_ = nullptr;
  }

 private:
  std::mutex mu_;
  asio::io_context* ioc_;
};

}  // namespace

class Connection;

// State every io thread shares; immutable after Start() except the atomics.
struct Core {
  ServerOptions options;
  Handler handler;
  ConnectionCounts connections;
  std::atomic<uint64_t> streams{0};
};

// One io thread (see http/io_server.h) with the Poster its streams answer through.
struct Worker : http::IoWorker<Connection> {
  std::shared_ptr<Poster> poster = std::make_shared<Poster>(&ioc);

  // From here on answers from other threads are dropped (hides IoWorker's).
  void OnIoThreadJoined() { poster->Disable(); }
};

class StreamHandle;

class Connection final : public std::enable_shared_from_this<Connection>, public Session::Delegate {
 public:
  Connection(Worker* worker, std::shared_ptr<Core> core, tcp::socket socket)
      : worker_(worker), core_(std::move(core)), socket_(std::move(socket)) {}

  void Start() {
    worker_->connections.insert(this);
    ErrorCode ec;
    socket_.set_option(tcp::no_delay(true), ec);
    socket_.non_blocking(true, ec);  // Flush() writes what the socket takes without waiting
    auto remote = socket_.remote_endpoint(ec);
    std::string peer = ec ? "unknown" : remote.address().to_string() + ":" + std::to_string(remote.port());
    session_ = std::make_unique<Session>(core_->options.session, std::move(peer), this);
    created_ = last_activity_ = Clock::now();
    Read();
    Flush();  // our SETTINGS go out without waiting for the client's preface
  }

  // Sends the response part on the stream (io thread only).
  void Apply(int32_t stream_id, ResponsePart part) {
    if (closed_) return;
    session_->Send(stream_id, std::move(part));
    // Answers given while a read of many multiplexed calls is handled leave in writes of 1, 2,
    // 4, 8... answers: the first at once, so the client works on it while the rest of the read
    // is handled, and later ones together, so a read of n calls costs about log2(n) writes, not
    // n (one syscall each) nor one at the end (client and server would take turns idling).
    if (!receiving_) {
      Flush();
    } else if (++answers_while_receiving_ == flush_at_) {
      flush_at_ *= 2;
      Flush();
    }
  }

  void ResetStream(int32_t stream_id, uint32_t error_code) {
    if (closed_) return;
    session_->Reset(stream_id, error_code);
    if (!receiving_) Flush();
  }

  void Drain() {
    if (closed_ || draining_) return;
    draining_ = true;
    session_->Goaway();
    Flush();
  }

  void CloseIfExpired(Clock::time_point now) {
    const ServerOptions& o = core_->options;
    if (closed_) return;
    if (!received_bytes_ && now - created_ > o.handshake_timeout) return Close();
    if (writing_ && now - write_started_ > o.write_timeout) return Close();
    // Flow control stalls a write without a socket write pending: a peer that neither reads
    // (WINDOW_UPDATE) nor sends anything for write_timeout would hold the answers forever.
    if (session_->output_blocked() && now - last_activity_ > o.write_timeout) return Close();
    if (session_->open_streams() == 0 && now - last_activity_ > o.idle_timeout && !draining_) {
      mf::log::Debug("http2 connection idle; sending GOAWAY");
      Drain();
    }
  }

  void Close();

  void OnRequest(int32_t stream_id, Request request) override;
  void OnStreamClosed(int32_t stream_id) override;

 private:
  void Read() {
    socket_.async_read_some(asio::buffer(read_buffer_.get(), kReadBufferBytes),
                            [self = shared_from_this()](ErrorCode ec, size_t n) { self->OnRead(ec, n); });
  }

  void OnRead(ErrorCode ec, size_t n) {
    if (closed_) return;
    if (ec) return Close();  // EOF or reset: the peer is gone, nothing we send would arrive
    received_bytes_ = true;
    last_activity_ = Clock::now();
    receiving_ = true;
    answers_while_receiving_ = 0;
    flush_at_ = 1;
    Status status = session_->Receive(read_buffer_.get(), n);
    receiving_ = false;
    if (!status.ok()) mf::log::Debug("http2 connection error", {{"error", status.message()}});
    // Answers given inline while the bytes were processed leave in one write.
    Flush();
    // The next read waits one turn of the io loop: read now, it would almost always find nothing
    // (the client has not seen the answer yet) and the thread would go to sleep; a turn later the
    // loop has polled the other connections once more. A/B at 16 and 64 connections: +3 %
    // calls/s, 10-20 % fewer sleeps per call (docs/benchmarks.md, run 8).
    if (status.ok() && !closed_) {
      asio::post(socket_.get_executor(), [self = shared_from_this()] {
        if (!self->closed_) self->Read();
      });
    }
  }

  // Writes what the session has to send: synchronously while the socket takes it (no handler to
  // post, and the next answer is not held back behind a completed write whose handler has not run
  // yet), the rest with an async write.
  void Flush() {
    if (writing_ || closed_) return;
    // A stream-close callback run by Produce() may answer another stream: produce again then,
    // instead of starting a second write on the same buffer.
    if (flushing_) {
      flush_again_ = true;
      return;
    }
    flushing_ = true;
    bool wrote_all = false, broken = false;
    for (;;) {
      Status status = Status::Ok();
      do {
        flush_again_ = false;
        status = session_->Produce(&write_buffer_, kWriteChunkBytes);
      } while (status.ok() && flush_again_ && !closed_ && write_buffer_.size() < kWriteChunkBytes);
      if (closed_) break;
      if (!status.ok()) {
        broken = true;
        break;
      }
      if (write_buffer_.empty()) {
        wrote_all = true;
        break;
      }
      ErrorCode ec;
      const size_t written = socket_.write_some(asio::buffer(write_buffer_), ec);
      if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
        broken = true;
        break;
      }
      if (written > 0) last_activity_ = Clock::now();
      if (ec || written < write_buffer_.size()) {
        write_buffer_.erase(0, ec ? 0 : written);
        break;
      }
      write_buffer_.clear();
    }
    flushing_ = false;
    if (closed_) return;
    if (broken) return Close();
    if (wrote_all) {
      if (!session_->alive()) Close();
      return;
    }
    writing_ = true;
    write_started_ = Clock::now();
    asio::async_write(socket_, asio::buffer(write_buffer_),
                      [self = shared_from_this()](ErrorCode ec, size_t) { self->OnWritten(ec); });
  }

  void OnWritten(ErrorCode ec) {
    writing_ = false;
    write_buffer_.clear();
    if (closed_) return;
    if (ec) return Close();
    last_activity_ = Clock::now();
    Flush();
  }

  Worker* worker_;
  std::shared_ptr<Core> core_;
  tcp::socket socket_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<uint8_t[]> read_buffer_{new uint8_t[kReadBufferBytes]};
  std::string write_buffer_;
  // Weak: the handler's references decide a handle's life (see ~StreamHandle).
  std::unordered_map<int32_t, std::weak_ptr<StreamHandle>> handles_;
  Clock::time_point created_;
  Clock::time_point last_activity_;
  Clock::time_point write_started_;
  bool received_bytes_ = false;
  bool receiving_ = false;
  int answers_while_receiving_ = 0;  // in the read being handled
  int flush_at_ = 1;                 // Flush() when answers_while_receiving_ reaches it
  bool writing_ = false;
  bool flushing_ = false;
  bool flush_again_ = false;
  bool draining_ = false;
  bool closed_ = false;
};

class StreamHandle final : public ResponseStream {
 public:
  StreamHandle(std::shared_ptr<Poster> poster, std::weak_ptr<Connection> connection, int32_t id)
      : poster_(std::move(poster)), connection_(std::move(connection)), id_(id) {}

  ~StreamHandle() override {
    if (!ended_.load() && !closed_.load()) {
      poster_->Run([connection = connection_, id = id_] {
        if (auto c = connection.lock()) c->ResetStream(id, kInternalError);
      });
    }
  }

  void Send(ResponsePart part) override {
    if (closed_.load(std::memory_order_relaxed)) return;
    if (part.end) ended_.store(true);
    poster_->Run([connection = connection_, id = id_, part = std::move(part)]() mutable {
      if (auto c = connection.lock()) c->Apply(id, std::move(part));
    });
  }

  void Reset(uint32_t error_code) override {
    if (closed_.load(std::memory_order_relaxed)) return;
    ended_.store(true);
    poster_->Run([connection = connection_, id = id_, error_code] {
      if (auto c = connection.lock()) c->ResetStream(id, error_code);
    });
  }

  bool closed() const override { return closed_.load(); }

  void OnClose(std::function<void()> callback) override {
    {
      std::lock_guard lock(mu_);
      if (!closed_.load()) {
        on_close_.push_back(std::move(callback));
        return;
      }
    }
    callback();
  }

  // Io thread: the stream is gone.
  void MarkClosed() {
    std::vector<std::function<void()>> callbacks;
    {
      std::lock_guard lock(mu_);
      closed_.store(true);
      callbacks.swap(on_close_);
    }
    for (auto& callback : callbacks) callback();
  }

 private:
  std::shared_ptr<Poster> poster_;
  std::weak_ptr<Connection> connection_;
  const int32_t id_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> ended_{false};
  std::mutex mu_;
  std::vector<std::function<void()>> on_close_;
};

void Connection::OnRequest(int32_t stream_id, Request request) {
  core_->streams.fetch_add(1, std::memory_order_relaxed);
  auto handle = std::make_shared<StreamHandle>(worker_->poster, weak_from_this(), stream_id);
  handles_[stream_id] = handle;
  core_->handler(std::move(request), std::move(handle));
}

void Connection::OnStreamClosed(int32_t stream_id) {
  auto it = handles_.find(stream_id);
  if (it == handles_.end()) return;
  std::shared_ptr<StreamHandle> handle = it->second.lock();
  handles_.erase(it);
  if (handle) handle->MarkClosed();
}

void Connection::Close() {
  if (closed_) return;
  closed_ = true;
  ErrorCode ec;
  socket_.close(ec);
  worker_->connections.erase(this);
  auto handles = std::move(handles_);
  handles_.clear();
  for (auto& [id, weak] : handles) {
    if (auto handle = weak.lock()) handle->MarkClosed();
  }
  core_->connections.ConnectionClosed();
}

}  // namespace internal

class Server::Impl {
 public:
  Impl(ServerOptions options, Handler handler)
      : core_(std::make_shared<internal::Core>()), io_("http2", &core_->connections) {
    core_->options = std::move(options);
    core_->handler = std::move(handler);
  }

  Status Start() {
    if (io_.started()) return FailedPrecondition("http2 server already started");
    if (!core_->handler) return InvalidArgument("http2 server needs a handler");
    const SessionOptions& s = core_->options.session;
    if (s.max_concurrent_streams == 0) return InvalidArgument("http2 max_concurrent_streams must be > 0");
    if (s.stream_window_bytes > kMaxWindowBytes || s.connection_window_bytes > kMaxWindowBytes) {
      return InvalidArgument("http2 flow-control windows must be at most 2^31-1 bytes");
    }
    const ServerOptions& o = core_->options;
    MF_RETURN_IF_ERROR(io_.Listen(o.address, o.port, o.io_threads));
    auto shortest = std::min({o.handshake_timeout, o.idle_timeout, o.write_timeout});
    io_.Run(http::SweepInterval(shortest, std::chrono::milliseconds(1000)),
            [core = core_](const std::shared_ptr<internal::Worker>& worker, tcp::socket socket) {
              std::make_shared<internal::Connection>(worker.get(), core, std::move(socket))->Start();
            });
    mf::log::Info("http2 server listening", {{"address", o.address},
                                             {"port", std::to_string(io_.port())},
                                             {"io_threads", std::to_string(io_.io_threads())}});
    return Status::Ok();
  }

  http::IoServer<internal::Worker>& io() { return io_; }
  const http::IoServer<internal::Worker>& io() const { return io_; }

  ServerStats stats() const {
    const ConnectionCounts& c = core_->connections;
    return {c.accepted.load(), c.open.load(), core_->streams.load()};
  }

 private:
  std::shared_ptr<internal::Core> core_;
  http::IoServer<internal::Worker> io_;  // after core_: counts into core_->connections
};

Server::Server(ServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler))) {}
Server::~Server() = default;
Status Server::Start() { return impl_->Start(); }
uint16_t Server::port() const { return impl_->io().port(); }
bool Server::Drain(std::chrono::milliseconds deadline) { return impl_->io().Drain(deadline); }
void Server::Stop() { impl_->io().Stop(); }
ServerStats Server::stats() const { return impl_->stats(); }

}  // namespace mf::http2
