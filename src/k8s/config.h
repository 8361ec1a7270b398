// Where the API server is and how to authenticate to it: from inside a pod (service account) or
// from a kubeconfig file (KUBECONFIG, ~/.kube/config) when running outside a cluster.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/status.h"

namespace mf::k8s {

// Supplies the bearer token for each request. A projected service-account token is rotated by
// the kubelet (hourly by default), so the file source re-reads the file when it changes.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual StatusOr<std::string> Token() = 0;
};

class StaticTokenSource : public TokenSource {
 public:
  explicit StaticTokenSource(std::string token) : token_(std::move(token)) {}
  StatusOr<std::string> Token() override { return token_; }

 private:
  const std::string token_;
};

class FileTokenSource : public TokenSource {
 public:
  explicit FileTokenSource(std::filesystem::path path) : path_(std::move(path)) {}
  // Re-reads the file when its modification time or size changed since the last read (the
  // kubelet replaces it atomically through a symlink swap), otherwise returns the cached token.
  StatusOr<std::string> Token() override;

 private:
  const std::filesystem::path path_;
  std::mutex mu_;
  std::string token_;
  std::optional<std::filesystem::file_time_type> mtime_;
  std::uintmax_t size_ = 0;
};

struct ClusterConfig {
  std::string server;  // "https://10.0.0.1:443"
  // TLS trust: a PEM file or PEM bytes (from certificate-authority-data); neither means the
  // system roots. insecure_skip_tls_verify turns verification off (kubeconfig opt-in only).
  std::string ca_file;
  std::string ca_pem;
  bool insecure_skip_tls_verify = false;
  // Client certificate authentication, as files or PEM bytes.
  std::string client_cert_file;
  std::string client_key_file;
  std::string client_cert_pem;
  std::string client_key_pem;
  std::shared_ptr<TokenSource> token;  // null: no bearer token
  std::string ns = "default";          // namespace to use when the caller names none
};

// Where the pod's ServiceAccount volume is: MODELFLEET_SERVICE_ACCOUNT_DIR when set, else the
// standard mount point /var/run/secrets/kubernetes.io/serviceaccount. A kubelet without mount
// namespaces (modelfleet-local's node agent) cannot put the volume at the standard path, so it
// names the volume's host directory in that variable instead.
std::filesystem::path DefaultServiceAccountDir();

// Overridable locations, so tests can point at a temporary directory.
struct InClusterPaths {
  std::filesystem::path service_account_dir = DefaultServiceAccountDir();
};

// Builds the in-cluster config from KUBERNETES_SERVICE_HOST/PORT and the service account's
// token, ca.crt and namespace files. FailedPrecondition when not running in a pod.
StatusOr<ClusterConfig> LoadInClusterConfig(const InClusterPaths& paths = {});

// Parses kubeconfig YAML (one file's text). `dir` resolves relative file references, as kubectl
// does; `context` overrides current-context when non-empty.
StatusOr<ClusterConfig> ParseKubeconfig(const std::string& yaml_text, const std::filesystem::path& dir,
                                        const std::string& context = "");

// Loads a kubeconfig from the files in KUBECONFIG (':'-separated; the first file that defines a
// name wins, as kubectl merges them) or ~/.kube/config.
StatusOr<ClusterConfig> LoadKubeconfig(const std::string& context = "");

// In-cluster when KUBERNETES_SERVICE_HOST is set and KUBECONFIG is not; otherwise kubeconfig.
StatusOr<ClusterConfig> LoadDefaultConfig();

// RFC 4648 base64 (whitespace ignored), for the kubeconfig *-data fields.
StatusOr<std::string> DecodeBase64(std::string_view text);

}  // namespace mf::k8s
