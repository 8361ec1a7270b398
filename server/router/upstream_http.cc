#include "server/router/upstream_http.h"

#include <poll.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/coarse_clock.h"
#include "http/io_server.h"
#include "http/wire.h"
#include "server/router/io_pool.h"
#include "server/router/router_config.h"

namespace mf::router {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

// A connection made on one of the client's own io threads keeps that io_context alive: pooled
// connections may outlive the client. One made on a server io thread (`local`) lives and is pooled
// on that thread only, so it never outlives the thread's io_context (see LocalPools).
//
// Each connection enforces its exchange's deadline with one watchdog timer that is not re-armed
// per request: an exchange only writes `deadline`; the watchdog, armed at most once per deadline
// period, re-arms itself for a later deadline when it fires early, and closes the socket when the
// deadline has passed. (A timer armed and cancelled around every request cost a timer-queue
// insert, a cancel and an extra handler per proxied request.)
struct HttpConnection : std::enable_shared_from_this<HttpConnection> {
  HttpConnection(std::shared_ptr<asio::io_context> context, bool on_server_thread)
      : ioc(std::move(context)), socket(*ioc), local(on_server_thread), watchdog(*ioc) {}
  std::shared_ptr<asio::io_context> ioc;
  tcp::socket socket;
  beast::flat_buffer buffer;
  Clock::time_point idle_since;
  const bool local;

  // The running exchange's deadline (Clock::time_point::max() when none runs). On the
  // connection's io thread only.
  void Guard(Clock::time_point deadline) {
    deadline_ = deadline;
    timed_out_ = false;
    if (!watchdog_armed_ || deadline < watchdog_at_) ArmWatchdog(deadline);
  }
  void Unguard() { deadline_ = Clock::time_point::max(); }
  bool timed_out() const { return timed_out_; }

 private:
  void ArmWatchdog(Clock::time_point at) {
    watchdog_armed_ = true;
    watchdog_at_ = at;
    watchdog.expires_at(at);
    watchdog.async_wait([weak = weak_from_this(), at](beast::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->watchdog_at_ != at) return;  // cancelled, gone, or re-armed since
      self->watchdog_armed_ = false;
      if (self->deadline_ == Clock::time_point::max()) return;  // idle: sleeps until the next Guard
      if (Clock::now() < self->deadline_) return self->ArmWatchdog(self->deadline_);
      self->timed_out_ = true;
      beast::error_code ignored;
      self->socket.close(ignored);
    });
  }

  asio::steady_timer watchdog;  // after `ioc`, which it runs on
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point watchdog_at_;
  bool watchdog_armed_ = false;
  bool timed_out_ = false;
};

using IdleList = std::vector<std::shared_ptr<HttpConnection>>;

// Idle connections made on this (server io) thread, per client and upstream address, most
// recently used last. Only this thread touches them: no lock. Destroyed when the thread exits,
// which the server does before destroying its io_context. Unlike an Endpoint's shelf they do not
// go away with the endpoint: Prune() drops expired ones of every address, those of pods that
// went away included.
struct LocalPools {
  std::unordered_map<uint64_t, std::unordered_map<std::string, IdleList>> idle;  // client id -> address -> list
  Clock::time_point next_prune;

  IdleList& For(uint64_t client_id, const std::string& address) { return idle[client_id][address]; }

  // At most once a second: closes the connections idle since before `oldest`, forgets empty lists.
  void Prune(Clock::time_point now, Clock::time_point oldest) {
    if (now < next_prune) return;
    next_prune = now + std::chrono::seconds(1);
    for (auto client = idle.begin(); client != idle.end();) {
      auto& lists = client->second;
      for (auto list = lists.begin(); list != lists.end();) {
        IdleList& items = list->second;
        std::erase_if(items, [&](const std::shared_ptr<HttpConnection>& conn) { return conn->idle_since < oldest; });
        list = items.empty() ? lists.erase(list) : std::next(list);
      }
      client = lists.empty() ? idle.erase(client) : std::next(client);
    }
  }
};

LocalPools& ThisThreadsPools() {
  thread_local LocalPools pools;
  return pools;
}

// True when an idle connection can take a request: the peer has neither closed it nor sent
// anything unasked (either makes the socket readable). `probe`: ask the kernel (a poll(2) per
// reuse); without it a closed connection shows only when the request fails on it, which only
// requests that may be sent again on a fresh connection can afford.
bool StillIdle(HttpConnection& conn, bool probe) {
  if (!conn.socket.is_open() || conn.buffer.size() != 0) return false;
  if (!probe) return true;
  pollfd fd{conn.socket.native_handle(), POLLIN, 0};
  return ::poll(&fd, 1, 0) == 0;
}

}  // namespace

std::string_view UpstreamErrorName(UpstreamError error) {
  switch (error) {
    case UpstreamError::kNone:
      return "none";
    case UpstreamError::kConnect:
      return "connect";
    case UpstreamError::kNoResponse:
      return "no_response";
    case UpstreamError::kTimeout:
      return "timeout";
    case UpstreamError::kBadResponse:
      return "bad_response";
  }
  return "unknown";
}

StatusOr<std::shared_ptr<const UpstreamRequest>> MakeUpstreamRequest(std::string method, std::string target,
                                                                     std::span<const HeaderView> headers,
                                                                     const std::string& body, bool retry_safe) {
  auto request = std::make_shared<UpstreamRequest>();
  if (!http::wire::IsValidHeaderField(method, "") || target.empty() ||
      target.find_first_of("\r\n ") != std::string::npos) {
    return InvalidArgument("request line '" + method + " " + target + "' cannot be forwarded");
  }
  std::string& wire = request->wire;
  wire.reserve(256 + body.size());
  wire.append(method).append(" ").append(target).append(" HTTP/1.1\r\n");
  for (const auto& [name, value] : headers) {
    if (!http::wire::IsValidHeaderField(name, value)) {
      return InvalidArgument("request header '" + std::string(name) + "' has an invalid name or value");
    }
    http::wire::AppendHeader(name, value, &wire);
  }
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    http::wire::AppendContentLength(body.size(), &wire);
  }
  wire.append("\r\n").append(body);
  request->method = std::move(method);
  request->target = std::move(target);
  request->retry_safe = retry_safe;
  return std::shared_ptr<const UpstreamRequest>(std::move(request));
}

class HttpUpstream::Impl {
 public:
  explicit Impl(HttpUpstreamOptions options) : options_(options), io_(options.io_threads) {}

  void Stop() { io_.Stop(); }

  const HttpUpstreamOptions& options() const { return options_; }

  // An idle pooled connection that still looks usable, or null. On a server io thread
  // (`local`) only that thread's own connections qualify. `probe`: see StillIdle.
  std::shared_ptr<HttpConnection> TakeIdle(Endpoint& endpoint, asio::io_context* local, bool probe) {
    if (local) {
      LocalPools& pools = ThisThreadsPools();
      const Clock::time_point now = CoarseNow();
      pools.Prune(now, now - options_.idle_ttl);
      return TakeFrom(pools.For(id_, endpoint.address()), probe);
    }
    std::lock_guard lock(endpoint.connections().mu);
    return TakeFrom(endpoint.connections().items, probe);
  }

  void GiveBack(Endpoint& endpoint, std::shared_ptr<HttpConnection> conn) {
    conn->idle_since = CoarseNow();
    if (conn->local) return Keep(ThisThreadsPools().For(id_, endpoint.address()), std::move(conn));
    std::lock_guard lock(endpoint.connections().mu);
    Keep(endpoint.connections().items, std::move(conn));
  }

  // A new connection on `local` (the calling server io thread) if set, else on the client's own
  // io threads.
  std::shared_ptr<asio::io_context> NextContext() { return io_.Next(); }

  std::shared_ptr<HttpConnection> NewConnection(asio::io_context* local) {
    opened_.fetch_add(1, std::memory_order_relaxed);
    if (local)
      return std::make_shared<HttpConnection>(std::shared_ptr<asio::io_context>(std::shared_ptr<void>(), local), true);
    return std::make_shared<HttpConnection>(io_.Next(), false);
  }

  uint64_t opened() const { return opened_.load(); }

 private:
  // Pops the most recently used connection that is still usable; drops those past their TTL
  // (the oldest, at the front) and those the upstream closed. `items` is a thread's own list
  // (IdleList) or an Endpoint's shelf (shared_ptr<void>, under its mutex).
  template <class Item>
  std::shared_ptr<HttpConnection> TakeFrom(std::vector<Item>& items, bool probe) {
    const Clock::time_point oldest = CoarseNow() - options_.idle_ttl;
    std::shared_ptr<HttpConnection> found;
    while (!items.empty()) {
      auto conn = std::static_pointer_cast<HttpConnection>(std::move(items.back()));
      items.pop_back();
      if (conn->idle_since >= oldest && StillIdle(*conn, probe)) {
        found = std::move(conn);
        break;
      }
      Close(std::move(conn));
    }
    size_t expired = 0;
    while (expired < items.size() && std::static_pointer_cast<HttpConnection>(items[expired])->idle_since < oldest) {
      ++expired;
    }
    for (size_t i = 0; i < expired; ++i) Close(std::static_pointer_cast<HttpConnection>(std::move(items[i])));
    items.erase(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(expired));
    return found;
  }

  template <class Item>
  void Keep(std::vector<Item>& items, std::shared_ptr<HttpConnection> conn) {
    if (items.size() >= options_.max_idle_per_endpoint) return Close(std::move(conn));
    items.push_back(std::move(conn));
  }

  static void Close(std::shared_ptr<HttpConnection> conn) {
    if (conn->local) {  // on its own thread already
      beast::error_code ignored;
      conn->socket.close(ignored);
      return;
    }
    asio::post(*conn->ioc, [conn] {
      beast::error_code ignored;
      conn->socket.close(ignored);
    });
  }

  static inline std::atomic<uint64_t> next_id_{1};
  const uint64_t id_ = next_id_.fetch_add(1);
  HttpUpstreamOptions options_;
  IoPool io_;
  std::atomic<uint64_t> opened_{0};
};

namespace {

// One request's exchange with one endpoint: connect or reuse, write, read, classify. Runs on the
// io thread of its connection; owned by the pending asynchronous operations.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(HttpUpstream::Impl* client, std::shared_ptr<Endpoint> endpoint,
           std::shared_ptr<const UpstreamRequest> request, Clock::time_point deadline, UpstreamCallback done)
      : client_(client),
        endpoint_(std::move(endpoint)),
        request_(std::move(request)),
        deadline_(deadline),
        done_(std::move(done)) {}

  // On a server io thread the exchange runs right here, on that thread's own connections; from
  // any other thread it is handed to the client's io threads.
  void Start() {
    local_ = http::CurrentIoContext();
    // A retry-safe request on a connection the upstream closed meanwhile is sent again on a fresh
    // one (OnFailureBeforeResponse): it can skip the per-reuse probe.
    conn_ = client_->TakeIdle(*endpoint_, local_, /*probe=*/!request_->retry_safe);
    reused_ = conn_ != nullptr;
    if (!conn_) conn_ = client_->NewConnection(local_);
    if (local_) return reused_ ? Write() : Connect();
    asio::post(*conn_->ioc, [self = shared_from_this()] { self->reused_ ? self->Write() : self->Connect(); });
  }

 private:
  void Arm(Clock::time_point at) { conn_->Guard(at); }

  void Connect() {
    std::string host;
    int port = 0;
    if (!SplitHostPort(endpoint_->address(), &host, &port)) {
      return Finish(UpstreamError::kConnect, "endpoint '" + endpoint_->address() + "' is not host:port");
    }
    Arm(std::min(deadline_, Clock::now() + client_->options().connect_timeout));
    beast::error_code ec;
    asio::ip::address ip = asio::ip::make_address(host, ec);
    if (!ec) {
      conn_->socket.async_connect(tcp::endpoint(ip, static_cast<uint16_t>(port)),
                                  [self = shared_from_this()](beast::error_code ec) { self->OnConnect(ec); });
      return;
    }
    resolver_.emplace(*conn_->ioc);
    resolver_->async_resolve(host, std::to_string(port),
                             [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
                               if (ec) return self->OnConnect(ec);
                               asio::async_connect(
                                   self->conn_->socket, results,
                                   [self](beast::error_code ec, const tcp::endpoint&) { self->OnConnect(ec); });
                             });
  }

  void OnConnect(beast::error_code ec) {
    if (ec) {
      if (conn_->timed_out() && Clock::now() >= deadline_)
        return Finish(UpstreamError::kTimeout, "deadline passed while connecting");
      std::string why = conn_->timed_out() ? "connect timed out after " +
                                                 std::to_string(client_->options().connect_timeout.count()) + " ms"
                                           : ec.message();
      return Finish(UpstreamError::kConnect, "cannot connect to " + endpoint_->address() + ": " + why);
    }
    beast::error_code ignored;
    conn_->socket.set_option(tcp::no_delay(true), ignored);
    Write();
  }

  void Write() {
    Arm(deadline_);
    asio::async_write(conn_->socket, asio::buffer(request_->wire),
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->OnFailureBeforeResponse(ec);
                        self->parser_.emplace();
                        self->ConfigureParser();
                        self->Read();
                      });
  }

  void ConfigureParser() {
    parser_->header_limit(static_cast<std::uint32_t>(client_->options().max_response_header_bytes));
    parser_->body_limit(client_->options().max_response_body_bytes);
    if (request_->method == "HEAD") parser_->skip(true);
  }

  void Read() {
    // Bytes left over from a 1xx response (or read with it) are parsed before reading more.
    if (conn_->buffer.size() > 0 && Parse()) return;
    conn_->socket.async_read_some(conn_->buffer.prepare(64 * 1024),
                                  [self = shared_from_this()](beast::error_code ec, size_t n) {
                                    self->conn_->buffer.commit(n);
                                    if (n > 0) self->received_any_ = true;
                                    if (ec) return self->OnReadError(ec);
                                    if (!self->Parse()) self->Read();
                                  });
  }

  // Feeds buffered bytes to the parser; true when the exchange finished (either way).
  bool Parse() {
    beast::error_code ec;
    while (conn_->buffer.size() > 0) {
      http::wire::PutBuffered(*parser_, conn_->buffer, ec);
      if (ec == bhttp::error::need_more) return false;
      if (ec) {
        Finish(UpstreamError::kBadResponse, "malformed response from " + endpoint_->address() + ": " + ec.message());
        return true;
      }
      if (parser_->is_header_done() && parser_->get().result_int() / 100 == 1 && parser_->get().result_int() != 101) {
        parser_.emplace();  // an interim response (100 Continue...): the real one follows
        ConfigureParser();
        continue;
      }
      if (parser_->is_done()) {
        Complete(parser_->keep_alive());
        return true;
      }
    }
    return false;
  }

  void OnReadError(beast::error_code ec) {
    if (!received_any_) return OnFailureBeforeResponse(ec);
    if (conn_->timed_out()) return Finish(UpstreamError::kTimeout, "deadline passed while reading the response");
    if (ec == asio::error::eof && parser_->is_header_done()) {
      beast::error_code eof_ec;
      parser_->put_eof(eof_ec);  // a body delimited by the end of the connection
      if (!eof_ec && parser_->is_done()) return Complete(false);
    }
    Finish(UpstreamError::kBadResponse, endpoint_->address() + " closed the connection mid-response: " + ec.message());
  }

  void OnFailureBeforeResponse(beast::error_code ec) {
    if (conn_->timed_out()) return Finish(UpstreamError::kTimeout, "deadline passed waiting for the response");
    if (reused_ && request_->retry_safe) {
      // The upstream closed a pooled connection as we reused it: once more on a fresh one.
      reused_ = false;
      conn_->Unguard();
      conn_ = client_->NewConnection(conn_->local ? conn_->ioc.get() : nullptr);
      asio::post(*conn_->ioc, [self = shared_from_this()] { self->Connect(); });
      return;
    }
    Finish(UpstreamError::kNoResponse,
           endpoint_->address() + " closed the connection before responding: " + ec.message());
  }

  void Complete(bool keep_alive) {
    conn_->Unguard();
    UpstreamResult result;
    auto& message = parser_->get();
    result.response.status = static_cast<int>(message.result_int());
    result.response.headers.Reserve(static_cast<size_t>(std::distance(message.begin(), message.end())) + 1);
    for (const auto& field : message) {
      result.response.headers.Add(http::wire::ToStd(field.name_string()), http::wire::ToStd(field.value()));
    }
    result.response.body = std::move(message.body());
    if (keep_alive && conn_->buffer.size() == 0) client_->GiveBack(*endpoint_, std::move(conn_));
    conn_.reset();
    auto done = std::move(done_);
    done(std::move(result));
  }

  void Finish(UpstreamError error, std::string message) {
    if (conn_) {
      conn_->Unguard();
      beast::error_code ignored;
      conn_->socket.close(ignored);
    }
    UpstreamResult result;
    result.error = error;
    result.message = std::move(message);
    auto done = std::move(done_);
    done(std::move(result));
  }

  HttpUpstream::Impl* client_;  // outlives every running exchange: Stop() joins the io threads first
  std::shared_ptr<Endpoint> endpoint_;
  std::shared_ptr<const UpstreamRequest> request_;
  Clock::time_point deadline_;
  UpstreamCallback done_;
  std::shared_ptr<HttpConnection> conn_;
  std::optional<tcp::resolver> resolver_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  asio::io_context* local_ = nullptr;  // the server io thread this exchange runs on, if any
  bool reused_ = false;
  bool received_any_ = false;
};

}  // namespace

HttpUpstream::HttpUpstream(HttpUpstreamOptions options) : impl_(std::make_unique<Impl>(options)) {}
HttpUpstream::~HttpUpstream() { Stop(); }

void HttpUpstream::Send(std::shared_ptr<Endpoint> endpoint, std::shared_ptr<const UpstreamRequest> request,
                        Clock::time_point deadline, UpstreamCallback done) {
  std::make_shared<Exchange>(impl_.get(), std::move(endpoint), std::move(request), deadline, std::move(done))->Start();
}

void HttpUpstream::After(Clock::duration delay, std::function<void()> fn) {
  std::shared_ptr<asio::io_context> pooled;  // keeps a client io context alive for the timer
  asio::io_context* ioc = http::CurrentIoContext();
  if (!ioc) {
    pooled = impl_->NextContext();
    ioc = pooled.get();
  }
  auto timer = std::make_shared<asio::steady_timer>(*ioc, delay);
  timer->async_wait([timer, pooled, fn = std::move(fn)](beast::error_code ec) {
    if (!ec) fn();
  });
}

void HttpUpstream::Stop() { impl_->Stop(); }
uint64_t HttpUpstream::connections_opened() const { return impl_->opened(); }

}  // namespace mf::router
