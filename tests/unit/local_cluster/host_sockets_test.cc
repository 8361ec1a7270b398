// The host socket broker: listeners on the host's loopback handed over a Unix socket, refused for
// any other address. (The namespace switch itself is covered end to end by the cluster tests.)
#include "tools/local/cluster/host_sockets.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

namespace mf::local {
namespace {

class HostSocketsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mf-broker-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    auto pid = StartHostSocketBroker(dir_ / "host.sock");
    ASSERT_TRUE(pid.ok()) << pid.status().message();
    pid_ = *pid;
  }
  void TearDown() override {
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  pid_t pid_ = 0;
};

uint16_t PortOf(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

TEST_F(HostSocketsTest, HandsOverListeningLoopbackSockets) {
  auto fd = OpenHostListener(dir_ / "host.sock", "127.0.0.1", 0);
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  const uint16_t port = PortOf(*fd);
  ASSERT_NE(port, 0);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  int accepted = accept(*fd, nullptr, nullptr);
  EXPECT_GE(accepted, 0);
  close(accepted);
  close(client);
  // The same port again is the bind error, with the address in the message.
  auto again = OpenHostListener(dir_ / "host.sock", "127.0.0.1", port);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos)
      << again.status().message();
  close(*fd);
}

TEST_F(HostSocketsTest, RefusesAddressesBeyondLoopback) {
  for (const char* ip : {"0.0.0.0", "10.244.0.1", "192.168.1.1", "not-an-ip"}) {
    auto fd = OpenHostListener(dir_ / "host.sock", ip, 0);
    ASSERT_FALSE(fd.ok()) << ip;
    EXPECT_EQ(fd.status().code(), StatusCode::kInvalidArgument) << ip;
  }
}

TEST(HostSocketsNoBrokerTest, ClearErrorWhenTheBrokerIsGone) {
  auto fd = OpenHostListener("/nonexistent/host.sock", "127.0.0.1", 0);
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find("broker"), std::string::npos);
}

}  // namespace
}  // namespace mf::local
