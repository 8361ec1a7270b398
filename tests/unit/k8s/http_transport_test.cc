#include "k8s/http_transport.h"

#include <gtest/gtest.h>

#include <thread>

#include "http/certificates.h"
#include "http/server.h"
#include "k8s/api_error.h"
#include "k8s/informer.h"
#include "tests/unit/k8s/http_fake_api_server.h"

namespace mf::k8s {
namespace {

using namespace std::chrono_literals;
using testing::FakeApiServer;
using testing::HttpFakeApiServer;

constexpr char kConfigMaps[] = "/api/v1/configmaps";

Json ConfigMap(const std::string& name, const std::string& value) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", {{"name", name}, {"namespace", "ml"}}},
          {"data", {{"v", value}}}};
}

class HttpTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(http_.Start().ok());
    ClusterConfig config;
    config.server = http_.url() + "/";  // a trailing slash must not double up
    config.token = std::make_shared<StaticTokenSource>("t0ken");
    auto client = NewClient(config, ClientOptions{.qps = 0, .backoff_base = 1ms, .backoff_cap = 2000ms});
    ASSERT_TRUE(client.ok()) << client.status().ToString();
    client_ = std::move(*client);
  }
  std::shared_ptr<FakeApiServer> fake_ = std::make_shared<FakeApiServer>();
  HttpFakeApiServer http_{fake_};
  std::unique_ptr<Client> client_;
};

TEST_F(HttpTransportTest, RequestsAndErrorsOverTheWire) {
  const ResourceRef cm{resources::ConfigMaps(), "ml", "settings", ""};
  auto created = client_->Create({resources::ConfigMaps(), "ml", "", ""}, ConfigMap("settings", "1"));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  auto patched = client_->Patch(cm, PatchType::kMerge, {{"data", {{"v", "2"}}}});
  ASSERT_TRUE(patched.ok()) << patched.status().ToString();
  EXPECT_EQ((*patched)["data"]["v"], "2");
  auto dup = client_->Create({resources::ConfigMaps(), "ml", "", ""}, ConfigMap("settings", "1"));
  EXPECT_TRUE(IsAlreadyExists(dup.status())) << dup.status().ToString();
  EXPECT_EQ(fake_->requests().back().headers.at("Authorization"), "Bearer t0ken");
  EXPECT_EQ(fake_->requests().back().target, "/api/v1/namespaces/ml/configmaps");

  fake_->FailNext(1, 429, /*retry_after_seconds=*/1);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(client_->Get(cm).ok());
  EXPECT_GE(std::chrono::steady_clock::now() - start, 950ms);  // Retry-After read from the wire
}

TEST_F(HttpTransportTest, InformerOverHttpAcrossDropAndGone) {
  fake_->Put(kConfigMaps, ConfigMap("a", "0"));
  InformerOptions options;
  options.collection = {resources::ConfigMaps(), "ml", "", ""};
  options.error_backoff_base = 10ms;
  Informer informer(*client_, options);
  std::mutex mu;
  std::vector<std::string> seen;
  informer.AddEventHandlers({.on_add =
                                 [&](const ObjectPtr& o) {
                                   std::lock_guard lock(mu);
                                   seen.push_back("add " + (*o)["data"]["v"].get<std::string>());
                                 },
                             .on_update =
                                 [&](const ObjectPtr&, const ObjectPtr& o) {
                                   std::lock_guard lock(mu);
                                   seen.push_back("update " + (*o)["data"]["v"].get<std::string>());
                                 }});
  ASSERT_TRUE(informer.Start().ok());
  ASSERT_TRUE(informer.WaitForSync(5s));
  const auto wait_for = [&](size_t n) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu);
        if (seen.size() >= n) return true;
      }
      std::this_thread::sleep_for(2ms);
    }
    return false;
  };
  fake_->Put(kConfigMaps, ConfigMap("a", "1"));
  ASSERT_TRUE(wait_for(2));
  fake_->DropWatches();
  fake_->Put(kConfigMaps, ConfigMap("a", "2"));
  ASSERT_TRUE(wait_for(3));
  fake_->set_unavailable(true);
  fake_->DropWatches();
  fake_->Put(kConfigMaps, ConfigMap("a", "3"));
  fake_->Put(kConfigMaps, ConfigMap("a", "4"));
  fake_->Compact();
  fake_->set_unavailable(false);
  ASSERT_TRUE(wait_for(4));
  std::this_thread::sleep_for(50ms);
  std::lock_guard lock(mu);
  EXPECT_EQ(seen, (std::vector<std::string>{"add 0", "update 1", "update 2", "update 4"}));
  EXPECT_EQ(informer.stats().lists, 2);
}

TEST_F(HttpTransportTest, StopCancelsAnOpenWatchStream) {
  auto stop = std::make_unique<std::stop_source>();
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    WatchOptions options;
    options.resource_version = std::to_string(fake_->resource_version());
    Status s = client_->Watch(
        {resources::ConfigMaps(), "ml", "", ""}, options, [](WatchEvent&&) { return true; }, stop->get_token());
    EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.ToString();
    done = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (fake_->open_watches() == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(2ms);
  const auto start = std::chrono::steady_clock::now();
  stop->request_stop();
  watcher.join();
  EXPECT_TRUE(done.load());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
}

TEST(HttpTransportConfigTest, RefusesCertificatesOverPlainHttpAndBadUrls) {
  ClusterConfig config;
  config.server = "http://127.0.0.1:1";
  config.ca_pem = "-----BEGIN CERTIFICATE-----";
  EXPECT_EQ(HttpTransport::Create(config).status().code(), StatusCode::kInvalidArgument);
  config.ca_pem.clear();
  config.server = "not a url";
  EXPECT_FALSE(HttpTransport::Create(config).ok());
}

TEST(HttpTransportConfigTest, HttpsWithTheKubeconfigsCaDataAndNothingElse) {
  auto ca = http::CreateCertificateAuthority("k8s-test-ca", std::chrono::hours(24));
  ASSERT_TRUE(ca.ok()) << ca.status().ToString();
  auto serving = http::IssueServingCertificate(*ca, {.common_name = "apiserver", .ip_addresses = {"127.0.0.1"}});
  ASSERT_TRUE(serving.ok()) << serving.status().ToString();
  http::Router router;
  router.Add("GET", "/api/v1/namespaces/ml/configmaps/x",
             http::Sync([](const http::Request&) { return http::Response::Json(200, ConfigMap("x", "1").dump()); }));
  http::Server server({.address = "127.0.0.1",
                       .io_threads = 1,
                       .tls_certificate_chain_pem = serving->certificate_pem,
                       .tls_private_key_pem = serving->private_key_pem},
                      router.AsHandler());
  ASSERT_TRUE(server.Start().ok());
  ClusterConfig config;
  config.server = "https://127.0.0.1:" + std::to_string(server.port());
  config.ca_pem = ca->certificate_pem;
  auto client = NewClient(config, ClientOptions{.max_retries = 0});
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  auto got = (*client)->Get({resources::ConfigMaps(), "ml", "x", ""});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)["data"]["v"], "1");
  // A CA file that is also named loses to the data, as in client-go.
  config.ca_file = "/nonexistent/ca.crt";
  auto data_wins = NewClient(config, ClientOptions{.max_retries = 0});
  ASSERT_TRUE(data_wins.ok()) << data_wins.status().ToString();
  EXPECT_TRUE((*data_wins)->Get({resources::ConfigMaps(), "ml", "x", ""}).ok());
  config.ca_file.clear();
  // Another CA does not vouch for the server; unusable CA data is refused when the client is made.
  config.ca_pem = http::CreateCertificateAuthority("other", std::chrono::hours(24))->certificate_pem;
  auto untrusting = NewClient(config, ClientOptions{.max_retries = 0});
  ASSERT_TRUE(untrusting.ok());
  EXPECT_EQ((*untrusting)->Get({resources::ConfigMaps(), "ml", "x", ""}).status().code(), StatusCode::kUnavailable);
  config.ca_pem = "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n";
  EXPECT_EQ(NewClient(config).status().code(), StatusCode::kFailedPrecondition);
  server.Stop();
}

TEST(HttpTransportConfigTest, ConnectionRefusedIsUnavailable) {
  ClusterConfig config;
  config.server = "http://127.0.0.1:1";
  auto client = NewClient(config, ClientOptions{.max_retries = 0});
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->Get({resources::Pods(), "ml", "x", ""}).status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace mf::k8s
