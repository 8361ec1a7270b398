// Self-signed certificate authorities and serving certificates made with OpenSSL, for servers
// that bring their own TLS (modelfleet-local writes a CA and an API server certificate into its
// data directory at `up`) and for tests. Keys are ECDSA P-256; certificates are X.509 v3 signed
// with SHA-256. PEM text in, PEM text out: nothing here touches files.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace mf::http {

struct PemCertificate {
  std::string certificate_pem;
  std::string private_key_pem;
};

// A new ECDSA P-256 private key as PKCS#8 PEM (kube-apiserver signs ServiceAccount tokens with one).
StatusOr<std::string> CreatePrivateKeyPem();
// The public half of a private key, as SubjectPublicKeyInfo PEM ("PUBLIC KEY").
StatusOr<std::string> PublicKeyPem(const std::string& private_key_pem);

// A CA (basicConstraints CA:TRUE, keyCertSign) valid from now for `validity`.
StatusOr<PemCertificate> CreateCertificateAuthority(const std::string& common_name, std::chrono::hours validity);

struct ServingCertificateRequest {
  std::string common_name;
  std::vector<std::string> dns_names;     // subjectAltName DNS entries
  std::vector<std::string> ip_addresses;  // subjectAltName IP entries (IPv4 or IPv6 text)
  std::chrono::hours validity{24 * 365};
};

// A serverAuth certificate for the names in `request`, signed by `ca`. INVALID_ARGUMENT for an
// unusable CA or a malformed IP address.
StatusOr<PemCertificate> IssueServingCertificate(const PemCertificate& ca, const ServingCertificateRequest& request);

struct ClientCertificateRequest {
  std::string common_name;                 // the user name Kubernetes sees
  std::vector<std::string> organizations;  // its groups (O=system:masters, O=system:nodes, ...)
  std::chrono::hours validity{24 * 365};
};

// A clientAuth certificate for the user and groups in `request`, signed by `ca`: how Kubernetes
// components and administrators authenticate to kube-apiserver with --client-ca-file.
StatusOr<PemCertificate> IssueClientCertificate(const PemCertificate& ca, const ClientCertificateRequest& request);

// OK when `certificate_pem` chains to `ca_certificate_pem`, names `host` (a DNS name or an IP
// address) and stays valid for at least `remaining`; otherwise a status that says why not.
Status CheckServingCertificate(const std::string& certificate_pem, const std::string& ca_certificate_pem,
                               const std::string& host, std::chrono::hours remaining);

// OK when `certificate_pem` chains to `ca_certificate_pem` as a client certificate and stays valid
// for at least `remaining`.
Status CheckClientCertificate(const std::string& certificate_pem, const std::string& ca_certificate_pem,
                              std::chrono::hours remaining);

}  // namespace mf::http
