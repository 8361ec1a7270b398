// Our client against a real nginx (started by the test with its own config on free ports):
// keep-alive reuse, large Content-Length bodies, chunked gzip bodies, errors, and TLS with a CA
// file, with verification off, and with a client certificate (mutual TLS).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "http/body_codec.h"
#include "http/client.h"
#include "tests/unit/http/test_util.h"

namespace mf::http {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool OnPath(const char* tool) {
  return std::system((std::string("command -v ") + tool + " >/dev/null 2>&1").c_str()) == 0;
}

class NginxTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!OnPath("nginx") || !OnPath("openssl")) return;
    dir_ = fs::temp_directory_path() / ("mf_http_nginx_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "logs");
    fs::create_directories(dir_ / "static");
    std::string d = dir_.string();
    // One self-signed server certificate (its own CA) and one self-signed client certificate.
    std::string gen =
        "cd " + d +
        " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
        "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout server.key -out server.crt >/dev/null 2>&1 && "
        "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=modelfleet-client "
        "-keyout client.key -out client.crt >/dev/null 2>&1";
    if (std::system(gen.c_str()) != 0) return;
    big_.assign(5 << 20, '\0');
    for (size_t i = 0; i < big_.size(); ++i) big_[i] = static_cast<char>('a' + (i * 7919) % 26);
    std::ofstream(dir_ / "static" / "big.txt", std::ios::binary) << big_;
    http_port_ = testing::FreePort();
    https_port_ = testing::FreePort();
    mtls_port_ = testing::FreePort();
    std::ofstream conf(dir_ / "nginx.conf");
    conf << "worker_processes 1;\npid " << d << "/nginx.pid;\nerror_log " << d << "/logs/error.log warn;\n"
         << "events { worker_connections 256; }\nhttp {\n  access_log off;\n"
         << "  client_body_temp_path " << d << "/body;\n  proxy_temp_path " << d << "/proxy;\n"
         << "  fastcgi_temp_path " << d << "/fastcgi;\n"
         << "  gzip on; gzip_types text/plain; gzip_min_length 1;\n"
         << "  server {\n    listen 127.0.0.1:" << http_port_ << ";\n"
         << "    listen 127.0.0.1:" << https_port_ << " ssl;\n"
         << "    ssl_certificate " << d << "/server.crt;\n    ssl_certificate_key " << d << "/server.key;\n"
         << "    location = /small { default_type text/plain; return 200 \"hello from nginx\\n\"; }\n"
         << "    location = /upload { client_max_body_size 1k; default_type text/plain; return 200 \"ok\\n\"; }\n"
         << "    location /static/ { alias " << d << "/static/; default_type text/plain; }\n"
         << "  }\n"
         << "  server {\n    listen 127.0.0.1:" << mtls_port_ << " ssl;\n"
         << "    ssl_certificate " << d << "/server.crt;\n    ssl_certificate_key " << d << "/server.key;\n"
         << "    ssl_client_certificate " << d << "/client.crt;\n    ssl_verify_client on;\n"
         << "    location / { default_type text/plain; return 200 \"hello $ssl_client_s_dn\\n\"; }\n"
         << "  }\n}\n";
    conf.close();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execlp("nginx", "nginx", "-p", d.c_str(), "-c", (d + "/nginx.conf").c_str(), "-g", "daemon off;",
               static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int i = 0; i < 200; ++i) {
      int fd = testing::Connect(mtls_port_);
      if (fd >= 0) {
        ::close(fd);
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
  }

  static void TearDownTestSuite() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void SetUp() override {
    if (pid_ <= 0) GTEST_SKIP() << "nginx or openssl not available";
  }

  static std::string Url(std::string_view path, bool tls = false) {
    return std::string(tls ? "https" : "http") + "://127.0.0.1:" + std::to_string(tls ? https_port_ : http_port_) +
           std::string(path);
  }

  static inline fs::path dir_;
  static inline pid_t pid_ = -1;
  static inline uint16_t http_port_ = 0, https_port_ = 0, mtls_port_ = 0;
  static inline std::string big_;
};

TEST_F(NginxTest, KeepAliveReusesTheConnection) {
  Client client;
  for (int i = 0; i < 10; ++i) {
    auto r = client.Get(Url("/small"));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello from nginx\n");
  }
  EXPECT_EQ(client.stats().connections_opened, 1u);
}

TEST_F(NginxTest, LargeContentLengthBody) {
  Client client;
  auto r = client.Get(Url("/static/big.txt"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->headers.Get("Content-Length"), std::to_string(big_.size()));
  EXPECT_TRUE(r->body == big_);
}

TEST_F(NginxTest, ChunkedGzipBodyFromARealPeer) {
  Client client;
  Headers h;
  h.Set("Accept-Encoding", "gzip");
  auto r = client.Get(Url("/static/big.txt"), h);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->headers.Get("Transfer-Encoding"), "chunked");
  EXPECT_EQ(r->headers.Get("Content-Encoding"), "gzip");
  std::string plain;
  ASSERT_EQ(Inflate(r->body, big_.size(), &plain), InflateResult::kOk);
  EXPECT_TRUE(plain == big_);
}

TEST_F(NginxTest, StreamedBodyArrivesInPieces) {
  Client client;
  ClientRequest req;
  req.url = Url("/static/big.txt");
  size_t pieces = 0, total = 0;
  auto r = client.Stream(req, [&](std::string_view data) {
    pieces++;
    total += data.size();
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(total, big_.size());
  EXPECT_GT(pieces, 1u);
  EXPECT_TRUE(r->body.empty());
}

TEST_F(NginxTest, ErrorStatusesAreResponsesNotFailures) {
  Client client;
  auto r = client.Get(Url("/missing"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  r = client.Post(Url("/upload"), std::string(10000, 'x'), "text/plain");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 413);
}

TEST_F(NginxTest, TlsWithCaFile) {
  Client client({.ca_file = (dir_ / "server.crt").string()});
  for (int i = 0; i < 3; ++i) {
    auto r = client.Get(Url("/small", /*tls=*/true));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->body, "hello from nginx\n");
  }
  EXPECT_EQ(client.stats().connections_opened, 1u);
}

TEST_F(NginxTest, TlsRejectsUnknownCertificateUnlessToldToSkip) {
  Client strict;  // system trust store: our self-signed certificate is not in it
  auto r = strict.Get(Url("/small", true));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("TLS handshake"), std::string::npos) << r.status().ToString();

  Client insecure({.insecure_skip_verify = true});
  r = insecure.Get(Url("/small", true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
}

TEST_F(NginxTest, MutualTlsWithClientCertificate) {
  std::string url = "https://127.0.0.1:" + std::to_string(mtls_port_) + "/";
  Client without({.ca_file = (dir_ / "server.crt").string()});
  auto r = without.Get(url);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 400);  // nginx: "No required SSL certificate was sent"

  Client with({.ca_file = (dir_ / "server.crt").string(),
               .client_cert_file = (dir_ / "client.crt").string(),
               .client_key_file = (dir_ / "client.key").string()});
  r = with.Get(url);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello CN=modelfleet-client\n");
}

TEST_F(NginxTest, MissingTlsFilesAreReportedClearly) {
  Client client({.ca_file = "/nonexistent/ca.pem"});
  auto r = client.Get(Url("/small", true));
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("/nonexistent/ca.pem"), std::string::npos);
  // Plain http does not need the TLS configuration.
  EXPECT_TRUE(client.Get(Url("/small")).ok());
}

}  // namespace
}  // namespace mf::http
