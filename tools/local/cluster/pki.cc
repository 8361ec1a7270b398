#include "tools/local/cluster/pki.h"

#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/logging.h"
#include "http/certificates.h"
#include "tools/local/cluster/network.h"

namespace mf::local {
namespace {

namespace fs = std::filesystem;

constexpr auto kCaValidity = std::chrono::hours(24 * 365 * 10);
constexpr auto kValidity = std::chrono::hours(24 * 365);
constexpr auto kRenewBefore = std::chrono::hours(24 * 30);

Status WriteFile(const fs::path& path, const std::string& text, mode_t mode) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.good()) return Internal("cannot write " + tmp.string());
  }
  ::chmod(tmp.c_str(), mode);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename " + tmp.string() + ": " + ec.message());
  return Status::Ok();
}

struct Issued {
  std::string name;
  bool serving;
  http::ServingCertificateRequest serving_request;
  http::ClientCertificateRequest client_request;
};

std::vector<Issued> Certificates(const std::string& node) {
  auto client = [](std::string name, std::string user, std::vector<std::string> groups) {
    return Issued{std::move(name),
                  false,
                  {},
                  {.common_name = std::move(user), .organizations = std::move(groups), .validity = kValidity}};
  };
  auto serving = [](std::string name, http::ServingCertificateRequest request) {
    return Issued{std::move(name), true, std::move(request), {}};
  };
  return {
      serving("apiserver", {.common_name = "kube-apiserver",
                            .dns_names = {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                          "kubernetes.default.svc.cluster.local"},
                            .ip_addresses = {"127.0.0.1", "::1", kNodeIp, "10.96.0.1"},
                            .validity = kValidity}),
      serving("kubelet", {.common_name = "system:node:" + node,
                          .dns_names = {node, "localhost"},
                          .ip_addresses = {kNodeIp, "127.0.0.1"},
                          .validity = kValidity}),
      client("admin", "modelfleet-admin", {"system:masters"}),
      client("kube-controller-manager", "system:kube-controller-manager", {}),
      client("kube-scheduler", "system:kube-scheduler", {}),
      client("node", "system:node:" + node, {"system:nodes"}),
      client("apiserver-kubelet-client", "kube-apiserver-kubelet-client", {"system:masters"}),
  };
}

Status EnsureCertificate(const ClusterPki& pki, const http::PemCertificate& ca, const Issued& spec) {
  auto cert = ReadTextFile(pki.Certificate(spec.name));
  if (cert.ok() && fs::exists(pki.Key(spec.name))) {
    Status usable = Status::Ok();
    if (spec.serving) {
      for (const auto& host : spec.serving_request.ip_addresses) {
        usable = http::CheckServingCertificate(*cert, ca.certificate_pem, host, kRenewBefore);
        if (!usable.ok()) break;
      }
    } else {
      usable = http::CheckClientCertificate(*cert, ca.certificate_pem, kRenewBefore);
    }
    if (usable.ok()) return Status::Ok();
    log::Info("issuing a new certificate", {{"name", spec.name}, {"reason", usable.message()}});
  }
  auto issued = spec.serving ? http::IssueServingCertificate(ca, spec.serving_request)
                             : http::IssueClientCertificate(ca, spec.client_request);
  if (!issued.ok()) return issued.status().WithContext("issuing " + spec.name + ".crt");
  MF_RETURN_IF_ERROR(WriteFile(pki.Key(spec.name), issued->private_key_pem, 0600));
  return WriteFile(pki.Certificate(spec.name), issued->certificate_pem, 0644);
}

}  // namespace

StatusOr<std::string> ReadTextFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path.string());
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

StatusOr<ClusterPki> EnsureClusterPki(const fs::path& dir, const std::string& node_name) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir.string() + ": " + ec.message());
  ClusterPki pki{.dir = dir, .ca_pem = ""};
  const fs::path ca_crt = dir / "ca.crt", ca_key = dir / "ca.key";
  http::PemCertificate ca;
  auto ca_cert_text = ReadTextFile(ca_crt);
  auto ca_key_text = ReadTextFile(ca_key);
  if (ca_cert_text.ok() && ca_key_text.ok()) {
    ca = {*ca_cert_text, *ca_key_text};
  } else if (fs::exists(ca_crt) || fs::exists(ca_key)) {
    // Half a CA: making a new one would silently invalidate every kubeconfig handed out.
    return FailedPrecondition(dir.string() + " holds only one of ca.crt and ca.key; restore it or remove both");
  } else {
    MF_ASSIGN_OR_RETURN(ca, http::CreateCertificateAuthority("modelfleet-local-ca", kCaValidity));
    MF_RETURN_IF_ERROR(WriteFile(ca_key, ca.private_key_pem, 0600));
    MF_RETURN_IF_ERROR(WriteFile(ca_crt, ca.certificate_pem, 0644));
    log::Info("created the cluster CA", {{"path", ca_crt.string()}});
  }
  pki.ca_pem = ca.certificate_pem;
  for (const Issued& spec : Certificates(node_name)) MF_RETURN_IF_ERROR(EnsureCertificate(pki, ca, spec));
  if (!fs::exists(pki.ServiceAccountKey())) {
    MF_ASSIGN_OR_RETURN(std::string key, http::CreatePrivateKeyPem());
    MF_RETURN_IF_ERROR(WriteFile(pki.ServiceAccountKey(), key, 0600));
  }
  if (!fs::exists(pki.ServiceAccountPublicKey())) {
    MF_ASSIGN_OR_RETURN(std::string key, ReadTextFile(pki.ServiceAccountKey()));
    MF_ASSIGN_OR_RETURN(std::string public_key, http::PublicKeyPem(key));
    MF_RETURN_IF_ERROR(WriteFile(pki.ServiceAccountPublicKey(), public_key, 0644));
  }
  return pki;
}

}  // namespace mf::local
