#include "tests/unit/local_kubelet_api/tls_test_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace mf::local::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::string OpenSslError() {
  const unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  return buf;
}

// A clientAuth certificate signed by `ca` (mf::http issues serving certificates only).
http::PemCertificate IssueClientCertificate(const http::PemCertificate& ca, const std::string& common_name) {
  BIO* ca_cert_bio = BIO_new_mem_buf(ca.certificate_pem.data(), static_cast<int>(ca.certificate_pem.size()));
  X509* ca_cert = PEM_read_bio_X509(ca_cert_bio, nullptr, nullptr, nullptr);
  BIO* ca_key_bio = BIO_new_mem_buf(ca.private_key_pem.data(), static_cast<int>(ca.private_key_pem.size()));
  EVP_PKEY* ca_key = PEM_read_bio_PrivateKey(ca_key_bio, nullptr, nullptr, nullptr);
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  if (ca_cert == nullptr || ca_key == nullptr || key == nullptr || cert == nullptr) std::abort();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 4242);
  X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), 24 * 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(cert, X509_get_subject_name(ca_cert));
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, ca_cert, cert, nullptr, nullptr, 0);
  for (auto [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:FALSE"}, std::pair{NID_key_usage, "critical,digitalSignature"},
        std::pair{NID_ext_key_usage, "clientAuth"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
  X509_sign(cert, ca_key, EVP_sha256());
  http::PemCertificate out;
  BIO* cert_out = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(cert_out, cert);
  BIO* key_out = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(key_out, key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(cert_out, &data);
  out.certificate_pem.assign(data, static_cast<size_t>(n));
  n = BIO_get_mem_data(key_out, &data);
  out.private_key_pem.assign(data, static_cast<size_t>(n));
  BIO_free(cert_out);
  BIO_free(key_out);
  X509_free(cert);
  EVP_PKEY_free(key);
  EVP_PKEY_free(ca_key);
  X509_free(ca_cert);
  BIO_free(ca_key_bio);
  BIO_free(ca_cert_bio);
  return out;
}

}  // namespace

TestPki MakeTestPki() {
  TestPki pki;
  auto ca = http::CreateCertificateAuthority("kubelet-api-test-ca", std::chrono::hours(24));
  if (!ca.ok()) std::abort();
  pki.ca = *ca;
  http::ServingCertificateRequest request;
  request.common_name = "kubelet";
  request.ip_addresses = {"127.0.0.1"};
  request.validity = std::chrono::hours(24);
  auto server = http::IssueServingCertificate(pki.ca, request);
  if (!server.ok()) std::abort();
  pki.server = *server;
  pki.client = IssueClientCertificate(pki.ca, "kube-apiserver-kubelet-client");
  return pki;
}

StatusOr<std::unique_ptr<TlsTestClient>> TlsTestClient::Connect(uint16_t port, const std::string& ca_pem,
                                                                const http::PemCertificate* client) {
  std::unique_ptr<TlsTestClient> c(new TlsTestClient());
  c->fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(c->fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return Unavailable(std::string("connect: ") + std::strerror(errno));
  }
  fcntl(c->fd_, F_SETFL, fcntl(c->fd_, F_GETFL) | O_NONBLOCK);
  c->ctx_ = SSL_CTX_new(TLS_client_method());
  BIO* bio = BIO_new_mem_buf(ca_pem.data(), static_cast<int>(ca_pem.size()));
  X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  X509_STORE_add_cert(SSL_CTX_get_cert_store(c->ctx_), ca);
  X509_free(ca);
  BIO_free(bio);
  SSL_CTX_set_verify(c->ctx_, SSL_VERIFY_PEER, nullptr);
  if (client != nullptr) {
    BIO* cert_bio = BIO_new_mem_buf(client->certificate_pem.data(), static_cast<int>(client->certificate_pem.size()));
    X509* cert = PEM_read_bio_X509(cert_bio, nullptr, nullptr, nullptr);
    BIO* key_bio = BIO_new_mem_buf(client->private_key_pem.data(), static_cast<int>(client->private_key_pem.size()));
    EVP_PKEY* key = PEM_read_bio_PrivateKey(key_bio, nullptr, nullptr, nullptr);
    SSL_CTX_use_certificate(c->ctx_, cert);
    SSL_CTX_use_PrivateKey(c->ctx_, key);
    X509_free(cert);
    EVP_PKEY_free(key);
    BIO_free(cert_bio);
    BIO_free(key_bio);
  }
  c->ssl_ = SSL_new(c->ctx_);
  SSL_set_fd(c->ssl_, c->fd_);
  SSL_set1_host(c->ssl_, "127.0.0.1");
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (true) {
    const int r = SSL_connect(c->ssl_);
    if (r == 1) break;
    const int err = SSL_get_error(c->ssl_, r);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      return Unavailable("TLS handshake failed: " + OpenSslError());
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return DeadlineExceeded("TLS handshake timed out");
    MF_RETURN_IF_ERROR(c->WaitFor(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, left));
  }
  return c;
}

TlsTestClient::~TlsTestClient() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (ctx_ != nullptr) SSL_CTX_free(ctx_);
  if (fd_ >= 0) close(fd_);
}

Status TlsTestClient::WaitFor(short events, std::chrono::milliseconds timeout) {
  pollfd p{fd_, events, 0};
  const int r = poll(&p, 1, static_cast<int>(timeout.count()));
  if (r < 0) return Internal(std::string("poll: ") + std::strerror(errno));
  if (r == 0) return DeadlineExceeded("timed out waiting for the server");
  return Status::Ok();
}

Status TlsTestClient::ReadAvailable(bool* got) {
  *got = false;
  char buf[16 * 1024];
  const int r = SSL_read(ssl_, buf, sizeof(buf));
  if (r > 0) {
    pending_.append(buf, static_cast<size_t>(r));
    *got = true;
    return Status::Ok();
  }
  const int err = SSL_get_error(ssl_, r);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) return Status::Ok();
  // A close_notify, a TCP close without one, or a reset: the connection is over either way.
  eof_ = true;
  ERR_clear_error();
  return Status::Ok();
}

Status TlsTestClient::Write(std::string_view bytes) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (!bytes.empty()) {
    if (eof_) return Unavailable("the server closed the connection");
    const int r = SSL_write(ssl_, bytes.data(), static_cast<int>(bytes.size()));
    if (r > 0) {
      bytes.remove_prefix(static_cast<size_t>(r));
      continue;
    }
    const int err = SSL_get_error(ssl_, r);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) {
      return Unavailable("TLS write failed: " + OpenSslError());
    }
    // Keep reading while the socket is full, or a server echoing our bytes back would block us.
    bool got = true;
    while (got && !eof_) MF_RETURN_IF_ERROR(ReadAvailable(&got));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return DeadlineExceeded("timed out writing to the server");
    Status waited = WaitFor(POLLIN | POLLOUT, std::min(left, std::chrono::milliseconds(100)));
    if (!waited.ok() && waited.code() != StatusCode::kDeadlineExceeded) return waited;
  }
  return Status::Ok();
}

StatusOr<std::string> TlsTestClient::Read(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (pending_.empty() && !eof_) {
    bool got = false;
    MF_RETURN_IF_ERROR(ReadAvailable(&got));
    if (got || eof_) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return DeadlineExceeded("timed out waiting for the server");
    Status waited = WaitFor(POLLIN, left);
    if (!waited.ok()) return waited;
  }
  // Drain what is already decrypted or buffered.
  bool got = true;
  while (got && !eof_) MF_RETURN_IF_ERROR(ReadAvailable(&got));
  return std::exchange(pending_, std::string());
}

void TlsTestClient::Abort() {
  shutdown(fd_, SHUT_RDWR);
  eof_ = true;
}

StatusOr<HttpResult> HttpGet(TlsTestClient& client, const std::string& target, std::chrono::milliseconds timeout) {
  MF_RETURN_IF_ERROR(client.Write("GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: test\r\n\r\n"));
  return ReadHttpResponse(client, "", timeout);
}

StatusOr<HttpResult> ReadHttpResponse(TlsTestClient& client, std::string raw, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  HttpResult result;
  size_t head_end = std::string::npos;
  while (true) {
    if (head_end == std::string::npos) {
      head_end = raw.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        result.head = raw.substr(0, head_end + 2);
        result.status = std::atoi(raw.c_str() + 9);
      }
    }
    if (head_end != std::string::npos) {
      std::string body = raw.substr(head_end + 4);
      const bool chunked = result.head.find("Transfer-Encoding: chunked") != std::string::npos;
      const size_t length_at = result.head.find("Content-Length: ");
      if (chunked) {
        // Decode as far as complete chunks go; done at the zero-size chunk.
        std::string decoded;
        size_t pos = 0;
        bool complete = false;
        while (true) {
          const size_t line_end = body.find("\r\n", pos);
          if (line_end == std::string::npos) break;
          const size_t size = std::strtoul(body.substr(pos, line_end - pos).c_str(), nullptr, 16);
          if (size == 0) {
            complete = body.size() >= line_end + 4;
            break;
          }
          if (body.size() < line_end + 2 + size + 2) break;
          decoded += body.substr(line_end + 2, size);
          pos = line_end + 2 + size + 2;
        }
        result.body = decoded;
        if (complete) return result;
      } else if (length_at != std::string::npos) {
        const size_t length = std::strtoul(result.head.c_str() + length_at + 16, nullptr, 10);
        if (body.size() >= length) {
          result.body = body.substr(0, length);
          return result;
        }
      } else if (client.eof()) {
        result.body = body;
        return result;
      }
    }
    if (client.eof()) return Unavailable("connection closed before the response ended: " + raw);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return DeadlineExceeded("timed out reading the response: " + raw);
    MF_ASSIGN_OR_RETURN(std::string more, client.Read(left));
    raw += more;
  }
}

StatusOr<std::unique_ptr<SpdyTestClient>> SpdyTestClient::Upgrade(std::unique_ptr<TlsTestClient> tls,
                                                                  const std::string& target,
                                                                  const std::vector<std::string>& protocols,
                                                                  std::string* response_head,
                                                                  const std::string& method) {
  std::string request = method + " " + target +
                        " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
                        "Content-Length: 0\r\n";
  for (const auto& p : protocols) request += "X-Stream-Protocol-Version: " + p + "\r\n";
  request += "\r\n";
  MF_RETURN_IF_ERROR(tls->Write(request));
  std::string raw;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  size_t head_end;
  while ((head_end = raw.find("\r\n\r\n")) == std::string::npos) {
    if (tls->eof()) return Unavailable("connection closed before the response head: " + raw);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return DeadlineExceeded("timed out waiting for the upgrade response");
    MF_ASSIGN_OR_RETURN(std::string more, tls->Read(left));
    raw += more;
  }
  *response_head = raw.substr(0, head_end + 4);
  if (raw.compare(0, 12, "HTTP/1.1 101") != 0) {
    // Read the rest of the error body for the caller's messages.
    while (!tls->eof()) {
      auto more = tls->Read(std::chrono::milliseconds(500));
      if (!more.ok()) break;
      raw += *more;
    }
    *response_head = raw;
    return FailedPrecondition("no upgrade: " + raw);
  }
  std::unique_ptr<SpdyTestClient> client(new SpdyTestClient(std::move(tls)));
  MF_RETURN_IF_ERROR(client->Consume(std::string_view(raw).substr(head_end + 4)));
  return client;
}

uint32_t SpdyTestClient::Open(const spdy::Headers& headers, bool fin) {
  const uint32_t id = next_stream_;
  next_stream_ += 2;
  streams_[id];
  Status s = tls_->Write(writer_.SynStream(id, headers, fin ? spdy::kFlagFin : 0));
  if (!s.ok()) streams_[id].reset = true;
  return id;
}

Status SpdyTestClient::Send(uint32_t stream_id, std::string_view data, bool fin) {
  constexpr size_t kFrame = 32 * 1024;  // as client-go's io.Copy writes
  do {
    const std::string_view piece = data.substr(0, kFrame);
    data.remove_prefix(piece.size());
    MF_RETURN_IF_ERROR(tls_->Write(spdy::EncodeData(stream_id, piece, fin && data.empty())));
  } while (!data.empty());
  return Status::Ok();
}

Status SpdyTestClient::Consume(std::string_view bytes) {
  std::vector<spdy::Frame> frames;
  MF_RETURN_IF_ERROR(reader_.Feed(bytes, &frames));
  for (auto& f : frames) {
    switch (f.type) {
      case spdy::FrameType::kSynReply:
        streams_[f.stream_id].replied = true;
        if (f.fin()) streams_[f.stream_id].fin = true;
        break;
      case spdy::FrameType::kData:
        streams_[f.stream_id].data += f.data;
        if (f.fin()) streams_[f.stream_id].fin = true;
        break;
      case spdy::FrameType::kRstStream:
        streams_[f.stream_id].reset = true;
        streams_[f.stream_id].reset_status = f.status;
        break;
      case spdy::FrameType::kPing:
        pings_.push_back(f.id);
        break;
      case spdy::FrameType::kGoAway:
        goaway_ = true;
        break;
      default:
        break;
    }
  }
  return Status::Ok();
}

Status SpdyTestClient::ReadUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!done()) {
    if (tls_->eof()) return Unavailable("the server closed the connection");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return DeadlineExceeded("timed out waiting for the server's frames");
    MF_ASSIGN_OR_RETURN(std::string bytes, tls_->Read(left));
    MF_RETURN_IF_ERROR(Consume(bytes));
  }
  return Status::Ok();
}

}  // namespace mf::local::testing
