// The synchronous client. Each pooled Connection owns a small io_context; a call runs that
// io_context on the calling thread, so calls on different connections proceed in parallel and
// asynchronous operations give us timeouts, deadlines and cross-thread cancellation.
#include "http/client.h"

#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cerrno>
#include <deque>
#include <limits>
#include <map>

#include "http/url.h"
#include "http/wire.h"

namespace mf::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

void CancelToken::Cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  if (hook_) {
    auto hook = std::move(hook_);
    hook_ = nullptr;
    hook();
  }
}

void CancelToken::SetHook(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  hook_ = std::move(hook);
}

void CancelToken::ClearHook() {
  std::lock_guard lock(mu_);
  hook_ = nullptr;
}

namespace {

// One keep-alive connection (plain or TLS) and the io_context its operations run on.
struct Connection {
  asio::io_context ioc{1};
  beast::tcp_stream tcp{ioc};
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream&>> tls;
  beast::flat_buffer buffer;
  asio::steady_timer deadline_timer{ioc};
  Clock::time_point idle_since;
  bool deadline_hit = false;
  bool cancelled = false;

  void Abort() {
    beast::error_code ec;
    tcp.socket().shutdown(tcp::socket::shutdown_both, ec);
    tcp.close();
  }

  // True when a pooled connection still looks usable: no EOF and no unexpected bytes waiting.
  bool LooksAlive() {
    if (!tcp.socket().is_open() || buffer.size() > 0) return false;
    char byte;
    ssize_t n = ::recv(tcp.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  // Starts `start(done_handler)` and runs the io_context until the handler has run.
  template <typename Start>
  beast::error_code Run(Start&& start) {
    beast::error_code result;
    bool done = false;
    ioc.restart();  // a previous run_one() that ran out of work leaves the context stopped
    start([&](beast::error_code ec, auto&&...) {
      result = ec;
      done = true;
    });
    while (!done && ioc.run_one() > 0) {
    }
    if (!done) result = asio::error::operation_aborted;
    return result;
  }

  template <typename Fn>
  decltype(auto) WithStream(Fn&& fn) {
    if (tls) return fn(*tls);
    return fn(tcp);
  }
};

std::string ErrorText(beast::error_code ec) { return ec.message(); }

}  // namespace

class Client::Impl {
 public:
  explicit Impl(ClientOptions options) : options_(std::move(options)), tls_(ssl::context::tls_client) {
    tls_status_ = ConfigureTls();
  }

  StatusOr<Response> Call(const ClientRequest& request, const BodyCallback* on_data, CancelToken* cancel) {
    MF_ASSIGN_OR_RETURN(Url url, ParseUrl(request.url));
    if (url.tls && !tls_status_.ok()) return tls_status_;
    std::optional<Clock::time_point> deadline;
    if (request.deadline) deadline = Clock::now() + *request.deadline;
    std::string key = (url.tls ? "https://" : "http://") + url.host + ":" + std::to_string(url.port);
    bool idempotent = request.method == "GET" || request.method == "HEAD" || request.method == "PUT" ||
                      request.method == "DELETE" || request.method == "OPTIONS";
    // A pooled connection may have been closed by the server while idle; when it fails before
    // any response byte, the request is retried once on a fresh connection.
    for (int attempt = 0;; ++attempt) {
      std::unique_ptr<Connection> conn = attempt == 0 ? TakeIdle(key) : nullptr;
      bool reused = conn != nullptr;
      if (!reused) {
        conn = std::make_unique<Connection>();
        if (Status s = Dial(*conn, url, deadline, cancel); !s.ok()) return s;
      }
      bool retryable = false;
      StatusOr<Response> result =
          RoundTrip(std::move(conn), url, request, deadline, on_data, cancel, reused && idempotent, &retryable, key);
      if (result.ok() || !retryable || attempt > 0) return result;
    }
  }

  ClientStats stats() const { return {opened_.load(), requests_.load()}; }
  Status tls_status() const { return tls_status_; }

 private:
  Status ConfigureTls() {
    beast::error_code ec;
    tls_.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                     ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    if (options_.insecure_skip_verify) {
      tls_.set_verify_mode(ssl::verify_none);
    } else {
      tls_.set_verify_mode(ssl::verify_peer);
      if (options_.ca_file.empty() && options_.ca_pem.empty()) {
        tls_.set_default_verify_paths(ec);
        if (ec) return FailedPrecondition("cannot load the system CA certificates: " + ec.message());
      }
      if (!options_.ca_file.empty()) {
        tls_.load_verify_file(options_.ca_file, ec);
        if (ec) return FailedPrecondition("cannot load CA certificates '" + options_.ca_file + "': " + ec.message());
      }
      if (!options_.ca_pem.empty()) {
        tls_.add_certificate_authority(asio::buffer(options_.ca_pem), ec);
        if (ec) return FailedPrecondition("cannot load the CA certificates given as PEM data: " + ec.message());
      }
    }
    const bool cert_file = !options_.client_cert_file.empty() || !options_.client_key_file.empty();
    const bool cert_pem = !options_.client_cert_pem.empty() || !options_.client_key_pem.empty();
    if (cert_file && cert_pem) {
      return FailedPrecondition("give the client certificate and key as files or as PEM data, not both");
    }
    if (cert_file) {
      tls_.use_certificate_chain_file(options_.client_cert_file, ec);
      if (ec)
        return FailedPrecondition("cannot load client certificate '" + options_.client_cert_file +
                                  "': " + ec.message());
      tls_.use_private_key_file(options_.client_key_file, ssl::context::pem, ec);
      if (ec) return FailedPrecondition("cannot load client key '" + options_.client_key_file + "': " + ec.message());
    }
    if (cert_pem) {
      tls_.use_certificate_chain(asio::buffer(options_.client_cert_pem), ec);
      if (ec) return FailedPrecondition("cannot load the client certificate given as PEM data: " + ec.message());
      tls_.use_private_key(asio::buffer(options_.client_key_pem), ssl::context::pem, ec);
      if (ec) return FailedPrecondition("cannot load the client key given as PEM data: " + ec.message());
    }
    return Status::Ok();
  }

  std::unique_ptr<Connection> TakeIdle(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = idle_.find(key);
    if (it == idle_.end()) return nullptr;
    auto& list = it->second;
    while (!list.empty()) {
      std::unique_ptr<Connection> conn = std::move(list.back());
      list.pop_back();
      if (Clock::now() - conn->idle_since < options_.idle_connection_ttl && conn->LooksAlive()) return conn;
    }
    return nullptr;
  }

  void ReturnIdle(const std::string& key, std::unique_ptr<Connection> conn) {
    conn->idle_since = Clock::now();
    std::lock_guard lock(mu_);
    auto& list = idle_[key];
    if (list.size() >= options_.max_idle_connections_per_host) list.pop_front();
    list.push_back(std::move(conn));
  }

  // Arms the call deadline and the cancel hook on `conn` (both abort the socket).
  void Arm(Connection& conn, const std::optional<Clock::time_point>& deadline, CancelToken* cancel) {
    conn.deadline_hit = false;
    conn.cancelled = false;
    if (deadline) {
      conn.deadline_timer.expires_at(*deadline);
      conn.deadline_timer.async_wait([&conn](beast::error_code ec) {
        if (ec) return;
        conn.deadline_hit = true;
        conn.Abort();
      });
    }
    if (cancel != nullptr) {
      cancel->SetHook([&conn] {
        asio::post(conn.ioc, [&conn] {
          conn.cancelled = true;
          conn.Abort();
        });
      });
      if (cancel->cancelled()) {
        conn.cancelled = true;
        conn.Abort();
      }
    }
  }

  // Disarms both; afterwards no handler for `conn` is queued anywhere.
  void Disarm(Connection& conn, CancelToken* cancel) {
    if (cancel != nullptr) cancel->ClearHook();
    conn.deadline_timer.cancel();
    conn.ioc.restart();
    conn.ioc.poll();
    conn.ioc.restart();
  }

  Status ErrorStatus(const Connection& conn, beast::error_code ec, std::string_view what) {
    if (conn.cancelled) return Cancelled(std::string(what) + ": cancelled");
    if (conn.deadline_hit) return DeadlineExceeded(std::string(what) + ": call deadline exceeded");
    if (ec == beast::error::timeout) return DeadlineExceeded(std::string(what) + ": timed out");
    return Unavailable(std::string(what) + ": " + ErrorText(ec));
  }

  Status Dial(Connection& conn, const Url& url, const std::optional<Clock::time_point>& deadline, CancelToken* cancel) {
    std::string where = url.host + ":" + std::to_string(url.port);
    Arm(conn, deadline, cancel);
    Status status = DialArmed(conn, url, where);
    Disarm(conn, cancel);
    if (status.ok() && (conn.cancelled || conn.deadline_hit)) status = ErrorStatus(conn, {}, "connect to " + where);
    if (status.ok()) opened_.fetch_add(1);
    return status;
  }

  Status DialArmed(Connection& conn, const Url& url, const std::string& where) {
    tcp::resolver resolver(conn.ioc);
    tcp::resolver::results_type endpoints;
    // The hosts file answers first; TLS still names and verifies url.host.
    std::string address = hosts_.Lookup(url.host).value_or(url.host);
    beast::error_code ec = conn.Run([&](auto handler) {
      resolver.async_resolve(address, std::to_string(url.port),
                             [&endpoints, handler](beast::error_code ec, tcp::resolver::results_type r) mutable {
                               endpoints = std::move(r);
                               handler(ec);
                             });
    });
    if (ec) return ErrorStatus(conn, ec, "resolve " + url.host);
    conn.tcp.expires_after(options_.connect_timeout);
    ec = conn.Run([&](auto handler) {
      conn.tcp.async_connect(endpoints, [handler](beast::error_code ec, const tcp::endpoint&) mutable { handler(ec); });
    });
    if (ec) return ErrorStatus(conn, ec, "connect to " + where);
    conn.tcp.socket().set_option(tcp::no_delay(true), ec);
    if (!url.tls) return Status::Ok();
    conn.tls = std::make_unique<beast::ssl_stream<beast::tcp_stream&>>(conn.tcp, tls_);
    if (!SSL_set_tlsext_host_name(conn.tls->native_handle(), url.host.c_str())) {
      return Unavailable("TLS to " + where + ": cannot set server name");
    }
    if (!options_.insecure_skip_verify) conn.tls->set_verify_callback(ssl::host_name_verification(url.host));
    conn.tcp.expires_after(options_.connect_timeout);
    ec = conn.Run([&](auto handler) { conn.tls->async_handshake(ssl::stream_base::client, handler); });
    if (ec) return ErrorStatus(conn, ec, "TLS handshake with " + where);
    return Status::Ok();
  }

  // One request/response on `owned`, which goes back to the pool when it stays usable.
  StatusOr<Response> RoundTrip(std::unique_ptr<Connection> owned, const Url& url, const ClientRequest& request,
                               const std::optional<Clock::time_point>& deadline, const BodyCallback* on_data,
                               CancelToken* cancel, bool retry_if_nothing_read, bool* retryable,
                               const std::string& key) {
    Connection& conn = *owned;
    requests_.fetch_add(1, std::memory_order_relaxed);
    Arm(conn, deadline, cancel);
    bool reusable = false;
    StatusOr<Response> result = ExchangeArmed(conn, url, request, on_data, retry_if_nothing_read, retryable, &reusable);
    Disarm(conn, cancel);
    if (result.ok() && (conn.cancelled || conn.deadline_hit)) {
      result = ErrorStatus(conn, {}, request.method + " " + request.url);
    }
    if (result.ok() && reusable && !conn.cancelled && !conn.deadline_hit) ReturnIdle(key, std::move(owned));
    return result;
  }

  StatusOr<Response> ExchangeArmed(Connection& conn, const Url& url, const ClientRequest& request,
                                   const BodyCallback* on_data, bool retry_if_nothing_read, bool* retryable,
                                   bool* reusable) {
    const std::string what = request.method + " " + request.url;
    if (!wire::IsValidHeaderField(request.method, "")) {
      return InvalidArgument("HTTP method '" + request.method + "' is not a valid token");
    }
    bhttp::request<bhttp::string_body> message;
    message.version(11);
    message.method_string(request.method);
    message.target(url.target);
    message.set(bhttp::field::host, url.HostHeader());
    if (!options_.user_agent.empty()) message.set(bhttp::field::user_agent, options_.user_agent);
    for (const auto& [name, value] : request.headers.fields()) {
      if (!wire::IsValidHeaderField(name, value)) {
        return InvalidArgument("request header '" + name + "' has an invalid name or value");
      }
      if (EqualsIgnoreCase(name, "Host") || EqualsIgnoreCase(name, "User-Agent")) {
        message.set(name, value);
      } else {
        message.insert(name, value);
      }
    }
    message.body() = request.body;
    bool has_body =
        !request.body.empty() || request.method == "POST" || request.method == "PUT" || request.method == "PATCH";
    if (has_body) message.prepare_payload();
    const auto read_timeout = request.read_timeout.value_or(options_.read_timeout);

    conn.tcp.expires_after(read_timeout);
    beast::error_code ec =
        conn.Run([&](auto handler) { conn.WithStream([&](auto& s) { bhttp::async_write(s, message, handler); }); });
    if (ec) {
      *retryable = retry_if_nothing_read || conn.tcp.socket().is_open() == false;
      return ErrorStatus(conn, ec, what + ": sending the request");
    }

    bhttp::response_parser<bhttp::buffer_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(options_.max_response_header_bytes));
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // enforced below: streams are unbounded
    if (request.method == "HEAD") parser.skip(true);
    // Bytes are read into conn.buffer and fed to the parser by hand (wire::PutBuffered), the same
    // way the server does, so both get the same protection against Beast's parser quirks.
    auto read_more = [&]() -> beast::error_code {
      conn.tcp.expires_after(read_timeout);
      return conn.Run([&](auto handler) {
        conn.WithStream([&](auto& s) {
          s.async_read_some(conn.buffer.prepare(64 * 1024), [&conn, handler](beast::error_code ec, size_t n) mutable {
            conn.buffer.commit(n);
            handler(ec);
          });
        });
      });
    };
    auto peer_closed = [](beast::error_code ec) {
      return ec == asio::error::eof || ec == asio::error::connection_reset || ec == ssl::error::stream_truncated;
    };

    bool received_any = false;
    while (!parser.is_header_done()) {
      beast::error_code ec;
      if (conn.buffer.size() > 0) wire::PutBuffered(parser, conn.buffer, ec);
      if (parser.is_header_done()) break;
      if (ec && ec != bhttp::error::need_more) {
        if (ec == bhttp::error::header_limit) {
          return DataLoss(what + ": response header is larger than " +
                          std::to_string(options_.max_response_header_bytes) + " bytes");
        }
        return DataLoss(what + ": malformed HTTP response: " + ec.message());
      }
      ec = read_more();
      if (ec) {
        bool nothing_read = !received_any && conn.buffer.size() == 0 && peer_closed(ec);
        *retryable = retry_if_nothing_read && nothing_read && !conn.cancelled && !conn.deadline_hit;
        if (nothing_read) return ErrorStatus(conn, ec, what + ": server closed the connection before responding");
        if (peer_closed(ec)) return DataLoss(what + ": server closed the connection inside the response header");
        return ErrorStatus(conn, ec, what + ": reading the response");
      }
      received_any = true;
    }

    Response response;
    const auto& head = parser.get();
    response.status = static_cast<int>(head.result_int());
    for (const auto& field : head) {
      response.headers.Add(wire::ToStd(field.name_string()), wire::ToStd(field.value()));
    }
    if (head.has_content_length() && !(on_data != nullptr && response.status >= 200 && response.status < 300) &&
        parser.content_length().value_or(0) > options_.max_response_body_bytes) {
      return ResourceExhausted(what + ": response body of " + std::to_string(*parser.content_length()) +
                               " bytes is larger than the client's limit of " +
                               std::to_string(options_.max_response_body_bytes) + " bytes");
    }
    const bool stream_body = on_data != nullptr && response.status >= 200 && response.status < 300;
    size_t received = 0;
    bool stopped_early = false;
    char chunk[64 * 1024];
    while (!parser.is_done()) {
      parser.get().body().data = chunk;
      parser.get().body().size = sizeof(chunk);
      beast::error_code ec = bhttp::error::need_more;
      if (conn.buffer.size() > 0) wire::PutBuffered(parser, conn.buffer, ec);
      if (ec == bhttp::error::need_buffer) ec = {};
      size_t n = sizeof(chunk) - parser.get().body().size;
      if (n > 0) {
        received += n;
        if (stream_body) {
          if (!(*on_data)(std::string_view(chunk, n))) {
            stopped_early = true;
            break;
          }
        } else {
          if (received > options_.max_response_body_bytes) {
            return ResourceExhausted(what + ": response body is larger than the client's limit of " +
                                     std::to_string(options_.max_response_body_bytes) + " bytes");
          }
          response.body.append(chunk, n);
        }
      }
      if (!ec) continue;
      if (ec != bhttp::error::need_more) return DataLoss(what + ": malformed HTTP response body: " + ec.message());
      ec = read_more();
      if (!ec) continue;
      if (peer_closed(ec) && !conn.cancelled && !conn.deadline_hit) {
        beast::error_code eof_ec;
        parser.put_eof(eof_ec);  // completes a body delimited by the end of the connection
        if (!eof_ec && conn.buffer.size() == 0) break;
        std::string expected =
            head.has_content_length() ? " of " + std::string(wire::ToStd(head[bhttp::field::content_length])) : "";
        return DataLoss(what + ": server closed the connection mid-body (after " + std::to_string(received) + expected +
                        " bytes)");
      }
      return ErrorStatus(conn, ec, what + ": reading the response body");
    }
    *reusable = !stopped_early && parser.is_done() && parser.keep_alive();
    return response;
  }

  ClientOptions options_;
  HostsFile hosts_{options_.hosts_file};
  ssl::context tls_;
  Status tls_status_;
  std::mutex mu_;
  std::map<std::string, std::deque<std::unique_ptr<Connection>>> idle_;
  std::atomic<uint64_t> opened_{0};
  std::atomic<uint64_t> requests_{0};
};

Client::Client(ClientOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Client::~Client() = default;

StatusOr<Response> Client::Do(const ClientRequest& request) { return impl_->Call(request, nullptr, nullptr); }

StatusOr<Response> Client::Get(std::string url, Headers headers) {
  ClientRequest request;
  request.url = std::move(url);
  request.headers = std::move(headers);
  return Do(request);
}

StatusOr<Response> Client::Post(std::string url, std::string body, std::string content_type, Headers headers) {
  ClientRequest request;
  request.method = "POST";
  request.url = std::move(url);
  request.headers = std::move(headers);
  request.headers.Set("Content-Type", content_type);
  request.body = std::move(body);
  return Do(request);
}

StatusOr<Response> Client::Stream(const ClientRequest& request, const BodyCallback& on_data, CancelToken* cancel) {
  return impl_->Call(request, &on_data, cancel);
}

StatusOr<Response> Client::StreamLines(const ClientRequest& request, const BodyCallback& on_line, CancelToken* cancel) {
  std::string pending;
  bool keep_going = true;
  BodyCallback splitter = [&](std::string_view data) {
    size_t start = 0;
    for (size_t nl = data.find('\n'); nl != std::string_view::npos; nl = data.find('\n', start)) {
      pending.append(data.substr(start, nl - start));
      if (!pending.empty() && pending.back() == '\r') pending.pop_back();
      keep_going = on_line(pending);
      pending.clear();
      start = nl + 1;
      if (!keep_going) return false;
    }
    pending.append(data.substr(start));
    return true;
  };
  StatusOr<Response> result = impl_->Call(request, &splitter, cancel);
  if (result.ok() && keep_going && !pending.empty() && result->status >= 200 && result->status < 300) {
    if (pending.back() == '\r') pending.pop_back();
    on_line(pending);
  }
  return result;
}

ClientStats Client::stats() const { return impl_->stats(); }
Status Client::tls_status() const { return impl_->tls_status(); }

}  // namespace mf::http
