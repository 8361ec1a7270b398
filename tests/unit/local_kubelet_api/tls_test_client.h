// Test-side peers of the kubelet API server: a TLS client on a non-blocking socket (every read
// bounded by a timeout), plain HTTP/1.1 requests over it, and a small SPDY/3.1 client that records
// what the server sends on each stream.
#pragma once

#include <openssl/ssl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "http/certificates.h"
#include "tools/local/kubelet_api/spdy_frame.h"

namespace mf::local::testing {

// A CA, a serving certificate for 127.0.0.1 and a clientAuth certificate, all signed by the CA.
struct TestPki {
  http::PemCertificate ca;
  http::PemCertificate server;
  http::PemCertificate client;
};
TestPki MakeTestPki();

class TlsTestClient {
 public:
  // Connects to 127.0.0.1:port, verifying the server against `ca_pem`; presents `client` if given.
  static StatusOr<std::unique_ptr<TlsTestClient>> Connect(uint16_t port, const std::string& ca_pem,
                                                          const http::PemCertificate* client = nullptr);
  ~TlsTestClient();

  // Writes everything; while the socket is full, what arrives is kept for Read() (so a peer that
  // writes back while we write cannot deadlock us).
  Status Write(std::string_view bytes);
  // Waits up to `timeout` for bytes; returns those available ("" at EOF, also once the peer closed).
  StatusOr<std::string> Read(std::chrono::milliseconds timeout);
  bool eof() const { return eof_; }
  // Closes the TCP connection without a TLS close_notify, as a vanished client does.
  void Abort();

 private:
  TlsTestClient() = default;
  // One SSL_read into `pending_`; false when nothing is available now.
  Status ReadAvailable(bool* got);
  Status WaitFor(short events, std::chrono::milliseconds timeout);

  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  std::string pending_;
  bool eof_ = false;
};

struct HttpResult {
  int status = 0;
  std::string head;
  std::string body;  // de-chunked
};

// Sends a GET and reads the response to its end (Content-Length, last chunk, or close).
StatusOr<HttpResult> HttpGet(TlsTestClient& client, const std::string& target,
                             std::chrono::milliseconds timeout = std::chrono::seconds(10));
// Reads a response whose first bytes, `raw`, have already arrived, to its end.
StatusOr<HttpResult> ReadHttpResponse(TlsTestClient& client, std::string raw,
                                      std::chrono::milliseconds timeout = std::chrono::seconds(10));

class SpdyTestClient {
 public:
  struct Stream {
    bool replied = false;
    bool fin = false;
    bool reset = false;
    uint32_t reset_status = 0;
    std::string data;
  };

  // Sends an upgrade request for `target` offering `protocols`; `response_head` gets the response
  // head. Returns a client only on 101.
  static StatusOr<std::unique_ptr<SpdyTestClient>> Upgrade(std::unique_ptr<TlsTestClient> tls,
                                                           const std::string& target,
                                                           const std::vector<std::string>& protocols,
                                                           std::string* response_head,
                                                           const std::string& method = "POST");

  uint32_t Open(const spdy::Headers& headers, bool fin = false);
  Status Send(uint32_t stream_id, std::string_view data, bool fin);
  Status SendRaw(std::string_view bytes) { return tls_->Write(bytes); }
  // Reads frames until `done()` or the timeout (DeadlineExceeded), a malformed frame or EOF.
  Status ReadUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout = std::chrono::seconds(10));

  Stream& stream(uint32_t id) { return streams_[id]; }
  const std::vector<uint32_t>& pings() const { return pings_; }
  bool goaway() const { return goaway_; }
  bool eof() const { return tls_->eof(); }
  TlsTestClient& tls() { return *tls_; }

 private:
  explicit SpdyTestClient(std::unique_ptr<TlsTestClient> tls) : tls_(std::move(tls)) {}
  Status Consume(std::string_view bytes);

  std::unique_ptr<TlsTestClient> tls_;
  spdy::FrameReader reader_;
  spdy::FrameWriter writer_;
  uint32_t next_stream_ = 1;
  std::map<uint32_t, Stream> streams_;
  std::vector<uint32_t> pings_;
  bool goaway_ = false;
};

}  // namespace mf::local::testing
