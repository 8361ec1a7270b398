// The userspace Service proxy: which Services get a VIP and which backends each port has, and
// that connections to VIP:port reach ready backends round robin.
#include "tools/local/kubelet/service_proxy.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "tools/local/kubelet/service_hosts.h"

namespace mf::local {
namespace {

using namespace std::chrono_literals;

Json Service(const std::string& name, Json spec) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}}}, {"spec", spec}};
}

Json Endpoints(const std::string& name, Json subsets) {
  return {{"metadata", {{"name", name}, {"namespace", "ml"}}}, {"subsets", subsets}};
}

TEST(PlanServiceProxyTest, PortsMapToEndpointPortsByName) {
  std::vector<Json> services = {
      Service("web", {{"selector", {{"app", "web"}}},
                      {"ports", Json::array({{{"name", "http"}, {"port", 80}},
                                             {{"name", "grpc"}, {"port", 81}},
                                             {{"name", "dns"}, {"port", 53}, {"protocol", "UDP"}}})}}),
      Service("headless", {{"clusterIP", "None"}, {"ports", Json::array({{{"port", 2222}}})}}),
      Service("nohost", {{"ports", Json::array({{{"port", 9}}})}})};
  std::vector<Json> endpoints = {Endpoints(
      "web", Json::array({{{"addresses", Json::array({{{"ip", "127.0.1.9"}}, {{"ip", "127.0.1.2"}}})},
                           {"ports",
                            Json::array({{{"name", "http"}, {"port", 8000}}, {{"name", "grpc"}, {"port", 9000}}})}}}))};
  EXPECT_FALSE(IsProxiedService(services[1]));
  auto plan = PlanServiceProxy(services, endpoints, {{"ml/web", "127.128.0.1"}, {"ml/nohost", "127.128.0.2"}});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].key, "ml/web");
  ASSERT_EQ(plan[0].ports.size(), 2u);  // UDP is not proxied
  EXPECT_EQ(plan[0].ports[0].port, 80);
  EXPECT_EQ(plan[0].ports[0].backends, (std::vector<Backend>{{"127.0.1.2", 8000}, {"127.0.1.9", 8000}}));
  EXPECT_EQ(plan[0].ports[1].backends, (std::vector<Backend>{{"127.0.1.2", 9000}, {"127.0.1.9", 9000}}));
  EXPECT_TRUE(plan[1].ports[0].backends.empty());  // no endpoints: connections are refused
}

TEST(HostsFileTest, ProxiedServicesResolveToTheirVip) {
  std::vector<Json> endpoints = {
      Endpoints("web", Json::array({{{"addresses", Json::array({{{"ip", "127.0.1.3"}}})}}}))};
  std::string text = BuildHostsFile("ml", endpoints, {{"ml/web", "127.128.0.7"}, {"ml/empty", "127.128.0.8"}});
  EXPECT_NE(text.find("127.128.0.7 web\n"), std::string::npos) << text;
  EXPECT_NE(text.find("127.128.0.7 web.ml.svc.cluster.local\n"), std::string::npos);
  EXPECT_NE(text.find("127.128.0.8 empty.ml.svc\n"), std::string::npos);  // a VIP even without endpoints
  EXPECT_EQ(text.find("127.0.1.3"), std::string::npos);
}

// A loopback server that answers each connection with its own name and closes.
class NamedServer {
 public:
  NamedServer(const std::string& ip, std::string name) : name_(std::move(name)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 16);
    thread_ = std::thread([this] {
      while (true) {
        int c = accept(fd_, nullptr, nullptr);
        if (c < 0 || stop_) {
          if (c >= 0) close(c);
          return;
        }
        char buf[64];
        ssize_t n = recv(c, buf, sizeof(buf), 0);  // echo back what came, prefixed by the name
        std::string reply = name_ + ":" + std::string(buf, n > 0 ? static_cast<size_t>(n) : 0);
        send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
        close(c);
      }
    });
  }
  ~NamedServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  uint16_t port() const { return static_cast<uint16_t>(port_); }

 private:
  std::string name_;
  int fd_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Connects to ip:port, sends "hi", returns everything read until the peer closes ("" on failure).
std::string Exchange(const std::string& ip, uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{2, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    send(fd, "hi", 2, MSG_NOSIGNAL);
    char buf[256];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

TEST(ServiceProxyTest, SplicesToBackendsRoundRobinAndFollowsUpdates) {
  NamedServer a("127.0.7.1", "a"), b("127.0.7.2", "b");
  ServiceProxy proxy;
  const std::string vip = "127.128.0.1";  // in a cluster: the Service's clusterIP
  // Backends listen on different ports: the proxy maps the Service port to each backend's port.
  ProxiedService svc{"ml/web", vip, {{18080, {{"127.0.7.1", a.port()}, {"127.0.7.2", b.port()}}}}};
  ASSERT_TRUE(proxy.Apply({svc}).empty());
  std::map<std::string, int> seen;
  for (int i = 0; i < 6; ++i) seen[Exchange(vip, 18080)]++;
  EXPECT_EQ(seen, (std::map<std::string, int>{{"a:hi", 3}, {"b:hi", 3}}));

  // A backend that stops answering is skipped; with none left, connections close at once.
  svc.ports[0].backends = {{"127.0.7.9", 1}, {"127.0.7.2", b.port()}};
  ASSERT_TRUE(proxy.Apply({svc}).empty());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Exchange(vip, 18080), "b:hi");
  svc.ports[0].backends.clear();
  ASSERT_TRUE(proxy.Apply({svc}).empty());
  EXPECT_EQ(Exchange(vip, 18080), "");

  // Removing the Service closes its listener.
  ASSERT_TRUE(proxy.Apply({}).empty());
  EXPECT_EQ(Exchange(vip, 18080), "");
}

TEST(ServiceProxyTest, ReportsListenersItCannotOpen) {
  NamedServer taken("127.0.7.3", "x");
  ServiceProxy proxy;
  auto errors = proxy.Apply({{"ml/clash", "127.0.7.3", {{taken.port(), {}}}}});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("ml/clash"), std::string::npos);
}

// The host-side forwards (API server, LoadBalancer Services) get their listeners from the host
// socket broker: the proxy asks the opener it was given and serves whatever descriptor it returns.
TEST(ServiceProxyTest, OpensListenersThroughTheGivenOpener) {
  NamedServer backend("127.0.7.4", "api");
  std::vector<std::string> asked;
  ServiceProxy proxy([&](const std::string& ip, uint16_t port) -> StatusOr<int> {
    asked.push_back(ip + ":" + std::to_string(port));
    return OpenLocalListener("127.0.7.5", port);  // stands in for the broker's host socket
  });
  ASSERT_TRUE(proxy.Apply({{"host/api", "127.0.0.1", {{18443, {{"127.0.7.4", backend.port()}}}}}}).empty());
  EXPECT_EQ(asked, std::vector<std::string>{"127.0.0.1:18443"});
  EXPECT_EQ(Exchange("127.0.7.5", 18443), "api:hi");
  auto failing = ServiceProxy([](const std::string&, uint16_t) -> StatusOr<int> { return Unavailable("no broker"); });
  auto errors = failing.Apply({{"host/api", "127.0.0.1", {{18444, {}}}}});
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("no broker"), std::string::npos);
}

}  // namespace
}  // namespace mf::local
