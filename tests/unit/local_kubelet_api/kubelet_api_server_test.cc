// The kubelet API server end to end over TLS on a loopback port: logs, exec and port-forward as
// kube-apiserver drives them (the SPDY client here speaks as client-go does: one SYN_STREAM per
// channel with a streamType header, stdin ended with an empty FIN frame, port-forward pairs by
// requestID with the error stream half-closed at once).
#include "tools/local/kubelet_api/kubelet_api_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/unit/local_kubelet_api/tls_test_client.h"

namespace mf::local {
namespace {

using testing::HttpGet;
using testing::SpdyTestClient;
using testing::TestPki;
using testing::TlsTestClient;
using Json = nlohmann::json;
using namespace std::chrono_literals;

std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string ExecPath(const std::vector<std::string>& command, const std::string& streams) {
  std::string path = "/exec/default/web/app?" + streams;
  for (const auto& arg : command) path += "&command=" + Escape(arg);
  return path;
}

bool Alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, comm, state;
  if (!(stat >> pid_field >> comm >> state)) return false;
  return state != "Z";
}

bool EventuallyGone(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    if (!Alive(pid)) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

// A TCP listener on 127.0.0.1 that echoes each connection until EOF, then closes it.
class EchoServer {
 public:
  EchoServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    listen(fd_, 16);
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (true) {
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        std::thread([c] {
          char buf[65536];
          ssize_t n;
          while ((n = read(c, buf, sizeof(buf))) > 0) {
            for (ssize_t off = 0; off < n;) {
              const ssize_t w = write(c, buf + off, static_cast<size_t>(n - off));
              if (w <= 0) break;
              off += w;
            }
          }
          close(c);
        }).detach();
      }
    });
  }
  ~EchoServer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
};

uint16_t UnusedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

class KubeletApiServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { pki_ = new TestPki(testing::MakeTestPki()); }
  static void TearDownTestSuite() { delete pki_; }

  void SetUp() override {
    dir_ =
        std::filesystem::path(::testing::TempDir()) / ("kubelet_api_" + std::to_string(getpid()) + "_" +
                                                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "data");
    current_log_ = dir_ / "app-1.log";
    std::ofstream(current_log_) << "one\ntwo\nthree\n";
    StartServer("");
  }

  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartServer(const std::string& client_ca) {
    KubeletApiHooks hooks;
    auto known = [](const std::string& ns, const std::string& pod, const std::string& container) -> Status {
      if (ns != "default" || pod != "web") return NotFound("pod \"" + pod + "\" not found in namespace " + ns);
      if (container != "app") return NotFound("container \"" + container + "\" not found in pod " + pod);
      return Status::Ok();
    };
    hooks.log_path = [this, known](const std::string& ns, const std::string& pod, const std::string& container,
                                   bool previous) -> StatusOr<std::filesystem::path> {
      MF_RETURN_IF_ERROR(known(ns, pod, container));
      if (previous) return NotFound("previous terminated container \"app\" in pod \"web\" not found");
      return current_log_;
    };
    hooks.container_running = [this](const std::string&, const std::string&, const std::string&) {
      running_calls_++;
      return running_.load();
    };
    hooks.exec_target = [this, known](const std::string& ns, const std::string& pod,
                                      const std::string& container) -> StatusOr<ExecTarget> {
      MF_RETURN_IF_ERROR(known(ns, pod, container));
      if (!running_) return FailedPrecondition("container \"app\" is not running");
      ExecTarget target;
      target.env = {{"PATH", "/usr/bin:/bin"}, {"POD_NAME", "web"}};
      target.working_dir = dir_;
      const std::string data_dir = (dir_ / "data").string();
      target.rewrite_arg = [data_dir](const std::string& arg) {
        return arg.rfind("/data/", 0) == 0 ? data_dir + arg.substr(5) : arg;
      };
      return target;
    };
    hooks.pod_ip = [](const std::string& ns, const std::string& pod) -> StatusOr<std::string> {
      if (ns != "default" || pod != "web") return NotFound("pod \"" + pod + "\" not found");
      return std::string("127.0.0.1");
    };
    KubeletApiOptions options;
    options.address = "127.0.0.1";
    options.port = 0;
    options.certificate_pem = pki_->server.certificate_pem;
    options.private_key_pem = pki_->server.private_key_pem;
    options.client_ca_pem = client_ca;
    options.log_poll_interval = 20ms;
    options.stream_creation_timeout = 1s;
    options.exec_finish_timeout = 5s;
    server_ = std::make_unique<KubeletApiServer>(options, hooks);
    Status started = server_->Start();
    ASSERT_TRUE(started.ok()) << started.ToString();
  }

  std::unique_ptr<TlsTestClient> Connect(const http::PemCertificate* client_cert = nullptr) {
    auto c = TlsTestClient::Connect(server_->port(), pki_->ca.certificate_pem, client_cert);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(*c) : nullptr;
  }

  testing::HttpResult Get(const std::string& target) {
    auto client = Connect();
    if (!client) return {};
    auto result = HttpGet(*client, target);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : testing::HttpResult{};
  }

  std::unique_ptr<SpdyTestClient> Upgrade(const std::string& target, const std::vector<std::string>& protocols,
                                          std::string* head) {
    auto client = SpdyTestClient::Upgrade(Connect(), target, protocols, head);
    return client.ok() ? std::move(*client) : nullptr;
  }

  // Opens an exec session's streams as client-go does; returns their ids.
  struct ExecStreams {
    uint32_t error = 0, in = 0, out = 0, err = 0, resize = 0;
  };
  ExecStreams OpenExecStreams(SpdyTestClient& c, bool in, bool out, bool err, bool resize) {
    ExecStreams s;
    s.error = c.Open({{"streamtype", "error"}});
    if (in) s.in = c.Open({{"streamtype", "stdin"}});
    if (out) s.out = c.Open({{"streamtype", "stdout"}});
    if (err) s.err = c.Open({{"streamtype", "stderr"}});
    if (resize) s.resize = c.Open({{"streamtype", "resize"}});
    return s;
  }

  static TestPki* pki_;
  std::filesystem::path dir_;
  std::filesystem::path current_log_;
  std::atomic<bool> running_{true};
  std::atomic<int> running_calls_{0};
  std::unique_ptr<KubeletApiServer> server_;
};

TestPki* KubeletApiServerTest::pki_ = nullptr;

TEST_F(KubeletApiServerTest, HealthzAndUnknownPaths) {
  auto ok = Get("/healthz");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(ok.body, "ok");
  EXPECT_EQ(Get("/pods").status, 404);
  EXPECT_EQ(Get("/run/default/web/app").status, 404);
  auto attach = Get("/attach/default/web/app?output=1");
  EXPECT_EQ(attach.status, 501);
  EXPECT_NE(attach.body.find("kubectl logs"), std::string::npos) << attach.body;
}

TEST_F(KubeletApiServerTest, KeepAliveServesSeveralRequests) {
  auto client = Connect();
  for (int i = 0; i < 3; ++i) {
    auto r = HttpGet(*client, "/healthz");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->body, "ok");
  }
}

TEST_F(KubeletApiServerTest, LogsWholeTailAndLimit) {
  EXPECT_EQ(Get("/containerLogs/default/web/app").body, "one\ntwo\nthree\n");
  EXPECT_EQ(Get("/containerLogs/default/web/app?tailLines=2").body, "two\nthree\n");
  EXPECT_EQ(Get("/containerLogs/default/web/app?limitBytes=5").body, "one\nt");
  EXPECT_EQ(Get("/containerLogs/default/web/app?tailLines=1&limitBytes=3").body, "thr");
  EXPECT_EQ(Get("/containerLogs/default/web/app?tailLines=0").body, "");
}

TEST_F(KubeletApiServerTest, LogErrorsSayWhy) {
  auto timestamps = Get("/containerLogs/default/web/app?timestamps=true");
  EXPECT_EQ(timestamps.status, 400);
  EXPECT_NE(timestamps.body.find("timestamps"), std::string::npos);
  auto previous = Get("/containerLogs/default/web/app?previous=true");
  EXPECT_EQ(previous.status, 404);
  EXPECT_NE(previous.body.find("previous terminated container"), std::string::npos);
  EXPECT_EQ(Get("/containerLogs/default/nope/app").status, 404);
  EXPECT_EQ(Get("/containerLogs/default/web/nope").status, 404);
}

TEST_F(KubeletApiServerTest, ALogNotWrittenYetIsEmpty) {
  std::filesystem::remove(current_log_);
  auto result = Get("/containerLogs/default/web/app?tailLines=5");
  EXPECT_EQ(result.status, 200);
  EXPECT_EQ(result.body, "");
}

TEST_F(KubeletApiServerTest, FollowSendsAppendedOutputUntilTheContainerStops) {
  auto client = Connect();
  ASSERT_TRUE(
      client->Write("GET /containerLogs/default/web/app?follow=true&tailLines=1 HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  std::string raw;
  auto read_until = [&](const std::string& text) {
    while (raw.find(text) == std::string::npos) {
      auto more = client->Read(10s);
      ASSERT_TRUE(more.ok()) << more.status().ToString() << " after " << raw;
      ASSERT_FALSE(client->eof()) << raw;
      raw += *more;
    }
  };
  read_until("three\n");
  {
    std::ofstream log(current_log_, std::ios::app);
    log << "four\n" << std::flush;
    read_until("four\n");
    log << "five\n" << std::flush;
    read_until("five\n");
  }
  // The container stops right after its last write: that write must still be sent.
  std::ofstream(current_log_, std::ios::app) << "last words\n";
  running_ = false;
  auto result = testing::ReadHttpResponse(*client, raw, 10s);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->body, "three\nfour\nfive\nlast words\n");
}

TEST_F(KubeletApiServerTest, FollowEndsWhenTheInstanceIsReplaced) {
  // A restart: the node agent moves the old log aside and the new instance writes a new file at the
  // same path, while the container counts as running throughout.
  auto client = Connect();
  ASSERT_TRUE(client->Write("GET /containerLogs/default/web/app?follow=true HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  std::string raw;
  while (raw.find("three\n") == std::string::npos) {
    auto more = client->Read(10s);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    raw += *more;
  }
  std::ofstream(current_log_, std::ios::app) << "last of the old instance\n";
  std::filesystem::rename(current_log_, dir_ / "app-1.previous.log");
  std::ofstream(current_log_) << "new instance\n";
  auto result = testing::ReadHttpResponse(*client, raw, 10s);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->body, "one\ntwo\nthree\nlast of the old instance\n");
}

TEST_F(KubeletApiServerTest, FollowStopsWhenTheClientHangsUp) {
  auto client = Connect();
  ASSERT_TRUE(client->Write("GET /containerLogs/default/web/app?follow=true HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  std::string got;
  while (got.find("three\n") == std::string::npos) {
    auto more = client->Read(5s);
    ASSERT_TRUE(more.ok()) << more.status().ToString();
    got += *more;
  }
  for (int i = 0; i < 500 && running_calls_.load() == 0; ++i) std::this_thread::sleep_for(10ms);
  ASSERT_GT(running_calls_.load(), 0) << "the server never checked whether the container runs";
  client->Abort();
  std::this_thread::sleep_for(200ms);
  const int after_hangup = running_calls_.load();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(running_calls_.load(), after_hangup) << "the server kept polling a log nobody reads";
}

TEST_F(KubeletApiServerTest, ExecReportsOutputAndTheExitCode) {
  std::string head;
  auto c = Upgrade(ExecPath({"sh", "-c", "echo out; echo err >&2; echo $POD_NAME; exit 3"}, "output=1&error=1"),
                   {"v4.channel.k8s.io", "v3.channel.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  EXPECT_NE(head.find("X-Stream-Protocol-Version: v4.channel.k8s.io"), std::string::npos) << head;
  const ExecStreams s = OpenExecStreams(*c, false, true, true, false);
  ASSERT_TRUE(
      c->ReadUntil([&] { return c->stream(s.error).fin && c->stream(s.out).fin && c->stream(s.err).fin; }).ok());
  EXPECT_TRUE(c->stream(s.error).replied && c->stream(s.out).replied && c->stream(s.err).replied);
  EXPECT_EQ(c->stream(s.out).data, "out\nweb\n");
  EXPECT_EQ(c->stream(s.err).data, "err\n");
  const Json status = Json::parse(c->stream(s.error).data);
  EXPECT_EQ(status["status"], "Failure");
  EXPECT_EQ(status["reason"], "NonZeroExitCode");
  EXPECT_EQ(status["details"]["causes"][0]["reason"], "ExitCode");
  EXPECT_EQ(status["details"]["causes"][0]["message"], "3");
}

TEST_F(KubeletApiServerTest, ExecSuccessAndArgumentRewriting) {
  std::ofstream(dir_ / "data" / "greeting") << "hello from a volume\n";
  std::string head;
  auto c = Upgrade(ExecPath({"cat", "/data/greeting"}, "output=1&error=1"), {"v5.channel.k8s.io", "v4.channel.k8s.io"},
                   &head);
  ASSERT_NE(c, nullptr) << head;
  EXPECT_NE(head.find("X-Stream-Protocol-Version: v5.channel.k8s.io"), std::string::npos) << head;
  const ExecStreams s = OpenExecStreams(*c, false, true, true, false);
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(s.error).fin && c->stream(s.out).fin; }).ok());
  EXPECT_EQ(c->stream(s.out).data, "hello from a volume\n");
  EXPECT_EQ(Json::parse(c->stream(s.error).data), Json::parse(R"({"metadata":{},"status":"Success"})"));
}

TEST_F(KubeletApiServerTest, ExecStdinReachesTheCommand) {
  std::string head;
  auto c = Upgrade(ExecPath({"cat"}, "input=1&output=1"), {"v4.channel.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  const ExecStreams s = OpenExecStreams(*c, true, true, false, false);
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(s.in).replied; }).ok());
  ASSERT_TRUE(c->Send(s.in, "hello\n", false).ok());
  ASSERT_TRUE(c->Send(s.in, "", true).ok());  // client-go's Close(): an empty FIN frame
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(s.error).fin && c->stream(s.out).fin; }).ok());
  EXPECT_EQ(c->stream(s.out).data, "hello\n");
  EXPECT_EQ(Json::parse(c->stream(s.error).data)["status"], "Success");
  // The server ends our stdin stream once the command is done, so client-go's reader of it returns.
  EXPECT_TRUE(c->stream(s.in).reset);
}

TEST_F(KubeletApiServerTest, ExecMovesMegabytesBothWays) {
  std::string head;
  auto c = Upgrade(ExecPath({"cat"}, "input=1&output=1"), {"v4.channel.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  const ExecStreams s = OpenExecStreams(*c, true, true, false, false);
  std::string payload;
  for (int i = 0; payload.size() < 4 * 1024 * 1024; ++i) payload += "line " + std::to_string(i) + "\n";
  ASSERT_TRUE(c->Send(s.in, payload, true).ok());
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(s.error).fin && c->stream(s.out).fin; }, 60s).ok());
  EXPECT_EQ(c->stream(s.out).data.size(), payload.size());
  EXPECT_TRUE(c->stream(s.out).data == payload);
}

TEST_F(KubeletApiServerTest, ExecTerminalGetsItsSize) {
  std::string head;
  auto c = Upgrade(ExecPath({"sh", "-c", "read x; stty size"}, "input=1&output=1&tty=1"), {"v4.channel.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  const ExecStreams s = OpenExecStreams(*c, true, true, false, true);
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(s.resize).replied; }).ok());
  ASSERT_TRUE(c->Send(s.resize, "{\"Width\":100,\"Height\":40}\n", false).ok());
  std::this_thread::sleep_for(100ms);
  ASSERT_TRUE(c->Send(s.in, "go\r", false).ok());
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(s.error).fin && c->stream(s.out).fin; }).ok());
  EXPECT_NE(c->stream(s.out).data.find("40 100"), std::string::npos) << c->stream(s.out).data;
}

TEST_F(KubeletApiServerTest, ExecOfAMissingProgramSaysSo) {
  std::string head;
  auto c = Upgrade(ExecPath({"no-such-tool", "--help"}, "output=1&error=1"), {"v4.channel.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  const ExecStreams s = OpenExecStreams(*c, false, true, true, false);
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(s.error).fin; }).ok());
  const Json status = Json::parse(c->stream(s.error).data);
  EXPECT_EQ(status["status"], "Failure");
  EXPECT_EQ(status["reason"], "InternalError");
  EXPECT_EQ(status["code"], 500);
  EXPECT_NE(status["message"].get<std::string>().find("executable file not found in $PATH"), std::string::npos)
      << status.dump();
}

TEST_F(KubeletApiServerTest, ExecV2ReportsFailuresAsText) {
  std::string head;
  auto c = Upgrade(ExecPath({"sh", "-c", "exit 4"}, "output=1"), {"v2.channel.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  const ExecStreams s = OpenExecStreams(*c, false, true, false, false);
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(s.error).fin; }).ok());
  EXPECT_EQ(c->stream(s.error).data, "command terminated with non-zero exit code: exit status 4");
}

TEST_F(KubeletApiServerTest, ExecDoesNotWaitForWhatTheCommandLeftRunning) {
  // The background sleep keeps stdout open; the exit is reported after a short grace anyway.
  std::string head;
  auto c = Upgrade(ExecPath({"sh", "-c", "sleep 100 & echo started"}, "output=1"), {"v4.channel.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  const ExecStreams s = OpenExecStreams(*c, false, true, false, false);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(s.error).fin && c->stream(s.out).fin; }).ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(c->stream(s.out).data, "started\n");
  EXPECT_EQ(Json::parse(c->stream(s.error).data)["status"], "Success");
}

TEST_F(KubeletApiServerTest, ExecClientGoneKillsTheCommand) {
  std::string head;
  auto c = Upgrade(ExecPath({"sh", "-c", "echo $$; sleep 100 & wait"}, "output=1"), {"v4.channel.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  const ExecStreams s = OpenExecStreams(*c, false, true, false, false);
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(s.out).data.find('\n') != std::string::npos; }).ok());
  const pid_t pid = std::stoi(c->stream(s.out).data);
  ASSERT_TRUE(Alive(pid));
  c->tls().Abort();
  EXPECT_TRUE(EventuallyGone(pid));
}

TEST_F(KubeletApiServerTest, StopKillsRunningCommands) {
  std::string head;
  auto c = Upgrade(ExecPath({"sh", "-c", "echo $$; exec sleep 100"}, "output=1"), {"v4.channel.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  const ExecStreams s = OpenExecStreams(*c, false, true, false, false);
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(s.out).data.find('\n') != std::string::npos; }).ok());
  const pid_t pid = std::stoi(c->stream(s.out).data);
  server_->Stop();
  EXPECT_TRUE(EventuallyGone(pid));
}

TEST_F(KubeletApiServerTest, ExecRefusalsBeforeTheUpgrade) {
  std::string head;
  EXPECT_EQ(Upgrade("/exec/default/nope/app?command=ls&output=1", {"v4.channel.k8s.io"}, &head), nullptr);
  EXPECT_NE(head.find("404"), std::string::npos) << head;
  EXPECT_EQ(Upgrade("/exec/default/web/app?command=ls", {"v4.channel.k8s.io"}, &head), nullptr);
  EXPECT_NE(head.find("400"), std::string::npos) << head;
  EXPECT_NE(head.find("at least 1 of stdin, stdout, stderr"), std::string::npos) << head;
  EXPECT_EQ(Upgrade("/exec/default/web/app?command=ls&output=1", {"channel.k8s.io"}, &head), nullptr);
  EXPECT_NE(head.find("403"), std::string::npos) << head;
  EXPECT_NE(head.find("X-Accepted-Stream-Protocol-Versions: v4.channel.k8s.io"), std::string::npos) << head;
  auto plain = Get("/exec/default/web/app?command=ls&output=1");
  EXPECT_EQ(plain.status, 400);
  EXPECT_NE(plain.body.find("unable to upgrade"), std::string::npos) << plain.body;
  running_ = false;
  EXPECT_EQ(Upgrade("/exec/default/web/app?command=ls&output=1", {"v4.channel.k8s.io"}, &head), nullptr);
  EXPECT_NE(head.find("not running"), std::string::npos) << head;
}

TEST_F(KubeletApiServerTest, ExecWithoutAllItsStreamsTimesOut) {
  std::string head;
  auto c = Upgrade(ExecPath({"true"}, "output=1&error=1"), {"v4.channel.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  c->Open({{"streamtype", "error"}});
  EXPECT_EQ(c->ReadUntil([] { return false; }, 5s).code(), StatusCode::kUnavailable);  // closed after 1 s
}

TEST_F(KubeletApiServerTest, PingsAreAnsweredAndGarbageEndsTheConnection) {
  std::string head;
  auto c = Upgrade("/portForward/default/web", {"portforward.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  ASSERT_TRUE(c->SendRaw(spdy::EncodePing(1)).ok());
  ASSERT_TRUE(c->SendRaw(spdy::EncodePing(3)).ok());
  ASSERT_TRUE(c->ReadUntil([&] { return c->pings().size() == 2; }).ok());
  EXPECT_EQ(c->pings(), (std::vector<uint32_t>{1, 3}));
  ASSERT_TRUE(c->SendRaw(spdy::EncodeControl(6, 0, std::string(4, '\0'), /*version=*/2)).ok());
  EXPECT_EQ(c->ReadUntil([] { return false; }).code(), StatusCode::kUnavailable);
  EXPECT_TRUE(c->goaway());
}

TEST_F(KubeletApiServerTest, PortForwardRoundTrips) {
  EchoServer echo;
  std::string head;
  auto c = Upgrade("/portForward/default/web", {"portforward.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  EXPECT_NE(head.find("X-Stream-Protocol-Version: portforward.k8s.io"), std::string::npos) << head;
  const std::string port = std::to_string(echo.port());
  struct Request {
    uint32_t error, data;
    std::string payload;
  };
  std::vector<Request> requests;
  for (int id = 0; id < 3; ++id) {
    Request r;
    r.error = c->Open({{"streamtype", "error"}, {"port", port}, {"requestid", std::to_string(id)}}, /*fin=*/true);
    r.data = c->Open({{"streamtype", "data"}, {"port", port}, {"requestid", std::to_string(id)}});
    r.payload = "request " + std::to_string(id) + ": " + std::string(100000 * (id + 1), 'a' + id);
    requests.push_back(r);
  }
  for (const auto& r : requests) ASSERT_TRUE(c->Send(r.data, r.payload, true).ok());
  for (const auto& r : requests) {
    ASSERT_TRUE(c->ReadUntil([&] { return c->stream(r.data).fin && c->stream(r.error).fin; }).ok());
    EXPECT_TRUE(c->stream(r.data).data == r.payload) << c->stream(r.data).data.size();
    EXPECT_EQ(c->stream(r.error).data, "");
  }
}

TEST_F(KubeletApiServerTest, PortForwardReportsARefusedConnection) {
  std::string head;
  auto c = Upgrade("/portForward/default/web", {"portforward.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  const std::string port = std::to_string(UnusedPort());
  const uint32_t error = c->Open({{"streamtype", "error"}, {"port", port}, {"requestid", "0"}}, true);
  const uint32_t data = c->Open({{"streamtype", "data"}, {"port", port}, {"requestid", "0"}});
  ASSERT_TRUE(c->ReadUntil([&] { return c->stream(error).fin && c->stream(data).reset; }).ok());
  const std::string& message = c->stream(error).data;
  EXPECT_NE(message.find("error forwarding port " + port + " to pod default/web"), std::string::npos) << message;
  EXPECT_NE(message.find("refused"), std::string::npos) << message;
}

TEST_F(KubeletApiServerTest, PortForwardRefusesStreamsWithoutPortOrType) {
  std::string head;
  auto c = Upgrade("/portForward/default/web", {"portforward.k8s.io"}, &head);
  ASSERT_NE(c, nullptr) << head;
  const uint32_t no_port = c->Open({{"streamtype", "data"}, {"requestid", "0"}});
  const uint32_t bad_port = c->Open({{"streamtype", "data"}, {"port", "70000"}, {"requestid", "1"}});
  const uint32_t bad_type = c->Open({{"streamtype", "stdin"}, {"port", "80"}, {"requestid", "2"}});
  ASSERT_TRUE(c->ReadUntil([&] {
                 return c->stream(no_port).reset && c->stream(bad_port).reset && c->stream(bad_type).reset;
               }).ok());
  EXPECT_EQ(c->stream(no_port).reset_status, static_cast<uint32_t>(spdy::RstStatus::kRefusedStream));
  std::string not_found;
  EXPECT_EQ(Upgrade("/portForward/default/nope", {"portforward.k8s.io"}, &not_found), nullptr);
  EXPECT_NE(not_found.find("404"), std::string::npos) << not_found;
}

TEST_F(KubeletApiServerTest, ClientCertificatesAreRequiredWhenConfigured) {
  server_.reset();
  StartServer(pki_->ca.certificate_pem);
  auto anonymous = TlsTestClient::Connect(server_->port(), pki_->ca.certificate_pem, nullptr);
  if (anonymous.ok()) {
    // TLS 1.3 reports the missing certificate after the client's handshake is done.
    auto r = HttpGet(**anonymous, "/healthz", 5s);
    EXPECT_FALSE(r.ok());
  }
  auto authenticated = Connect(&pki_->client);
  ASSERT_NE(authenticated, nullptr);
  auto r = HttpGet(*authenticated, "/healthz");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "ok");
}

}  // namespace
}  // namespace mf::local
