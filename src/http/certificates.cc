#include "http/certificates.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <ctime>
#include <functional>
#include <memory>
#include <utility>

namespace mf::http {
namespace {

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Store = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;
using StoreContext = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;
using Extension = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION, X509_EXTENSION_free>>;

// The reason OpenSSL queued for the last failure (and clears the queue).
std::string OpenSslError() {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!text.empty()) text += "; ";
    text += buf;
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

Status Failed(const std::string& what) { return Internal(what + ": " + OpenSslError()); }

StatusOr<Key> NewKey() {
  Key key(EVP_EC_gen("P-256"));
  if (!key) return Failed("cannot generate an ECDSA P-256 key");
  return key;
}

StatusOr<std::string> Pem(const std::function<int(BIO*)>& write) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) return Failed("cannot write PEM");
  char* data = nullptr;
  long size = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(size));
}

StatusOr<Cert> ReadCertificate(const std::string& pem, const std::string& what) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Cert cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) {
    ERR_clear_error();
    return InvalidArgument(what + " is not a PEM certificate");
  }
  return cert;
}

StatusOr<Key> ReadKey(const std::string& pem, const std::string& what) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  Key key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) {
    ERR_clear_error();
    return InvalidArgument(what + " is not a PEM private key");
  }
  return key;
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  Extension ext(X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str()));
  if (!ext) return InvalidArgument("invalid certificate extension '" + value + "': " + OpenSslError());
  if (X509_add_ext(cert, ext.get(), -1) != 1) return Failed("cannot add a certificate extension");
  return Status::Ok();
}

// A certificate for `key` named `common_name`, valid from now for `validity`, with a random
// 159-bit serial; the issuer and signature are filled in by Sign().
StatusOr<Cert> NewCertificate(EVP_PKEY* key, const std::string& common_name, std::chrono::hours validity,
                              const std::vector<std::string>& organizations = {}) {
  Cert cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return Failed("cannot create a certificate");
  std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>> serial(BN_new());
  if (!serial || BN_rand(serial.get(), 159, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()))) {
    return Failed("cannot choose a certificate serial number");
  }
  // Backdated a little so a peer whose clock is slightly behind accepts it at once.
  if (!X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300) ||
      !X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(validity.count()) * 3600)) {
    return Failed("cannot set the certificate validity");
  }
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& organization : organizations) {
    if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                                   reinterpret_cast<const unsigned char*>(organization.c_str()), -1, -1, 0) != 1) {
      return Failed("cannot set the certificate organization");
    }
  }
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(common_name.c_str()),
                                 -1, -1, 0) != 1 ||
      X509_set_pubkey(cert.get(), key) != 1) {
    return Failed("cannot set the certificate subject");
  }
  return cert;
}

StatusOr<PemCertificate> Encode(X509* cert, EVP_PKEY* key) {
  PemCertificate out;
  MF_ASSIGN_OR_RETURN(out.certificate_pem, Pem([&](BIO* b) { return PEM_write_bio_X509(b, cert); }));
  MF_ASSIGN_OR_RETURN(out.private_key_pem, Pem([&](BIO* b) {
                        return PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr);
                      }));
  return out;
}

bool IsIpAddress(const std::string& host) {
  std::unique_ptr<ASN1_OCTET_STRING, Deleter<ASN1_OCTET_STRING, ASN1_OCTET_STRING_free>> ip(
      a2i_IPADDRESS(host.c_str()));
  ERR_clear_error();
  return ip != nullptr;
}

// The CA's certificate and key, checked to belong together.
StatusOr<std::pair<Cert, Key>> ReadCa(const PemCertificate& ca) {
  MF_ASSIGN_OR_RETURN(Cert ca_cert, ReadCertificate(ca.certificate_pem, "the CA certificate"));
  MF_ASSIGN_OR_RETURN(Key ca_key, ReadKey(ca.private_key_pem, "the CA key"));
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1) {
    ERR_clear_error();
    return InvalidArgument("the CA key does not belong to the CA certificate");
  }
  return std::make_pair(std::move(ca_cert), std::move(ca_key));
}

}  // namespace

StatusOr<std::string> CreatePrivateKeyPem() {
  MF_ASSIGN_OR_RETURN(Key key, NewKey());
  return Pem([&](BIO* b) { return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
}

StatusOr<std::string> PublicKeyPem(const std::string& private_key_pem) {
  MF_ASSIGN_OR_RETURN(Key key, ReadKey(private_key_pem, "the private key"));
  return Pem([&](BIO* b) { return PEM_write_bio_PUBKEY(b, key.get()); });
}

StatusOr<PemCertificate> CreateCertificateAuthority(const std::string& common_name, std::chrono::hours validity) {
  MF_ASSIGN_OR_RETURN(Key key, NewKey());
  MF_ASSIGN_OR_RETURN(Cert cert, NewCertificate(key.get(), common_name, validity));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get())) != 1) return Failed("cannot set the issuer");
  MF_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE"));
  MF_RETURN_IF_ERROR(
      AddExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"));
  MF_RETURN_IF_ERROR(AddExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return Failed("cannot sign the CA certificate");
  return Encode(cert.get(), key.get());
}

StatusOr<PemCertificate> IssueServingCertificate(const PemCertificate& ca, const ServingCertificateRequest& request) {
  MF_ASSIGN_OR_RETURN(auto signer, ReadCa(ca));
  auto& [ca_cert, ca_key] = signer;
  std::string alt_names;
  for (const auto& dns : request.dns_names) {
    if (dns.empty() || dns.find_first_of(",:\n") != std::string::npos) {
      return InvalidArgument("'" + dns + "' is not a DNS name");
    }
    alt_names += (alt_names.empty() ? "" : ",") + ("DNS:" + dns);
  }
  for (const auto& ip : request.ip_addresses) {
    if (!IsIpAddress(ip)) return InvalidArgument("'" + ip + "' is not an IP address");
    alt_names += (alt_names.empty() ? "" : ",") + ("IP:" + ip);
  }
  if (alt_names.empty()) return InvalidArgument("a serving certificate needs at least one DNS name or IP address");
  MF_ASSIGN_OR_RETURN(Key key, NewKey());
  MF_ASSIGN_OR_RETURN(Cert cert, NewCertificate(key.get(), request.common_name, request.validity));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get())) != 1)
    return Failed("cannot set the issuer");
  MF_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  MF_RETURN_IF_ERROR(
      AddExtension(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment"));
  MF_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_ext_key_usage, "serverAuth"));
  MF_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always"));
  MF_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_subject_alt_name, alt_names));
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) return Failed("cannot sign the serving certificate");
  return Encode(cert.get(), key.get());
}

namespace {

// Verifies the chain to the CA for `purpose`, as of `remaining` from now (a certificate about to
// expire counts as expired).
Status VerifyChain(X509* cert, const std::string& ca_certificate_pem, int purpose, std::chrono::hours remaining) {
  MF_ASSIGN_OR_RETURN(Cert ca, ReadCertificate(ca_certificate_pem, "the CA certificate"));
  Store store(X509_STORE_new());
  StoreContext ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca.get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert, nullptr) != 1) {
    return Failed("cannot set up certificate verification");
  }
  X509_VERIFY_PARAM* param = X509_STORE_CTX_get0_param(ctx.get());
  X509_VERIFY_PARAM_set_time(param, time(nullptr) + static_cast<time_t>(remaining.count()) * 3600);
  X509_VERIFY_PARAM_set_purpose(param, purpose);
  if (X509_verify_cert(ctx.get()) != 1) {
    std::string why = X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx.get()));
    ERR_clear_error();
    return FailedPrecondition(
        "the certificate does not verify against the CA " +
        (remaining.count() > 0 ? "in " + std::to_string(remaining.count()) + " hours" : std::string("now")) + ": " +
        why);
  }
  return Status::Ok();
}

}  // namespace

Status CheckServingCertificate(const std::string& certificate_pem, const std::string& ca_certificate_pem,
                               const std::string& host, std::chrono::hours remaining) {
  MF_ASSIGN_OR_RETURN(Cert cert, ReadCertificate(certificate_pem, "the serving certificate"));
  MF_RETURN_IF_ERROR(VerifyChain(cert.get(), ca_certificate_pem, X509_PURPOSE_SSL_SERVER, remaining));
  int named = IsIpAddress(host) ? X509_check_ip_asc(cert.get(), host.c_str(), 0)
                                : X509_check_host(cert.get(), host.data(), host.size(), 0, nullptr);
  ERR_clear_error();
  if (named != 1) return FailedPrecondition("the serving certificate does not name " + host);
  return Status::Ok();
}

Status CheckClientCertificate(const std::string& certificate_pem, const std::string& ca_certificate_pem,
                              std::chrono::hours remaining) {
  MF_ASSIGN_OR_RETURN(Cert cert, ReadCertificate(certificate_pem, "the client certificate"));
  return VerifyChain(cert.get(), ca_certificate_pem, X509_PURPOSE_SSL_CLIENT, remaining);
}

StatusOr<PemCertificate> IssueClientCertificate(const PemCertificate& ca, const ClientCertificateRequest& request) {
  if (request.common_name.empty()) return InvalidArgument("a client certificate needs a common name (the user)");
  MF_ASSIGN_OR_RETURN(auto signer, ReadCa(ca));
  auto& [ca_cert, ca_key] = signer;
  MF_ASSIGN_OR_RETURN(Key key, NewKey());
  MF_ASSIGN_OR_RETURN(Cert cert,
                      NewCertificate(key.get(), request.common_name, request.validity, request.organizations));
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get())) != 1)
    return Failed("cannot set the issuer");
  MF_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE"));
  MF_RETURN_IF_ERROR(
      AddExtension(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment"));
  MF_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_ext_key_usage, "clientAuth"));
  MF_RETURN_IF_ERROR(AddExtension(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always"));
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) return Failed("cannot sign the client certificate");
  return Encode(cert.get(), key.get());
}

}  // namespace mf::http
