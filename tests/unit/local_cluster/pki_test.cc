// The cluster's TLS material: made once, kept across restarts, and each certificate carrying
// the identity the API server's authenticators read (CN = user, O = groups).
#include "tools/local/cluster/pki.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "http/certificates.h"

namespace mf::local {
namespace {

TEST(ClusterPkiTest, IssuesEveryCertificateOnceAndKeepsThem) {
  auto dir = std::filesystem::temp_directory_path() / ("mf-pki-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  auto first = EnsureClusterPki(dir, "local");
  ASSERT_TRUE(first.ok()) << first.status().message();
  for (const char* name : {"apiserver", "kubelet", "admin", "kube-controller-manager", "kube-scheduler", "node",
                           "apiserver-kubelet-client"}) {
    EXPECT_TRUE(std::filesystem::exists(first->Certificate(name))) << name;
    EXPECT_EQ(std::filesystem::status(first->Key(name)).permissions() & std::filesystem::perms::others_read,
              std::filesystem::perms::none)
        << name;
  }
  auto api = ReadTextFile(first->Certificate("apiserver"));
  ASSERT_TRUE(api.ok());
  for (const char* host : {"127.0.0.1", "10.244.0.1", "10.96.0.1", "kubernetes.default.svc"}) {
    EXPECT_TRUE(http::CheckServingCertificate(*api, first->ca_pem, host, std::chrono::hours(1)).ok()) << host;
  }
  auto node = ReadTextFile(first->Certificate("node"));
  ASSERT_TRUE(node.ok());
  EXPECT_TRUE(http::CheckClientCertificate(*node, first->ca_pem, std::chrono::hours(1)).ok());
  EXPECT_FALSE(http::CheckClientCertificate(*api, first->ca_pem, std::chrono::hours(1)).ok());  // serving only

  auto second = EnsureClusterPki(dir, "local");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->ca_pem, first->ca_pem);
  EXPECT_EQ(*ReadTextFile(second->Certificate("node")), *node);  // still valid: not reissued

  std::filesystem::remove(dir / "ca.key");
  EXPECT_EQ(EnsureClusterPki(dir, "local").status().code(), StatusCode::kFailedPrecondition);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mf::local
