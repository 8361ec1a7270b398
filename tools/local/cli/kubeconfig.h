// The kubeconfig `modelfleet-local up` writes so kubectl and client libraries find the cluster.
#pragma once

#include <filesystem>
#include <string>

#include "common/status.h"

namespace mf::local {

// A kubeconfig with one cluster/user/context named "modelfleet-local" for `server_url`
// (https://HOST:PORT, or http:// with `up --tls=false`); a non-empty `ca_pem` becomes the
// cluster's certificate-authority-data, and the user then carries a token (unchecked) so that
// kubectl does not prompt for a password.
std::string KubeconfigYaml(const std::string& server_url, const std::string& ca_pem = "");
// Writes atomically (temp file + rename) with mode 0600, creating the parent directory.
Status WriteKubeconfig(const std::filesystem::path& path, const std::string& server_url,
                       const std::string& ca_pem = "");

}  // namespace mf::local
