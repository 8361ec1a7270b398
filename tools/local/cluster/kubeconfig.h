// Kubeconfigs for the local cluster: the admin's (kubectl, helm, tests), each control-plane
// component's and the node agent's (client certificates), and a ServiceAccount's (a bearer
// token), so a program can run against the cluster exactly as it would inside it.
#pragma once

#include <filesystem>
#include <string>

#include "common/status.h"

namespace mf::local {

struct KubeconfigUser {
  std::string name = "modelfleet-local";
  std::string client_certificate_pem;  // with client_key_pem: certificate authentication
  std::string client_key_pem;
  std::string token;           // or a bearer token
  std::string ns = "default";  // the context's namespace
};

// One cluster/user/context, trusting `ca_pem` (certificate-authority-data) for `server_url`.
std::string KubeconfigYaml(const std::string& server_url, const std::string& ca_pem, const KubeconfigUser& user);
// Writes atomically (temp file + rename) with mode 0600, creating the parent directory.
Status WriteKubeconfig(const std::filesystem::path& path, const std::string& server_url, const std::string& ca_pem,
                       const KubeconfigUser& user);

}  // namespace mf::local
