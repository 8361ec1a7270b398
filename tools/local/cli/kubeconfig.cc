#include "tools/local/cli/kubeconfig.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

namespace mf::local {

std::string KubeconfigYaml(const std::string& server_url) {
  return "apiVersion: v1\n"
         "kind: Config\n"
         "clusters:\n"
         "- name: modelfleet-local\n"
         "  cluster:\n"
         "    server: " + server_url + "\n"
         "users:\n"
         "- name: modelfleet-local\n"
         "  user: {}\n"
         "contexts:\n"
         "- name: modelfleet-local\n"
         "  context:\n"
         "    cluster: modelfleet-local\n"
         "    user: modelfleet-local\n"
         "    namespace: default\n"
         "current-context: modelfleet-local\n"
         "preferences: {}\n";
}

Status WriteKubeconfig(const std::filesystem::path& path, const std::string& server_url) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return Internal("cannot create " + path.parent_path().string() + ": " + ec.message());
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << KubeconfigYaml(server_url);
    if (!out.good()) return Internal("cannot write " + tmp.string());
  }
  ::chmod(tmp.c_str(), 0600);
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace mf::local
