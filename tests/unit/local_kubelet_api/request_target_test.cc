// Routing and query parsing of the kubelet API (tools/local/kubelet_api/request_target.h), and the
// exec options and protocol negotiation built on them (remote_command.h).
#include "tools/local/kubelet_api/request_target.h"

#include <gtest/gtest.h>

#include "tools/local/kubelet_api/remote_command.h"

namespace mf::local {
namespace {

using Kind = KubeletTarget::Kind;

TEST(KubeletTargetTest, RoutesThePathsTheApiServerBuilds) {
  struct Case {
    const char* path;
    Kind kind;
    const char* ns;
    const char* pod;
    const char* uid;
    const char* container;
  };
  const Case cases[] = {
      {"/healthz", Kind::kHealthz, "", "", "", ""},
      {"/containerLogs/default/web-1/app", Kind::kContainerLogs, "default", "web-1", "", "app"},
      {"/exec/default/web-1/app", Kind::kExec, "default", "web-1", "", "app"},
      {"/exec/default/web-1/0f3c-uid/app", Kind::kExec, "default", "web-1", "0f3c-uid", "app"},
      {"/attach/ns/p/c", Kind::kAttach, "ns", "p", "", "c"},
      {"/portForward/ns/p", Kind::kPortForward, "ns", "p", "", ""},
      {"/portForward/ns/p/uid-1", Kind::kPortForward, "ns", "p", "uid-1", ""},
      {"/exec/ns/p%2Dx/c", Kind::kExec, "ns", "p-x", "", "c"},
      {"/", Kind::kNotFound, "", "", "", ""},
      {"/healthz/", Kind::kNotFound, "", "", "", ""},
      {"/exec/ns/p", Kind::kNotFound, "", "", "", ""},
      {"/exec/ns//c", Kind::kNotFound, "", "", "", ""},
      {"/containerLogs/ns/p/c/extra", Kind::kNotFound, "", "", "", ""},
      {"/portForward/ns", Kind::kNotFound, "", "", "", ""},
      {"/run/ns/p/c", Kind::kNotFound, "", "", "", ""},
      {"healthz", Kind::kNotFound, "", "", "", ""},
  };
  for (const auto& c : cases) {
    const KubeletTarget t = ParseKubeletTarget(c.path);
    EXPECT_EQ(t.kind, c.kind) << c.path;
    if (c.kind == Kind::kNotFound || c.kind == Kind::kHealthz) continue;
    EXPECT_EQ(t.ns, c.ns) << c.path;
    EXPECT_EQ(t.pod, c.pod) << c.path;
    EXPECT_EQ(t.uid, c.uid) << c.path;
    EXPECT_EQ(t.container, c.container) << c.path;
  }
}

TEST(QueryTest, DecodesLikeGo) {
  const QueryParams q = ParseQuery("command=sh&command=-c&command=echo+a%20b%26c&input=1&&flag&bad=%zz");
  EXPECT_EQ(QueryValues(q, "command"), (std::vector<std::string>{"sh", "-c", "echo a b&c"}));
  EXPECT_EQ(QueryValue(q, "input"), "1");
  EXPECT_EQ(QueryValue(q, "flag"), "");
  EXPECT_EQ(QueryValue(q, "bad"), "%zz");
  EXPECT_FALSE(QueryValue(q, "missing").has_value());
}

TEST(ExecOptionsTest, ParsesTheApiServersParameters) {
  auto options = ParseExecOptions(ParseQuery("command=ls&command=-l&input=1&output=1&error=1"));
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->command, (std::vector<std::string>{"ls", "-l"}));
  EXPECT_TRUE(options->want_stdin && options->want_stdout && options->want_stderr);
  EXPECT_FALSE(options->tty);

  // The kubelet drops stderr for a tty, and accepts stdin=true style names too.
  options = ParseExecOptions(ParseQuery("command=sh&stdin=true&stdout=true&stderr=true&tty=1"));
  ASSERT_TRUE(options.ok());
  EXPECT_TRUE(options->tty);
  EXPECT_FALSE(options->want_stderr);

  EXPECT_FALSE(ParseExecOptions(ParseQuery("command=ls")).ok());         // no stream
  EXPECT_FALSE(ParseExecOptions(ParseQuery("output=1")).ok());           // no command
  EXPECT_FALSE(ParseExecOptions(ParseQuery("command=&output=1")).ok());  // empty command
}

TEST(NegotiateProtocolTest, PicksTheClientsFirstSupportedOffer) {
  const auto& ours = RemoteCommandProtocols();
  EXPECT_EQ(NegotiateProtocol({"v5.channel.k8s.io", "v4.channel.k8s.io"}, ours), "v5.channel.k8s.io");
  EXPECT_EQ(NegotiateProtocol({"v4.channel.k8s.io", "v5.channel.k8s.io"}, ours), "v4.channel.k8s.io");
  EXPECT_EQ(NegotiateProtocol({"v9.channel.k8s.io, v3.channel.k8s.io"}, ours), "v3.channel.k8s.io");
  EXPECT_EQ(NegotiateProtocol({"channel.k8s.io"}, ours), "");
  EXPECT_EQ(NegotiateProtocol({}, ours), "");
}

}  // namespace
}  // namespace mf::local
