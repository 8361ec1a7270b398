#include "tools/local/cli/pki.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "common/logging.h"
#include "http/certificates.h"

namespace mf::local {
namespace {

namespace fs = std::filesystem;

constexpr auto kCaValidity = std::chrono::hours(24 * 365 * 10);
constexpr auto kServingValidity = std::chrono::hours(24 * 365);
constexpr auto kRenewBefore = std::chrono::hours(24 * 30);

StatusOr<std::string> ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Writes atomically (temp file + rename) with `mode` set before any byte is written.
Status WriteFile(const fs::path& path, const std::string& text, mode_t mode) {
  const fs::path tmp = path.string() + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Internal("cannot write " + tmp.string() + ": " + std::strerror(errno));
  ::fchmod(fd, mode);  // an existing temp file keeps its old mode otherwise
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return Internal("cannot write " + tmp.string() + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return Internal("cannot write " + tmp.string() + ": " + std::strerror(errno));
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return Internal("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  return Status::Ok();
}

bool Unspecified(const std::string& address) { return address == "0.0.0.0" || address == "::" || address.empty(); }

}  // namespace

StatusOr<ServingPki> EnsureServingPki(const fs::path& dir, const std::string& address) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Internal("cannot create " + dir.string() + ": " + ec.message());
  const fs::path ca_crt = dir / "ca.crt", ca_key = dir / "ca.key";
  const fs::path crt = dir / "apiserver.crt", key = dir / "apiserver.key";

  http::PemCertificate ca;
  auto ca_cert_text = ReadFile(ca_crt);
  auto ca_key_text = ReadFile(ca_key);
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

  std::vector<std::string> ips = {"127.0.0.1", "::1"};
  if (!Unspecified(address) && address != "127.0.0.1" && address != "::1") ips.push_back(address);
  ServingPki pki;
  pki.ca_certificate_pem = ca.certificate_pem;
  auto cert_text = ReadFile(crt);
  auto key_text = ReadFile(key);
  if (cert_text.ok() && key_text.ok()) {
    Status usable = Status::Ok();
    for (const auto& host : ips) {
      usable = http::CheckServingCertificate(*cert_text, ca.certificate_pem, host, kRenewBefore);
      if (!usable.ok()) break;
    }
    if (usable.ok()) {
      pki.certificate_pem = std::move(*cert_text);
      pki.private_key_pem = std::move(*key_text);
      return pki;
    }
    log::Info("issuing a new API server certificate", {{"reason", usable.message()}});
  }
  MF_ASSIGN_OR_RETURN(http::PemCertificate serving,
                      http::IssueServingCertificate(ca, {.common_name = "modelfleet-local-apiserver",
                                                         .dns_names = {"localhost"},
                                                         .ip_addresses = ips,
                                                         .validity = kServingValidity}));
  MF_RETURN_IF_ERROR(WriteFile(key, serving.private_key_pem, 0600));
  MF_RETURN_IF_ERROR(WriteFile(crt, serving.certificate_pem, 0644));
  pki.certificate_pem = std::move(serving.certificate_pem);
  pki.private_key_pem = std::move(serving.private_key_pem);
  pki.issued = true;
  return pki;
}

}  // namespace mf::local
