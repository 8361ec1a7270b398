// The kubeconfig `modelfleet-local up` writes so kubectl and client libraries find the cluster.
#pragma once

#include <filesystem>
#include <string>

#include "common/status.h"

namespace mf::local {

// A kubeconfig with one cluster/user/context named "modelfleet-local", server http://HOST:PORT.
std::string KubeconfigYaml(const std::string& server_url);
// Writes atomically (temp file + rename) with mode 0600, creating the parent directory.
Status WriteKubeconfig(const std::filesystem::path& path, const std::string& server_url);

}  // namespace mf::local
