#include "tools/local/kubelet/service_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

#include "common/logging.h"

namespace mf::local {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

bool IsProxiedService(const Json& service) {
  const Json& spec = ObjectAt(service, {"spec"});
  if (StringAt(spec, {"clusterIP"}) == "None") return false;
  if (StringAt(spec, {"type"}) == "ExternalName") return false;
  return spec.contains("ports") && spec["ports"].is_array() && !spec["ports"].empty();
}

std::vector<ProxiedService> PlanServiceProxy(const std::vector<Json>& services, const std::vector<Json>& endpoints,
                                             const std::map<std::string, std::string>& vips) {
  std::map<std::string, const Json*> endpoints_by_key;
  for (const Json& ep : endpoints) endpoints_by_key[NamespaceOf(ep) + "/" + NameOf(ep)] = &ep;
  std::vector<ProxiedService> out;
  for (const Json& svc : services) {
    if (!IsProxiedService(svc)) continue;
    const std::string key = NamespaceOf(svc) + "/" + NameOf(svc);
    auto vip = vips.find(key);
    if (vip == vips.end()) continue;
    ProxiedService proxied{key, vip->second, {}};
    const Json* ep = endpoints_by_key.count(key) ? endpoints_by_key[key] : nullptr;
    for (const Json& p : svc["spec"]["ports"]) {
      if (StringAt(p, {"protocol"}, "TCP") != "TCP") continue;
      int64_t port = IntAt(p, {"port"}, 0);
      if (port < 1 || port > 65535) continue;
      ProxiedPort pp{static_cast<uint16_t>(port), {}};
      const std::string name = StringAt(p, {"name"});
      // An Endpoints port matches the Service port by name (unnamed when the Service has one port).
      if (ep) {
        for (const Json& subset : ep->value("subsets", Json::array())) {
          std::optional<int64_t> target;
          for (const Json& ep_port : subset.value("ports", Json::array())) {
            if (StringAt(ep_port, {"name"}) == name) target = IntAt(ep_port, {"port"}, 0);
          }
          if (!target || *target < 1 || *target > 65535) continue;
          for (const Json& a : subset.value("addresses", Json::array())) {
            pp.backends.push_back({StringAt(a, {"ip"}), static_cast<uint16_t>(*target)});
          }
        }
      }
      std::sort(pp.backends.begin(), pp.backends.end(),
                [](const Backend& a, const Backend& b) { return std::tie(a.ip, a.port) < std::tie(b.ip, b.port); });
      proxied.ports.push_back(std::move(pp));
    }
    out.push_back(std::move(proxied));
  }
  return out;
}

namespace {

// Copies bytes one way; when either side ends, both sockets are shut down.
class Splice : public std::enable_shared_from_this<Splice> {
 public:
  Splice(tcp::socket client, tcp::socket backend) : client_(std::move(client)), backend_(std::move(backend)) {}
  void Start() {
    Pump(client_, backend_, up_);
    Pump(backend_, client_, down_);
  }

 private:
  void Pump(tcp::socket& from, tcp::socket& to, std::array<char, 16384>& buf) {
    auto self = shared_from_this();
    from.async_read_some(asio::buffer(buf), [this, self, &from, &to, &buf](boost::system::error_code ec, size_t n) {
      if (ec) return Close();
      asio::async_write(to, asio::buffer(buf.data(), n),
                        [this, self, &from, &to, &buf](boost::system::error_code ec, size_t) {
                          if (ec) return Close();
                          Pump(from, to, buf);
                        });
    });
  }
  void Close() {
    boost::system::error_code ignored;
    client_.shutdown(tcp::socket::shutdown_both, ignored);
    backend_.shutdown(tcp::socket::shutdown_both, ignored);
    client_.close(ignored);
    backend_.close(ignored);
  }
  tcp::socket client_, backend_;
  std::array<char, 16384> up_{}, down_{};
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(asio::io_context& io, tcp::acceptor acceptor) : io_(io), acceptor_(std::move(acceptor)) {}

  void SetBackends(std::vector<Backend> backends) {
    std::lock_guard lock(mu_);
    backends_ = std::move(backends);
  }
  void Start() { Accept(); }
  void Stop() {
    asio::post(io_, [self = shared_from_this()] {
      boost::system::error_code ignored;
      self->acceptor_.close(ignored);
    });
  }

 private:
  void Accept() {
    acceptor_.async_accept([self = shared_from_this()](boost::system::error_code ec, tcp::socket client) {
      if (ec == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
      if (!ec) {
        std::vector<Backend> backends;
        {
          std::lock_guard lock(self->mu_);
          backends = self->backends_;
        }
        size_t first = self->next_++;
        self->Connect(std::make_shared<tcp::socket>(std::move(client)), std::move(backends), first, 0);
      }
      self->Accept();
    });
  }

  // Tries backends round robin from `first`; a client with no reachable backend is closed, as
  // kube-proxy rejects connections to a Service without endpoints.
  void Connect(std::shared_ptr<tcp::socket> client, std::vector<Backend> backends, size_t first, size_t attempt) {
    if (attempt >= backends.size()) {
      boost::system::error_code ignored;
      client->close(ignored);
      return;
    }
    const Backend& b = backends[(first + attempt) % backends.size()];
    boost::system::error_code ec;
    auto address = asio::ip::make_address(b.ip, ec);
    if (ec) return Connect(client, std::move(backends), first, attempt + 1);
    auto backend = std::make_shared<tcp::socket>(io_);
    tcp::endpoint endpoint(address, b.port);
    backend->async_connect(endpoint, [self = shared_from_this(), client, backend, backends = std::move(backends), first,
                                      attempt](boost::system::error_code ec) mutable {
      if (ec) return self->Connect(client, std::move(backends), first, attempt + 1);
      std::make_shared<Splice>(std::move(*client), std::move(*backend))->Start();
    });
  }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  std::mutex mu_;
  std::vector<Backend> backends_;
  std::atomic<size_t> next_{0};
};

}  // namespace

StatusOr<int> OpenLocalListener(const std::string& ip, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1)
    return InvalidArgument("'" + ip + "' is not an IPv4 address");
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Internal(std::string("socket: ") + std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, SOMAXCONN) != 0) {
    std::string why = std::strerror(errno);
    close(fd);
    return Unavailable(why);
  }
  return fd;
}

class ServiceProxy::Impl {
 public:
  explicit Impl(ListenerOpener open)
      : open_(std::move(open)), work_(asio::make_work_guard(io_)), thread_([this] { io_.run(); }) {}
  ~Impl() {
    for (auto& [key, listener] : listeners_) listener->Stop();
    work_.reset();
    io_.stop();
    thread_.join();
  }

  std::vector<std::string> Apply(const std::vector<ProxiedService>& services) {
    std::vector<std::string> errors;
    std::set<std::string> wanted;
    for (const ProxiedService& svc : services) {
      for (const ProxiedPort& p : svc.ports) {
        std::string key = svc.vip + ":" + std::to_string(p.port);
        wanted.insert(key);
        auto it = listeners_.find(key);
        if (it == listeners_.end()) {
          auto fd = open_(svc.vip, p.port);
          if (!fd.ok()) {
            errors.push_back(key + " (" + svc.key + "): " + fd.status().message());
            continue;
          }
          tcp::acceptor acceptor(io_);
          boost::system::error_code ec;
          acceptor.assign(tcp::v4(), *fd, ec);
          if (ec) {
            close(*fd);
            errors.push_back(key + " (" + svc.key + "): " + ec.message());
            continue;
          }
          auto listener = std::make_shared<Listener>(io_, std::move(acceptor));
          it = listeners_.emplace(key, listener).first;
          asio::post(io_, [listener] { listener->Start(); });
        }
        it->second->SetBackends(p.backends);
      }
    }
    for (auto it = listeners_.begin(); it != listeners_.end();) {
      if (wanted.count(it->first)) {
        ++it;
      } else {
        it->second->Stop();
        it = listeners_.erase(it);
      }
    }
    return errors;
  }

 private:
  ListenerOpener open_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::map<std::string, std::shared_ptr<Listener>> listeners_;  // "vip:port"
  std::thread thread_;
};

ServiceProxy::ServiceProxy(ListenerOpener open) : impl_(std::make_unique<Impl>(std::move(open))) {}
ServiceProxy::~ServiceProxy() = default;
std::vector<std::string> ServiceProxy::Apply(const std::vector<ProxiedService>& services) {
  return impl_->Apply(services);
}

}  // namespace mf::local
