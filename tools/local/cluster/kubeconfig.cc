#include "tools/local/cluster/kubeconfig.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>

namespace mf::local {

namespace {

std::string Base64(const std::string& in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace

std::string KubeconfigYaml(const std::string& server_url, const std::string& ca_pem, const KubeconfigUser& user) {
  std::string credentials;
  if (!user.client_certificate_pem.empty()) {
    credentials = "    client-certificate-data: " + Base64(user.client_certificate_pem) + "\n" +
                  "    client-key-data: " + Base64(user.client_key_pem) + "\n";
  }
  if (!user.token.empty()) credentials += "    token: " + user.token + "\n";
  return "apiVersion: v1\n"
         "kind: Config\n"
         "clusters:\n"
         "- name: modelfleet-local\n"
         "  cluster:\n"
         "    server: " +
         server_url + "\n" + "    certificate-authority-data: " + Base64(ca_pem) + "\n" +
         "users:\n"
         "- name: " +
         user.name + "\n" + (credentials.empty() ? "  user: {}\n" : "  user:\n" + credentials) +
         "contexts:\n"
         "- name: modelfleet-local\n"
         "  context:\n"
         "    cluster: modelfleet-local\n"
         "    user: " +
         user.name + "\n" + "    namespace: " + user.ns + "\n" +
         "current-context: modelfleet-local\n"
         "preferences: {}\n";
}

Status WriteKubeconfig(const std::filesystem::path& path, const std::string& server_url, const std::string& ca_pem,
                       const KubeconfigUser& user) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  if (ec) return Internal("cannot create " + path.parent_path().string() + ": " + ec.message());
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << KubeconfigYaml(server_url, ca_pem, user);
    if (!out.good()) return Internal("cannot write " + tmp.string());
  }
  ::chmod(tmp.c_str(), 0600);
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  return Status::Ok();
}

}  // namespace mf::local
