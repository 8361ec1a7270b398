// The hosts file the local kubelet writes for pods: parsing, re-reading on change, and the HTTP
// client resolving a Service name through it before DNS.
#include "http/hosts_lookup.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "http/client.h"
#include "http/server.h"

namespace mf::http {
namespace {

namespace fs = std::filesystem;

class HostsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mf-hosts-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    path_ = dir_ / "hosts";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Replaces the file by rename, as the kubelet does.
  void Write(const std::string& text) {
    fs::path tmp = dir_ / "hosts.tmp";
    std::ofstream(tmp, std::ios::binary | std::ios::trunc) << text;
    fs::rename(tmp, path_);
  }

  fs::path dir_;
  fs::path path_;
};

TEST(ParseHostsFile, AddressThenNamesCommentsAndFirstWins) {
  auto hosts = ParseHostsFile(
      "# comment\n"
      "127.0.0.5 web.default.svc.cluster.local web.default.svc Web.Default.  # aliases\n"
      "\n"
      "   \t\n"
      "127.0.0.6 web.default.svc other\n"
      "::1 v6-name\n"
      "127.0.0.7\n");
  EXPECT_EQ(hosts.at("web.default.svc.cluster.local"), "127.0.0.5");
  EXPECT_EQ(hosts.at("web.default"), "127.0.0.5");
  EXPECT_EQ(hosts.at("web.default.svc"), "127.0.0.5");  // the first line naming it wins
  EXPECT_EQ(hosts.at("other"), "127.0.0.6");
  EXPECT_EQ(hosts.at("v6-name"), "::1");
  EXPECT_EQ(hosts.size(), 5u);
}

TEST_F(HostsFileTest, LookupIsCaseInsensitiveAndFollowsChanges) {
  HostsFile hosts(path_.string());
  EXPECT_FALSE(hosts.Lookup("web"));  // no file yet
  Write("127.0.0.5 web web.default\n");
  EXPECT_EQ(hosts.Lookup("WEB."), "127.0.0.5");
  EXPECT_FALSE(hosts.Lookup("db"));
  Write("127.0.0.9 web\n127.0.0.10 db\n");
  EXPECT_EQ(hosts.Lookup("web"), "127.0.0.9");
  EXPECT_EQ(hosts.Lookup("db"), "127.0.0.10");
  EXPECT_FALSE(hosts.Lookup("web.default"));
  fs::remove(path_);
  EXPECT_FALSE(hosts.Lookup("web"));
}

TEST_F(HostsFileTest, EmptyPathResolvesNothing) {
  HostsFile hosts("");
  EXPECT_FALSE(hosts.Lookup("localhost"));
}

TEST_F(HostsFileTest, DefaultsToTheEnvironment) {
  ::setenv("MODELFLEET_HOSTS_FILE", path_.c_str(), 1);
  EXPECT_EQ(ClientOptions().hosts_file, path_.string());
  ::unsetenv("MODELFLEET_HOSTS_FILE");
  EXPECT_EQ(ClientOptions().hosts_file, "");
}

TEST_F(HostsFileTest, ClientResolvesServiceNamesBeforeDns) {
  Router router;
  router.Add("GET", "/who", Sync([](const Request& r) {
               return Response::Text(200, std::string(r.headers.Get("Host").value_or("")));
             }));
  ServerOptions server_options;
  server_options.address = "127.0.0.1";
  server_options.port = 0;
  server_options.io_threads = 1;
  Server server(server_options, router.AsHandler());
  ASSERT_TRUE(server.Start().ok());
  const std::string port = std::to_string(server.port());
  // A name DNS can never answer (RFC 6761 .invalid), so only the hosts file can resolve it.
  const std::string url = "http://model.serving.svc.invalid:" + port + "/who";

  ClientOptions options;
  options.hosts_file = path_.string();
  options.connect_timeout = std::chrono::milliseconds(2000);
  Client client(options);
  auto before = client.Get(url);
  ASSERT_FALSE(before.ok());
  EXPECT_EQ(before.status().code(), StatusCode::kUnavailable) << before.status().ToString();

  Write("127.0.0.1 model.serving.svc.invalid\n");  // the kubelet publishes the Service
  auto after = client.Get(url);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->status, 200);
  EXPECT_EQ(after->body, "model.serving.svc.invalid:" + port);  // Host keeps the name
  server.Stop();
}

}  // namespace
}  // namespace mf::http
