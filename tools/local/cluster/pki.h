// The cluster's TLS material, kept in DATA_DIR/pki/ and made once (a certificate is issued
// again only when it is missing, no longer chains to the CA, or has under 30 days left):
//   ca.crt, ca.key                    the cluster CA: kube-apiserver's --client-ca-file and what
//                                     every kubeconfig trusts; kept across restarts
//   apiserver.crt/.key                serving: localhost, 127.0.0.1, the node IP, the
//                                     `kubernetes` Service's IP and DNS names
//   kubelet.crt/.key                  the node agent's serving certificate (kubelet API)
//   admin, kube-controller-manager,   client certificates: user = CN, groups = O
//   kube-scheduler, node,
//   apiserver-kubelet-client (.crt/.key)
//   sa.key, sa.pub                    sign and verify ServiceAccount tokens
// Keys are written owner-only (0600).
#pragma once

#include <filesystem>
#include <string>

#include "common/status.h"

namespace mf::local {

struct ClusterPki {
  std::filesystem::path dir;
  std::string ca_pem;
  std::filesystem::path Certificate(const std::string& name) const { return dir / (name + ".crt"); }
  std::filesystem::path Key(const std::string& name) const { return dir / (name + ".key"); }
  std::filesystem::path ServiceAccountKey() const { return dir / "sa.key"; }
  std::filesystem::path ServiceAccountPublicKey() const { return dir / "sa.pub"; }
};

StatusOr<ClusterPki> EnsureClusterPki(const std::filesystem::path& dir, const std::string& node_name);

// A file's whole contents.
StatusOr<std::string> ReadTextFile(const std::filesystem::path& path);

}  // namespace mf::local
