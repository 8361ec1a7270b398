#include "k8s/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <thread>

namespace mf::k8s {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "k8s-config-test-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }
  void Write(const std::string& name, const std::string& text) const { std::ofstream(path_ / name) << text; }

 private:
  fs::path path_;
};

// Sets (or unsets, with nullptr) an environment variable for the test's lifetime.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(InClusterConfigTest, ReadsServiceAccountAndEnvironment) {
  TempDir dir;
  dir.Write("token", "token-one\n");
  dir.Write("ca.crt", "-----BEGIN CERTIFICATE-----\n");
  dir.Write("namespace", "ml");
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  auto config = LoadInClusterConfig({dir.path()});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->ns, "ml");
  EXPECT_EQ(config->ca_file, (dir.path() / "ca.crt").string());
  ASSERT_TRUE(config->token);
  EXPECT_EQ(*config->token->Token(), "token-one");
}

TEST(InClusterConfigTest, BracketsIpv6Host) {
  TempDir dir;
  dir.Write("token", "t");
  dir.Write("ca.crt", "x");
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "fd00::1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "6443");
  auto config = LoadInClusterConfig({dir.path()});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://[fd00::1]:6443");
  EXPECT_EQ(config->ns, "default");
}

TEST(InClusterConfigTest, ServiceAccountDirFromTheEnvironment) {
  {
    ScopedEnv unset("MODELFLEET_SERVICE_ACCOUNT_DIR", nullptr);
    EXPECT_EQ(InClusterPaths{}.service_account_dir, "/var/run/secrets/kubernetes.io/serviceaccount");
  }
  // As modelfleet-local's node agent runs pods: no mount namespace, the volume's host directory.
  TempDir dir;
  dir.Write("token", "local-token");
  dir.Write("ca.crt", "x");
  dir.Write("namespace", "modelfleet-system");
  ScopedEnv sa_dir("MODELFLEET_SERVICE_ACCOUNT_DIR", dir.path().c_str());
  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.96.0.1");
  ScopedEnv port("KUBERNETES_SERVICE_PORT", "443");
  auto config = LoadInClusterConfig();
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->ns, "modelfleet-system");
  EXPECT_EQ(config->ca_file, (dir.path() / "ca.crt").string());
  EXPECT_EQ(*config->token->Token(), "local-token");
}

TEST(InClusterConfigTest, OutsideAPodIsAClearError) {
  ScopedEnv host("KUBERNETES_SERVICE_HOST", nullptr);
  auto config = LoadInClusterConfig();
  EXPECT_EQ(config.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(config.status().message().find("KUBERNETES_SERVICE_HOST"), std::string::npos);
}

TEST(FileTokenSourceTest, PicksUpRotatedToken) {
  TempDir dir;
  dir.Write("token", "first");
  FileTokenSource source(dir.path() / "token");
  EXPECT_EQ(*source.Token(), "first");
  // The kubelet swaps in a new file; a different size alone must be enough to notice.
  dir.Write("token", "second-token");
  EXPECT_EQ(*source.Token(), "second-token");
  // Same size, newer mtime.
  dir.Write("token", "third-token!");
  fs::last_write_time(dir.path() / "token", fs::file_time_type::clock::now() + std::chrono::seconds(5));
  EXPECT_EQ(*source.Token(), "third-token!");
  // Mid-rotation the file may be missing: the last token keeps working.
  fs::remove(dir.path() / "token");
  EXPECT_EQ(*source.Token(), "third-token!");
}

TEST(FileTokenSourceTest, MissingOrEmptyTokenIsUnauthenticated) {
  TempDir dir;
  EXPECT_EQ(FileTokenSource(dir.path() / "absent").Token().status().code(), StatusCode::kUnauthenticated);
  dir.Write("empty", "\n");
  EXPECT_EQ(FileTokenSource(dir.path() / "empty").Token().status().code(), StatusCode::kUnauthenticated);
}

constexpr char kKubeconfig[] = R"(
apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://127.0.0.1:6443
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
- name: prod-cluster
  cluster:
    server: https://prod.example.com
    certificate-authority: certs/ca.pem
    insecure-skip-tls-verify: true
users:
- name: dev-user
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
- name: prod-user
  user:
    token: prod-token
contexts:
- name: dev
  context: {cluster: dev-cluster, user: dev-user, namespace: ml}
- name: prod
  context: {cluster: prod-cluster, user: prod-user}
)";

TEST(KubeconfigTest, CurrentContextWithInlineCertificates) {
  auto config = ParseKubeconfig(kKubeconfig, "/home/me/.kube");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://127.0.0.1:6443");
  EXPECT_EQ(config->ca_pem, "-----BEGIN CERTIFICATE-----");
  EXPECT_EQ(config->client_cert_pem, "cert");
  EXPECT_EQ(config->client_key_pem, "key");
  EXPECT_EQ(config->ns, "ml");
  EXPECT_FALSE(config->insecure_skip_tls_verify);
  EXPECT_FALSE(config->token);
}

TEST(KubeconfigTest, ExplicitContextWithTokenAndRelativeFiles) {
  auto config = ParseKubeconfig(kKubeconfig, "/home/me/.kube", "prod");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://prod.example.com");
  EXPECT_EQ(config->ca_file, "/home/me/.kube/certs/ca.pem");
  EXPECT_TRUE(config->insecure_skip_tls_verify);
  ASSERT_TRUE(config->token);
  EXPECT_EQ(*config->token->Token(), "prod-token");
  EXPECT_EQ(config->ns, "default");
}

TEST(KubeconfigTest, BadInputIsAClearError) {
  struct Case {
    std::string yaml, context, expect;
  };
  const Case cases[] = {
      {"clusters: [unterminated", "", "not valid YAML"},
      {"- a\n- b\n", "", "must be a YAML mapping"},
      {kKubeconfig, "staging", "no context named 'staging'"},
      {"contexts: [{name: c, context: {cluster: nope}}]\ncurrent-context: c\n", "", "unknown cluster 'nope'"},
      {"clusters: [{name: k, cluster: {server: https://x, certificate-authority-data: '!!!'}}]\n"
       "contexts: [{name: c, context: {cluster: k}}]\ncurrent-context: c\n",
       "", "invalid base64"},
      {"clusters: [{name: k, cluster: {server: ftp://x}}]\ncontexts: [{name: c, context: {cluster: k}}]\n"
       "current-context: c\n",
       "", "must start with https://"},
      {"clusters: [{name: k, cluster: {server: https://x}}]\nusers: [{name: u, user: {client-certificate: c.pem}}]\n"
       "contexts: [{name: c, context: {cluster: k, user: u}}]\ncurrent-context: c\n",
       "", "both a client certificate and a client key"},
      {"clusters: {name: k}\n", "", "'clusters' must be a list"},
      {"clusters: [{cluster: {server: https://x}}]\n", "", "needs a name"},
      {"apiVersion: v1\n", "", "no current-context"},
  };
  for (const Case& c : cases) {
    auto config = ParseKubeconfig(c.yaml, "/tmp", c.context);
    ASSERT_FALSE(config.ok()) << c.yaml;
    EXPECT_NE(config.status().message().find(c.expect), std::string::npos)
        << "got: " << config.status().message() << "\nwant: " << c.expect;
  }
}

TEST(KubeconfigTest, KubeconfigEnvMergesFilesFirstDefinitionWins) {
  TempDir dir;
  dir.Write("a.yaml",
            "current-context: one\nclusters: [{name: k, cluster: {server: 'https://first:1'}}]\n"
            "contexts: [{name: one, context: {cluster: k, user: u, namespace: from-a}}]\n");
  dir.Write("b.yaml",
            "current-context: two\nclusters: [{name: k, cluster: {server: 'https://second:2'}}]\n"
            "users: [{name: u, user: {tokenFile: tok}}]\n");
  dir.Write("tok", "file-token\n");
  const std::string list = (dir.path() / "a.yaml").string() + ":" + (dir.path() / "missing.yaml").string() + ":" +
                           (dir.path() / "b.yaml").string();
  ScopedEnv env("KUBECONFIG", list.c_str());
  auto config = LoadKubeconfig();
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://first:1");
  EXPECT_EQ(config->ns, "from-a");
  ASSERT_TRUE(config->token);
  EXPECT_EQ(*config->token->Token(), "file-token");  // tokenFile resolved against b.yaml's directory

  ScopedEnv host("KUBERNETES_SERVICE_HOST", "10.0.0.1");
  auto chosen = LoadDefaultConfig();  // KUBECONFIG set: kubeconfig wins even inside a pod
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->server, "https://first:1");
}

TEST(KubeconfigTest, NoKubeconfigAnywhere) {
  TempDir dir;
  ScopedEnv env("KUBECONFIG", (dir.path() / "nothing").c_str());
  EXPECT_EQ(LoadKubeconfig().status().code(), StatusCode::kNotFound);
}

TEST(Base64Test, DecodesAndRejects) {
  EXPECT_EQ(*DecodeBase64("aGVsbG8gd29ybGQ="), "hello world");
  EXPECT_EQ(*DecodeBase64("aGVs\nbG8="), "hello");
  EXPECT_EQ(*DecodeBase64(""), "");
  EXPECT_FALSE(DecodeBase64("aGVsbG8=x").ok());
  EXPECT_FALSE(DecodeBase64("a").ok());
  EXPECT_FALSE(DecodeBase64("a$==").ok());
}

}  // namespace
}  // namespace mf::k8s
