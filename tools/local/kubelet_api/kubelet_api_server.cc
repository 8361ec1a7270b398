#include "tools/local/kubelet_api/kubelet_api_server.h"

#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/status.hpp>
#include <boost/beast/http/string_body.hpp>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "tools/local/kubelet_api/log_stream.h"
#include "tools/local/kubelet_api/port_forward.h"
#include "tools/local/kubelet_api/remote_command.h"
#include "tools/local/kubelet_api/request_target.h"
#include "tools/local/kubelet_api/spdy_connection.h"
#include "tools/local/kubelet_api/tls_stream.h"

namespace mf::local {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr size_t kMaxHeaderBytes = 1024 * 1024;  // Go's http.DefaultMaxHeaderBytes, as the kubelet allows
constexpr size_t kMaxBodyBytes = 64 * 1024;      // kubelet API requests carry no body

bool HeaderContains(const http::request<http::string_body>& request, http::field field, std::string_view word) {
  const auto range = request.equal_range(field);
  for (auto it = range.first; it != range.second; ++it) {
    std::string value(it->value());
    std::transform(value.begin(), value.end(), value.begin(), [](unsigned char c) { return std::tolower(c); });
    if (value.find(word) != std::string::npos) return true;
  }
  return false;
}

std::vector<std::string> HeaderValues(const http::request<http::string_body>& request, std::string_view name) {
  std::vector<std::string> values;
  const auto range = request.equal_range(beast::string_view(name.data(), name.size()));
  for (auto it = range.first; it != range.second; ++it) values.emplace_back(it->value());
  return values;
}

// A plain-text answer, as the kubelet's http.Error() writes them.
std::string TextResponse(int status, const std::string& body, bool keep_alive, const std::string& extra_headers = "") {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " +
                    std::string(http::obsolete_reason(static_cast<http::status>(status))) + "\r\n";
  out += "Content-Type: text/plain; charset=utf-8\r\nX-Content-Type-Options: nosniff\r\n";
  out += "Content-Length: " + std::to_string(body.size() + 1) + "\r\n";
  out += extra_headers;
  if (!keep_alive) out += "Connection: close\r\n";
  out += "\r\n" + body + "\n";
  return out;
}

// What every connection needs from the server.
struct ServerContext {
  ServerContext(KubeletApiOptions o, KubeletApiHooks h) : options(std::move(o)), hooks(std::move(h)) {}

  // Keeps track of SPDY connections so Stop() can close them: an exec session and its connection
  // hold each other until the connection closes.
  void Register(const std::shared_ptr<SpdyConnection>& connection) {
    std::lock_guard lock(mu);
    spdy_connections.erase(
        std::remove_if(spdy_connections.begin(), spdy_connections.end(), [](const auto& w) { return w.expired(); }),
        spdy_connections.end());
    spdy_connections.push_back(connection);
  }

  const KubeletApiOptions options;
  const KubeletApiHooks hooks;
  std::mutex mu;
  std::vector<std::weak_ptr<SpdyConnection>> spdy_connections;
};

}  // namespace

class KubeletApiServer::Impl {
 public:
  Impl(KubeletApiOptions options, KubeletApiHooks hooks)
      : context_(std::move(options), std::move(hooks)), ssl_(asio::ssl::context::tls_server) {}

  ~Impl() { Stop(); }

  Status Start();
  void Stop();
  uint16_t port() const { return port_; }

 private:
  Status LoadCertificates();
  void Accept();

  ServerContext context_;
  const KubeletApiOptions& options_ = context_.options;
  asio::ssl::context ssl_;
  asio::io_context ioc_;
  // The acceptor and its backoff timer live on one strand: Stop() closes it from another thread.
  asio::strand<asio::io_context::executor_type> accept_strand_ = asio::make_strand(ioc_);
  std::optional<tcp::acceptor> acceptor_;
  asio::steady_timer accept_backoff_{accept_strand_};
  std::vector<std::thread> threads_;
  std::shared_ptr<std::atomic<size_t>> open_connections_ = std::make_shared<std::atomic<size_t>>(0);
  uint16_t port_ = 0;
  bool started_ = false;
  bool stopped_ = false;
};

namespace {

// One client connection while it speaks HTTP/1.1: TLS handshake, requests, then either more
// requests (keep-alive), or a hand-over of the stream to a log stream or a SPDY session.
class HttpsConnection : public std::enable_shared_from_this<HttpsConnection> {
 public:
  HttpsConnection(ServerContext* server, std::unique_ptr<TlsStream> stream)
      : server_(server), stream_(std::move(stream)), timer_(stream_->get_executor()) {}

  void Start() {
    ArmDeadline();
    stream_->async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](boost::system::error_code ec) {
      if (ec) {
        log::Debug("kubelet API: TLS handshake failed", {{"error", ec.message()}});
        self->Close();
        return;
      }
      self->ReadRequest();
    });
  }

 private:
  using Request = http::request<http::string_body>;

  void ArmDeadline() {
    timer_.expires_after(server_->options.request_timeout);
    timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->Close();
    });
  }

  void ReadRequest() {
    parser_.emplace();
    parser_->header_limit(kMaxHeaderBytes);
    parser_->body_limit(kMaxBodyBytes);
    ArmDeadline();
    http::async_read(*stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->timer_.cancel();
      if (ec == http::error::end_of_stream || ec == asio::ssl::error::stream_truncated || ec == asio::error::eof) {
        self->Close();
        return;
      }
      if (ec) {
        self->Respond(TextResponse(400, "malformed request: " + ec.message(), false), false);
        return;
      }
      self->OnRequest(self->parser_->release());
    });
  }

  void OnRequest(Request request) {
    const std::string_view target(request.target().data(), request.target().size());
    const size_t question = target.find('?');
    const KubeletTarget where = ParseKubeletTarget(target.substr(0, question));
    const QueryParams query =
        ParseQuery(question == std::string_view::npos ? std::string_view() : target.substr(question + 1));
    const bool get = request.method() == http::verb::get;
    const bool get_or_post = get || request.method() == http::verb::post;
    const bool keep_alive = request.keep_alive();
    using Kind = KubeletTarget::Kind;
    switch (where.kind) {
      case Kind::kHealthz:
        if (!get) return Respond(TextResponse(405, "method not allowed", keep_alive), keep_alive);
        return Respond("HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\n" +
                           std::string(keep_alive ? "" : "Connection: close\r\n") + "\r\nok",
                       keep_alive);
      case Kind::kContainerLogs:
        if (!get) return Respond(TextResponse(405, "method not allowed", keep_alive), keep_alive);
        return ServeLogs(where, query, keep_alive);
      case Kind::kExec:
        if (!get_or_post) return Respond(TextResponse(405, "method not allowed", keep_alive), keep_alive);
        return ServeExec(where, query, request);
      case Kind::kPortForward:
        if (!get_or_post) return Respond(TextResponse(405, "method not allowed", keep_alive), keep_alive);
        return ServePortForward(where, request);
      case Kind::kAttach:
        return Respond(TextResponse(501,
                                    "attach is not supported by this node: its containers are local processes whose "
                                    "output goes to their log file; use kubectl logs -f, or kubectl exec",
                                    keep_alive),
                       keep_alive);
      case Kind::kNotFound:
        break;
    }
    Respond(TextResponse(404, "404 page not found", keep_alive), keep_alive);
  }

  void ServeLogs(const KubeletTarget& where, const QueryParams& query, bool keep_alive) {
    StatusOr<LogOptions> options = ParseLogOptions(query);
    if (!options.ok()) return Respond(TextResponse(400, options.status().message(), keep_alive), keep_alive);
    const KubeletApiHooks& hooks = server_->hooks;
    StatusOr<std::filesystem::path> path = hooks.log_path
                                               ? hooks.log_path(where.ns, where.pod, where.container, options->previous)
                                               : StatusOr<std::filesystem::path>(NotFound("this node serves no logs"));
    if (!path.ok()) {
      return Respond(TextResponse(HttpStatusFor(path.status().code()), path.status().message(), keep_alive),
                     keep_alive);
    }
    LogStreamRequest request;
    request.path = *path;
    request.options = *options;
    request.poll_interval = server_->options.log_poll_interval;
    if (options->follow && !options->previous) {
      // Following ends when the instance stops, or is replaced by a new one (a new log file).
      request.keep_following = [hooks, ns = where.ns, pod = where.pod, container = where.container, followed = *path] {
        if (!hooks.container_running || !hooks.container_running(ns, pod, container)) return false;
        StatusOr<std::filesystem::path> current = hooks.log_path(ns, pod, container, false);
        return current.ok() && *current == followed;
      };
    }
    timer_.cancel();
    StreamContainerLog(std::move(stream_), std::move(request));
  }

  // Checks the upgrade request; on failure answers it and returns false.
  bool CheckUpgrade(const Request& request, const std::vector<std::string>& protocols, std::string* chosen) {
    if (!HeaderContains(request, http::field::connection, "upgrade") ||
        !HeaderContains(request, http::field::upgrade, "spdy/3.1")) {
      Respond(TextResponse(400,
                           "unable to upgrade: missing upgrade headers in request (Connection: Upgrade, "
                           "Upgrade: SPDY/3.1)",
                           false),
              false);
      return false;
    }
    const std::vector<std::string> offered = HeaderValues(request, "X-Stream-Protocol-Version");
    if (offered.empty()) {
      Respond(TextResponse(400, "unable to upgrade: header X-Stream-Protocol-Version does not exist in request", false),
              false);
      return false;
    }
    *chosen = NegotiateProtocol(offered, protocols);
    if (chosen->empty()) {
      std::string accepted;
      std::string list;
      for (const auto& p : protocols) {
        accepted += "X-Accepted-Stream-Protocol-Versions: " + p + "\r\n";
        list += (list.empty() ? "" : " ") + p;
      }
      Respond(TextResponse(403, "unable to upgrade: unable to negotiate protocol: server accepts [" + list + "]", false,
                           accepted),
              false);
      return false;
    }
    return true;
  }

  void ServeExec(const KubeletTarget& where, const QueryParams& query, const Request& request) {
    StatusOr<ExecOptions> options = ParseExecOptions(query);
    if (!options.ok()) return Respond(TextResponse(400, options.status().message(), false), false);
    const KubeletApiHooks& hooks = server_->hooks;
    StatusOr<ExecTarget> target = hooks.exec_target ? hooks.exec_target(where.ns, where.pod, where.container)
                                                    : StatusOr<ExecTarget>(NotFound("this node runs no commands"));
    if (!target.ok()) {
      return Respond(TextResponse(HttpStatusFor(target.status().code()), target.status().message(), false), false);
    }
    std::string protocol;
    if (!CheckUpgrade(request, RemoteCommandProtocols(), &protocol)) return;
    SwitchProtocols(protocol, [options = std::move(*options), target = std::move(*target), protocol](
                                  ServerContext* server, std::shared_ptr<SpdyConnection> connection) {
      return StartExecSession(std::move(connection), protocol, options, target,
                              server->options.stream_creation_timeout);
    });
  }

  void ServePortForward(const KubeletTarget& where, const Request& request) {
    const KubeletApiHooks& hooks = server_->hooks;
    StatusOr<std::string> ip = hooks.pod_ip ? hooks.pod_ip(where.ns, where.pod)
                                            : StatusOr<std::string>(NotFound("this node forwards no ports"));
    if (!ip.ok()) return Respond(TextResponse(HttpStatusFor(ip.status().code()), ip.status().message(), false), false);
    std::string protocol;
    if (!CheckUpgrade(request, {kPortForwardProtocol}, &protocol)) return;
    SwitchProtocols(protocol, [where](ServerContext* server, std::shared_ptr<SpdyConnection> connection) {
      return StartPortForwardSession(std::move(connection), where.ns, where.pod, where.uid, server->hooks,
                                     server->options.stream_creation_timeout);
    });
  }

  using MakeSession =
      std::function<std::shared_ptr<SpdyConnection::Handler>(ServerContext*, std::shared_ptr<SpdyConnection>)>;

  // Writes the 101 and hands the stream (with any bytes read past the request) to a SPDY session.
  void SwitchProtocols(const std::string& protocol, MakeSession make_session) {
    response_ =
        "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
        "X-Stream-Protocol-Version: " +
        protocol + "\r\n\r\n";
    ArmDeadline();
    asio::async_write(
        *stream_, asio::buffer(response_),
        [self = shared_from_this(), make_session = std::move(make_session)](boost::system::error_code ec, size_t) {
          self->timer_.cancel();
          if (ec || !self->stream_) return self->Close();
          SpdyConnectionOptions options;
          options.idle_timeout = self->server_->options.stream_idle_timeout;
          options.finish_timeout = self->server_->options.exec_finish_timeout;
          auto connection = std::make_shared<SpdyConnection>(std::move(self->stream_),
                                                             beast::buffers_to_string(self->buffer_.data()), options);
          self->server_->Register(connection);
          connection->Start(make_session(self->server_, connection));
        });
  }

  void Respond(std::string response, bool keep_alive) {
    response_ = std::move(response);
    ArmDeadline();
    asio::async_write(*stream_, asio::buffer(response_),
                      [self = shared_from_this(), keep_alive](boost::system::error_code ec, size_t) {
                        if (ec || !keep_alive) return self->Close();
                        self->ReadRequest();
                      });
  }

  void Close() {
    timer_.cancel();
    if (!stream_) return;
    boost::system::error_code ignored;
    stream_->lowest_layer().shutdown(tcp::socket::shutdown_both, ignored);
    stream_->lowest_layer().close(ignored);
  }

  ServerContext* const server_;
  std::unique_ptr<TlsStream> stream_;
  asio::steady_timer timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::string response_;
};

}  // namespace

Status KubeletApiServer::Impl::LoadCertificates() {
  boost::system::error_code ec;
  ssl_.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                   asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
  ssl_.use_certificate_chain(asio::buffer(options_.certificate_pem), ec);
  if (ec) return InvalidArgument("kubelet API serving certificate does not load: " + ec.message());
  ssl_.use_private_key(asio::buffer(options_.private_key_pem), asio::ssl::context::pem, ec);
  if (ec) return InvalidArgument("kubelet API private key does not load: " + ec.message());
  if (SSL_CTX_check_private_key(ssl_.native_handle()) != 1) {
    return InvalidArgument("kubelet API private key does not match its serving certificate");
  }
  if (!options_.client_ca_pem.empty()) {
    ssl_.add_certificate_authority(asio::buffer(options_.client_ca_pem), ec);
    if (ec) return InvalidArgument("kubelet API client CA does not load: " + ec.message());
    ssl_.set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
    // Resumed TLS 1.2 sessions with client verification need a session id context.
    static constexpr unsigned char kContext[] = "mf-kubelet-api";
    SSL_CTX_set_session_id_context(ssl_.native_handle(), kContext, sizeof(kContext) - 1);
  }
  return Status::Ok();
}

Status KubeletApiServer::Impl::Start() {
  if (started_) return FailedPrecondition("the kubelet API server was already started");
  MF_RETURN_IF_ERROR(LoadCertificates());
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(options_.address, ec);
  if (ec) return InvalidArgument("kubelet API address '" + options_.address + "' is not an IP address");
  const tcp::endpoint endpoint(address, options_.port);
  acceptor_.emplace(accept_strand_);
  acceptor_->open(endpoint.protocol(), ec);
  if (!ec) acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_->bind(endpoint, ec);
  if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    acceptor_.reset();
    return Unavailable("kubelet API cannot listen on " + options_.address + ":" + std::to_string(options_.port) + ": " +
                       ec.message());
  }
  port_ = acceptor_->local_endpoint().port();
  started_ = true;
  Accept();
  for (int i = 0; i < std::max(1, options_.io_threads); ++i) {
    threads_.emplace_back([this] {
      // Writing to a pipe whose reader is gone must fail with EPIPE, not kill the process.
      sigset_t pipe_signal;
      sigemptyset(&pipe_signal);
      sigaddset(&pipe_signal, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
      auto guard = asio::make_work_guard(ioc_);
      // A handler that throws (a hook, out of memory) must not take the process down with it.
      while (true) {
        try {
          ioc_.run();
          return;
        } catch (const std::exception& e) {
          log::Error("kubelet API: a request handler failed", {{"error", e.what()}});
        }
      }
    });
  }
  log::Info("kubelet API listening", {{"address", options_.address}, {"port", std::to_string(port_)}});
  return Status::Ok();
}

void KubeletApiServer::Impl::Accept() {
  auto socket = std::make_shared<tcp::socket>(asio::make_strand(ioc_));
  acceptor_->async_accept(*socket, [this, socket](boost::system::error_code ec) {
    if (ec == asio::error::operation_aborted || !acceptor_->is_open()) return;
    if (ec) {
      // Out of descriptors and the like: back off instead of spinning.
      log::Warning("kubelet API: accept failed", {{"error", ec.message()}});
      accept_backoff_.expires_after(std::chrono::milliseconds(100));
      accept_backoff_.async_wait([this](boost::system::error_code timer_ec) {
        if (!timer_ec && acceptor_->is_open()) Accept();
      });
      return;
    }
    if (open_connections_->load() >= options_.max_connections) {
      log::Warning("kubelet API: connection limit reached; closing a new connection",
                   {{"max_connections", std::to_string(options_.max_connections)}});
      boost::system::error_code ignored;
      socket->close(ignored);
    } else {
      open_connections_->fetch_add(1);
      // Released when the stream is destroyed, by whichever part of the server owns it then.
      std::shared_ptr<void> slot(nullptr, [counter = open_connections_](void*) { counter->fetch_sub(1); });
      boost::system::error_code ignored;
      socket->set_option(tcp::no_delay(true), ignored);
      socket->set_option(asio::socket_base::keep_alive(true), ignored);
      auto stream = std::make_unique<TlsStream>(std::move(*socket), ssl_, std::move(slot));
      std::make_shared<HttpsConnection>(&context_, std::move(stream))->Start();
    }
    Accept();
  });
}

void KubeletApiServer::Impl::Stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  asio::post(accept_strand_, [this] {
    boost::system::error_code ignored;
    acceptor_->close(ignored);
    accept_backoff_.cancel();
  });
  {
    std::lock_guard lock(context_.mu);
    for (const auto& weak : context_.spdy_connections) {
      if (auto connection = weak.lock()) {
        asio::post(connection->executor(), [connection] { connection->Close(); });
      }
    }
  }
  ioc_.stop();
  for (auto& t : threads_) t.join();
  // Runs the closes posted above and the completions of what they aborted. Whatever still waits
  // (an exec's command being killed) is destroyed with the io_context, which reaps it.
  ioc_.restart();
  while (ioc_.poll() > 0) {
  }
}

KubeletApiServer::KubeletApiServer(KubeletApiOptions options, KubeletApiHooks hooks)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(hooks))) {}

KubeletApiServer::~KubeletApiServer() = default;

Status KubeletApiServer::Start() { return impl_->Start(); }

void KubeletApiServer::Stop() { impl_->Stop(); }

uint16_t KubeletApiServer::port() const { return impl_->port(); }

}  // namespace mf::local
