#include "server/router/grpc_upstream.h"

#include <array>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <optional>

#include "server/router/io_pool.h"
#include "server/router/router_config.h"

namespace mf::router {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

// One upstream HTTP/2 connection. Everything but the atomics is touched on its io thread only.
class H2Connection : public std::enable_shared_from_this<H2Connection> {
 public:
  H2Connection(std::shared_ptr<asio::io_context> context, std::string address, const GrpcUpstreamOptions& options)
      : context_(std::move(context)), socket_(*context_), address_(std::move(address)), session_(options.session) {}

  // Streams reserved on this connection (picked, not yet ended); used to pick a connection.
  std::atomic<uint32_t> reserved{0};
  std::atomic<bool> usable{true};
  asio::io_context& context() { return *context_; }

  void Connect(std::chrono::milliseconds timeout) {
    std::string host;
    int port = 0;
    if (!SplitHostPort(address_, &host, &port)) return Die("endpoint '" + address_ + "' is not host:port");
    timer_.emplace(*context_);
    timer_->expires_after(timeout);
    timer_->async_wait([self = shared_from_this(), timeout](error_code ec) {
      if (ec || self->connected_) return;
      self->Die("cannot connect to " + self->address_ + ": connect timed out after " + std::to_string(timeout.count()) +
                " ms");
    });
    error_code ec;
    asio::ip::address ip = asio::ip::make_address(host, ec);
    if (!ec) {
      socket_.async_connect(tcp::endpoint(ip, static_cast<uint16_t>(port)),
                            [self = shared_from_this()](error_code ec) { self->OnConnect(ec); });
      return;
    }
    resolver_.emplace(*context_);
    resolver_->async_resolve(
        host, std::to_string(port), [self = shared_from_this()](error_code ec, tcp::resolver::results_type results) {
          if (ec) return self->OnConnect(ec);
          asio::async_connect(self->socket_, results,
                              [self](error_code ec, const tcp::endpoint&) { self->OnConnect(ec); });
        });
  }

  // On the io thread. The stream fails at once when the connection is already unusable.
  int32_t Submit(H2Request request, std::shared_ptr<StreamHandler> handler) {
    if (dead_ || !session_.accepting()) {
      handler->OnReset(http2::kRefusedStream, true, "the connection to " + address_ + " is closing");
      return 0;
    }
    int32_t id = session_.Submit(std::move(request), std::move(handler));
    Flush();
    return id;
  }

  void Cancel(int32_t id) {
    session_.Cancel(id);
    Flush();
  }

 private:
  void OnConnect(error_code ec) {
    if (dead_) return;
    if (ec) return Die("cannot connect to " + address_ + ": " + ec.message());
    connected_ = true;
    timer_.reset();
    error_code ignored;
    socket_.set_option(tcp::no_delay(true), ignored);
    Flush();
    Read();
  }

  void Flush() {
    if (!connected_ || writing_ || dead_) return;
    session_.Produce(&out_);
    if (out_.empty()) return;
    writing_ = true;
    asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this()](error_code ec, size_t) {
      self->writing_ = false;
      self->out_.clear();
      if (ec) return self->Die("writing to " + self->address_ + ": " + ec.message());
      self->Flush();
    });
  }

  void Read() {
    socket_.async_read_some(asio::buffer(input_), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec) {
        return self->Die(ec == asio::error::eof ? self->address_ + " closed the connection"
                                                : "reading from " + self->address_ + ": " + ec.message());
      }
      Status s = self->session_.Receive(self->input_.data(), n);
      self->Flush();
      if (!s.ok()) return self->Die(s.message());
      if (!self->session_.accepting()) self->usable = false;  // GOAWAY: no new streams here
      self->Read();
    });
  }

  void Die(const std::string& why) {
    if (dead_) return;
    dead_ = true;
    usable = false;
    timer_.reset();
    error_code ignored;
    socket_.close(ignored);
    session_.Fail(why);
  }

  std::shared_ptr<asio::io_context> context_;
  tcp::socket socket_;
  const std::string address_;
  H2ClientSession session_;
  std::optional<asio::steady_timer> timer_;
  std::optional<tcp::resolver> resolver_;
  std::string out_;
  std::array<uint8_t, 64 * 1024> input_;
  bool connected_ = false;
  bool writing_ = false;
  bool dead_ = false;
};

// Releases the connection's reservation when the stream ends, whichever way.
class ReservationHandler : public StreamHandler {
 public:
  ReservationHandler(std::shared_ptr<H2Connection> conn, std::shared_ptr<StreamHandler> inner)
      : conn_(std::move(conn)), inner_(std::move(inner)) {}
  ~ReservationHandler() override { conn_->reserved.fetch_sub(1); }
  void OnHeaders(int status, http2::Headers headers) override { inner_->OnHeaders(status, std::move(headers)); }
  void OnData(std::string_view data) override { inner_->OnData(data); }
  void OnEnd(http2::Headers trailers) override { inner_->OnEnd(std::move(trailers)); }
  void OnReset(uint32_t code, bool unprocessed, std::string why) override {
    inner_->OnReset(code, unprocessed, std::move(why));
  }

 private:
  std::shared_ptr<H2Connection> conn_;
  std::shared_ptr<StreamHandler> inner_;
};

class Stream : public UpstreamStream, public std::enable_shared_from_this<Stream> {
 public:
  explicit Stream(std::shared_ptr<H2Connection> conn) : conn_(std::move(conn)) {}
  void Cancel() override {
    asio::post(conn_->context(), [self = shared_from_this()] {
      self->cancelled_ = true;
      if (self->id_ != 0) self->conn_->Cancel(self->id_);
    });
  }
  asio::io_context& context() override { return conn_->context(); }

  // On the io thread.
  void Submit(H2Request request, std::shared_ptr<StreamHandler> handler) {
    if (cancelled_) return;
    id_ = conn_->Submit(std::move(request), std::move(handler));
  }

 private:
  std::shared_ptr<H2Connection> conn_;
  int32_t id_ = 0;
  bool cancelled_ = false;
};

}  // namespace

class GrpcUpstream::Impl {
 public:
  explicit Impl(GrpcUpstreamOptions options) : options_(options), io_(options.io_threads) {}

  std::shared_ptr<UpstreamStream> Start(const std::shared_ptr<Endpoint>& endpoint, H2Request request,
                                        std::shared_ptr<StreamHandler> handler) {
    std::shared_ptr<H2Connection> conn;
    bool fresh = false;
    {
      ConnectionShelf& shelf = endpoint->connections();
      std::lock_guard lock(shelf.mu);
      auto& items = shelf.items;
      for (auto it = items.begin(); it != items.end();) {
        auto candidate = std::static_pointer_cast<H2Connection>(*it);
        if (!candidate->usable) {
          it = items.erase(it);
          continue;
        }
        if (candidate->reserved.load() < options_.max_streams_per_connection) {
          conn = std::move(candidate);
          break;
        }
        ++it;
      }
      if (!conn) {
        conn = std::make_shared<H2Connection>(io_.Next(), endpoint->address(), options_);
        items.push_back(conn);
        fresh = true;
      }
      conn->reserved.fetch_add(1);
    }
    auto stream = std::make_shared<Stream>(conn);
    auto wrapped = std::make_shared<ReservationHandler>(conn, std::move(handler));
    asio::post(conn->context(), [conn, stream, fresh, timeout = options_.connect_timeout, wrapped,
                                 request = std::move(request)]() mutable {
      if (fresh) conn->Connect(timeout);
      stream->Submit(std::move(request), std::move(wrapped));
    });
    return stream;
  }

  void Stop() { io_.Stop(); }

 private:
  GrpcUpstreamOptions options_;
  IoPool io_;
};

GrpcUpstream::GrpcUpstream(GrpcUpstreamOptions options) : impl_(std::make_unique<Impl>(options)) {}
GrpcUpstream::~GrpcUpstream() { Stop(); }
std::shared_ptr<UpstreamStream> GrpcUpstream::Start(const std::shared_ptr<Endpoint>& endpoint, H2Request request,
                                                    std::shared_ptr<StreamHandler> handler) {
  return impl_->Start(endpoint, std::move(request), std::move(handler));
}
void GrpcUpstream::Stop() { impl_->Stop(); }

}  // namespace mf::router
