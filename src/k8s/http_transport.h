// The production Transport: the shared pooled HTTP/1.1 client (src/http/client.h) pointed at
// the API server of a ClusterConfig, with its TLS settings. PEM bytes from a kubeconfig's
// *-data fields go to OpenSSL directly (nothing is written to disk); a CA or client certificate
// that does not load fails Create().
#pragma once

#include <memory>

#include "http/client.h"
#include "k8s/client.h"
#include "k8s/transport.h"

namespace mf::k8s {

class HttpTransport : public Transport {
 public:
  static StatusOr<std::shared_ptr<HttpTransport>> Create(const ClusterConfig& config);
  ~HttpTransport() override;

  StatusOr<HttpResponse> Send(const HttpRequest& request) override;
  StatusOr<HttpResponse> Stream(const HttpRequest& request, const ChunkHandler& on_chunk,
                                std::stop_token stop) override;

 private:
  HttpTransport(std::string server, http::ClientOptions options);
  http::ClientRequest ToClientRequest(const HttpRequest& request) const;

  const std::string server_;  // scheme://host[:port][/prefix], without a trailing '/'
  http::Client client_;
};

// A Client for the given config over HttpTransport.
StatusOr<std::unique_ptr<Client>> NewClient(const ClusterConfig& config, ClientOptions options = {});

}  // namespace mf::k8s
