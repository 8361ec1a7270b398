// A synchronous HTTP/1.1 client with per-host connection pooling, for http and https
// (OpenSSL: CA file, client certificate, or no verification), used by the operator, the router
// and the Kubernetes client. One Client is shared by many threads: each call takes a pooled
// connection (or dials one), so concurrent calls run in parallel.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "http/hosts_lookup.h"
#include "http/message.h"

namespace mf::http {

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{5'000};
  // Longest silence while waiting for response bytes. Streams set their own per request.
  std::chrono::milliseconds read_timeout{30'000};
  size_t max_response_body_bytes = 256 * 1024 * 1024;
  size_t max_response_header_bytes = 64 * 1024;
  size_t max_idle_connections_per_host = 16;
  std::chrono::milliseconds idle_connection_ttl{50'000};  // below typical server idle timeouts
  // TLS (https://): PEM files, or the PEM text itself (a kubeconfig's *-data fields). With
  // neither ca_file nor ca_pem the system trust store is used; with both, both are trusted.
  std::string ca_file;
  std::string client_cert_file;
  std::string client_key_file;
  std::string ca_pem;
  std::string client_cert_pem;  // the chain, leaf first
  std::string client_key_pem;
  bool insecure_skip_verify = false;
  std::string user_agent = "modelfleet";
  // An /etc/hosts-style file consulted before DNS (re-read when it changes); "" for none. The
  // local cluster's kubelet sets MODELFLEET_HOSTS_FILE for pods so Service names resolve.
  std::string hosts_file = HostsFileFromEnvironment();
};

struct ClientRequest {
  std::string method = "GET";
  std::string url;  // "http://host:port/path?query" or "https://..."
  Headers headers;
  std::string body;
  // Overrides ClientOptions::read_timeout for this call.
  std::optional<std::chrono::milliseconds> read_timeout;
  // Bound on the whole call (connect + send + receive); none when unset.
  std::optional<std::chrono::milliseconds> deadline;
};

// Cancels a running call (typically a long stream) from another thread. The call returns
// kCancelled. One token serves one call at a time; Cancel() before the call starts cancels it.
class CancelToken {
 public:
  void Cancel();
  bool cancelled() const { return cancelled_.load(); }

  // Used by the client: `hook` runs (once) on Cancel(); Clear() drops it when the call ends.
  void SetHook(std::function<void()> hook);
  void ClearHook();

 private:
  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::function<void()> hook_;
};

// Gets each piece of a streamed body as it arrives; return false to stop reading.
using BodyCallback = std::function<bool(std::string_view data)>;

struct ClientStats {
  uint64_t connections_opened = 0;
  uint64_t requests = 0;
};

class Client {
 public:
  explicit Client(ClientOptions options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends the request and reads the whole response (chunked or not). Errors: kUnavailable
  // (connect failed, peer closed early), kDeadlineExceeded (timeouts), kDataLoss (malformed or
  // truncated response), kResourceExhausted (body over the limit), kInvalidArgument (bad URL).
  StatusOr<Response> Do(const ClientRequest& request);
  StatusOr<Response> Get(std::string url, Headers headers = {});
  StatusOr<Response> Post(std::string url, std::string body, std::string content_type, Headers headers = {});

  // Streams a 2xx body to `on_data` as it arrives and returns the response with an empty body
  // once it ends; non-2xx bodies are read whole into the returned response instead. Returns
  // kCancelled when `cancel` fires.
  StatusOr<Response> Stream(const ClientRequest& request, const BodyCallback& on_data, CancelToken* cancel = nullptr);
  // Like Stream(), split into lines ('\n' removed, a trailing '\r' too); a last line without
  // '\n' is delivered when the body ends. For Kubernetes watches (one JSON event per line).
  StatusOr<Response> StreamLines(const ClientRequest& request, const BodyCallback& on_line,
                                 CancelToken* cancel = nullptr);

  ClientStats stats() const;
  // Whether the TLS options loaded (OK without any). https calls fail with this status otherwise,
  // so owners can refuse a bad configuration up front.
  Status tls_status() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mf::http
