// HTTPS: certificates made by http/certificates.h, our server with TLS, and our client trusting
// the CA given as PEM text: requests, keep-alive, large bodies, streams that notice a departed
// peer, drain, and every way verification or configuration must fail.
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "http/certificates.h"
#include "http/client.h"
#include "http/server.h"
#include "tests/unit/http/test_util.h"

namespace mf::http {
namespace {

using namespace std::chrono_literals;

struct Pki {
  PemCertificate ca;
  PemCertificate serving;
};

Pki MakePki(std::vector<std::string> dns = {"localhost"}, std::vector<std::string> ips = {"127.0.0.1"}) {
  auto ca = CreateCertificateAuthority("test-ca", std::chrono::hours(24));
  EXPECT_TRUE(ca.ok()) << ca.status().ToString();
  auto serving = IssueServingCertificate(
      *ca, {.common_name = "test-server", .dns_names = dns, .ip_addresses = ips, .validity = std::chrono::hours(24)});
  EXPECT_TRUE(serving.ok()) << serving.status().ToString();
  return {*ca, *serving};
}

TEST(CertificatesTest, ServingCertificateChainsToItsCaAndNamesItsHosts) {
  Pki pki = MakePki({"localhost", "api.local"}, {"127.0.0.1", "::1"});
  const auto& cert = pki.serving.certificate_pem;
  EXPECT_NE(cert.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(pki.serving.private_key_pem.find("PRIVATE KEY"), std::string::npos);
  for (const char* host : {"127.0.0.1", "::1", "localhost", "api.local"}) {
    EXPECT_TRUE(CheckServingCertificate(cert, pki.ca.certificate_pem, host, std::chrono::hours(1)).ok()) << host;
  }
  EXPECT_FALSE(CheckServingCertificate(cert, pki.ca.certificate_pem, "10.0.0.1", std::chrono::hours(0)).ok());
  EXPECT_FALSE(CheckServingCertificate(cert, pki.ca.certificate_pem, "example.com", std::chrono::hours(0)).ok());
  // Expiring within the margin counts as unusable.
  auto soon = CheckServingCertificate(cert, pki.ca.certificate_pem, "localhost", std::chrono::hours(48));
  EXPECT_EQ(soon.code(), StatusCode::kFailedPrecondition);
  // Another CA does not vouch for it.
  Pki other = MakePki();
  EXPECT_FALSE(CheckServingCertificate(cert, other.ca.certificate_pem, "localhost", std::chrono::hours(0)).ok());
  EXPECT_EQ(CheckServingCertificate("junk", pki.ca.certificate_pem, "localhost", std::chrono::hours(0)).code(),
            StatusCode::kInvalidArgument);
}

TEST(CertificatesTest, BadRequestsAreRefused) {
  Pki pki = MakePki();
  EXPECT_EQ(IssueServingCertificate(pki.ca, {.common_name = "x", .ip_addresses = {"300.1.1.1"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(IssueServingCertificate(pki.ca, {.common_name = "x"}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(IssueServingCertificate(pki.ca, {.common_name = "x", .dns_names = {"a,DNS:evil"}}).status().code(),
            StatusCode::kInvalidArgument);
  PemCertificate mismatched{pki.ca.certificate_pem, MakePki().ca.private_key_pem};
  EXPECT_EQ(IssueServingCertificate(mismatched, {.common_name = "x", .dns_names = {"a"}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(IssueServingCertificate({"junk", "junk"}, {.common_name = "x", .dns_names = {"a"}}).status().code(),
            StatusCode::kInvalidArgument);
}

class TlsTest : public ::testing::Test {
 protected:
  void StartServer(ServerOptions options = {}) {
    options.address = "127.0.0.1";
    options.port = 0;
    options.io_threads = 2;
    options.tls_certificate_chain_pem = pki_.serving.certificate_pem;
    options.tls_private_key_pem = pki_.serving.private_key_pem;
    server_ = std::make_unique<Server>(options, router_.AsHandler());
    ASSERT_TRUE(server_->Start().ok());
  }
  std::string Url(std::string_view path, std::string_view host = "127.0.0.1") const {
    return "https://" + std::string(host) + ":" + std::to_string(server_->port()) + std::string(path);
  }
  ClientOptions Trusting() const { return {.ca_pem = pki_.ca.certificate_pem}; }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  Pki pki_ = MakePki();
  Router router_;
  std::unique_ptr<Server> server_;
};

TEST_F(TlsTest, RequestsOverOneKeptAliveConnectionWithLargeBodies) {
  router_.Add("POST", "/echo", Sync([](const Request& r) { return Response::Text(200, r.body); }));
  StartServer();
  Client client(Trusting());
  for (int i = 0; i < 5; ++i) {
    auto r = client.Post(Url("/echo"), "hello " + std::to_string(i), "text/plain");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->body, "hello " + std::to_string(i));
  }
  EXPECT_EQ(client.stats().connections_opened, 1u);
  std::string big(20 * 1024 * 1024, 'x');
  for (size_t i = 0; i < big.size(); i += 4099) big[i] = static_cast<char>('a' + i % 26);
  auto r = client.Post(Url("/echo"), big, "application/octet-stream");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, big);
  // The DNS name in the certificate works as well as the IP address.
  auto by_name = client.Post(Url("/echo", "localhost"), "by name", "text/plain");
  ASSERT_TRUE(by_name.ok()) << by_name.status().ToString();
  EXPECT_EQ(by_name->body, "by name");
}

TEST_F(TlsTest, ConcurrentClientsAcrossIoThreads) {
  router_.Add("GET", "/ping", Sync([](const Request&) { return Response::Text(200, "pong"); }));
  StartServer();
  Client client(Trusting());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        auto r = client.Get(Url("/ping"));
        if (r.ok() && r->body == "pong") ok++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST_F(TlsTest, StreamsArriveChunkByChunkAndADepartedPeerIsNoticed) {
  std::promise<void> peer_gone;
  std::shared_ptr<Stream> stream;
  router_.Add("GET", "/watch", [&](Request, Responder responder) {
    stream = responder.StartStream(200);
    stream->OnClose([&] { peer_gone.set_value(); });
    stream->Write("first\n");
  });
  StartServer();
  Client client(Trusting());
  CancelToken cancel;
  std::vector<std::string> lines;
  auto r = client.StreamLines(
      {.url = Url("/watch")},
      [&](std::string_view line) {
        lines.emplace_back(line);
        if (lines.size() == 1) stream->Write("second\n");
        if (lines.size() == 2)
          std::thread([&] {
            std::this_thread::sleep_for(50ms);
            cancel.Cancel();
          }).detach();
        return true;
      },
      &cancel);
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << r.status().ToString();
  EXPECT_EQ(lines, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(peer_gone.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_FALSE(stream->Write("late"));
}

TEST_F(TlsTest, DrainEndsStreamsWithTheirTerminatingChunk) {
  std::promise<void> started;
  std::shared_ptr<Stream> stream;  // kept open: only the drain ends it
  router_.Add("GET", "/watch", [&](Request, Responder responder) {
    stream = responder.StartStream(200);
    stream->Write("event\n");
    started.set_value();
  });
  StartServer();
  std::promise<StatusOr<Response>> result;
  std::thread reader([&] {
    Client client(Trusting());
    result.set_value(client.Get(Url("/watch")));
  });
  ASSERT_EQ(started.get_future().wait_for(5s), std::future_status::ready);
  std::this_thread::sleep_for(100ms);
  EXPECT_TRUE(server_->Drain(5s));
  reader.join();
  auto r = result.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "event\n");  // a complete chunked body: the stream ended cleanly
  EXPECT_TRUE(stream->closed());
}

TEST_F(TlsTest, VerificationFailuresAreUnavailable) {
  pki_ = MakePki({"localhost"}, {});  // names localhost only, not the address 127.0.0.1
  router_.Add("GET", "/ping", Sync([](const Request&) { return Response::Text(200, "pong"); }));
  StartServer();
  Client system_store;  // the test CA is not in the system store
  auto untrusted = system_store.Get(Url("/ping", "localhost"));
  EXPECT_EQ(untrusted.status().code(), StatusCode::kUnavailable) << untrusted.status().ToString();
  Client other_ca({.ca_pem = MakePki().ca.certificate_pem});
  EXPECT_EQ(other_ca.Get(Url("/ping", "localhost")).status().code(), StatusCode::kUnavailable);
  // The same server by an address its certificate does not name.
  Client trusting(Trusting());
  auto wrong_host = trusting.Get(Url("/ping", "127.0.0.1"));
  EXPECT_EQ(wrong_host.status().code(), StatusCode::kUnavailable) << wrong_host.status().ToString();
  Client insecure({.insecure_skip_verify = true});
  auto skipped = insecure.Get(Url("/ping", "127.0.0.1"));
  ASSERT_TRUE(skipped.ok()) << skipped.status().ToString();
  EXPECT_EQ(skipped->body, "pong");
  // And the server keeps serving the clients that do trust it.
  auto fine = trusting.Get(Url("/ping", "localhost"));
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_EQ(fine->body, "pong");
}

TEST_F(TlsTest, PlainHttpToATlsPortFailsWithoutHurtingTheServer) {
  router_.Add("GET", "/ping", Sync([](const Request&) { return Response::Text(200, "pong"); }));
  StartServer({.read_timeout = 2s});
  // Plain HTTP gets the answer Go servers (kube-apiserver among them) give.
  Client plain;
  auto r = plain.Get("http://127.0.0.1:" + std::to_string(server_->port()) + "/ping");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body, "Client sent an HTTP request to an HTTPS server.\n");
  // Bytes that are neither TLS nor HTTP are closed without an answer.
  int junk = testing::Connect(server_->port());
  ASSERT_GE(junk, 0);
  testing::SendAll(junk, "\x01\x02\x03\x04\x05\x06");
  EXPECT_TRUE(testing::PeerClosed(junk, 5s));
  ::close(junk);
  // A peer that connects and never handshakes is closed after read_timeout.
  int fd = testing::Connect(server_->port());
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(testing::PeerClosed(fd, 5s));
  ::close(fd);
  Client client(Trusting());
  auto ok = client.Get(Url("/ping"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(TlsConfigTest, StartRefusesUnusableCertificatesAndKeys) {
  Pki pki = MakePki();
  Pki other = MakePki();
  auto start = [](std::string cert, std::string key) {
    Server server({.address = "127.0.0.1",
                   .io_threads = 1,
                   .tls_certificate_chain_pem = std::move(cert),
                   .tls_private_key_pem = std::move(key)},
                  Sync([](const Request&) { return Response::Text(200, ""); }));
    return server.Start();
  };
  EXPECT_TRUE(start(pki.serving.certificate_pem, pki.serving.private_key_pem).ok());
  EXPECT_EQ(start(pki.serving.certificate_pem, "").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(start("not a certificate", pki.serving.private_key_pem).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(start(pki.serving.certificate_pem, "not a key").code(), StatusCode::kInvalidArgument);
  Status mismatched = start(pki.serving.certificate_pem, other.serving.private_key_pem);
  EXPECT_EQ(mismatched.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatched.message().find("does not belong"), std::string::npos) << mismatched.message();
}

TEST(TlsConfigTest, ClientRefusesBadPemAndMixedCertificateSources) {
  Client bad_ca({.ca_pem = "not pem"});
  EXPECT_EQ(bad_ca.tls_status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(bad_ca.Get("https://127.0.0.1:1/").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(bad_ca.Get("http://127.0.0.1:1/").status().code() !=
              StatusCode::kFailedPrecondition);  // plain http unaffected
  Pki pki = MakePki();
  Client mixed({.client_cert_file = "/nonexistent.crt",
                .client_key_file = "/nonexistent.key",
                .client_cert_pem = pki.serving.certificate_pem,
                .client_key_pem = pki.serving.private_key_pem});
  EXPECT_EQ(mixed.Get("https://127.0.0.1:1/").status().code(), StatusCode::kFailedPrecondition);
  Client good({.ca_pem = pki.ca.certificate_pem,
               .client_cert_pem = pki.serving.certificate_pem,
               .client_key_pem = pki.serving.private_key_pem});
  EXPECT_TRUE(good.tls_status().ok()) << good.tls_status().ToString();
}

}  // namespace
}  // namespace mf::http
