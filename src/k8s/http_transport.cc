#include "k8s/http_transport.h"

#include <cctype>

#include "http/url.h"

namespace mf::k8s {

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

HttpResponse FromClientResponse(http::Response&& r) {
  HttpResponse out;
  out.status = r.status;
  for (const auto& [name, value] : r.headers.fields()) out.headers.emplace(Lower(name), value);
  out.body = std::move(r.body);
  return out;
}

}  // namespace

StatusOr<std::shared_ptr<HttpTransport>> HttpTransport::Create(const ClusterConfig& config) {
  MF_ASSIGN_OR_RETURN(http::Url url, http::ParseUrl(config.server));
  http::ClientOptions options;
  options.insecure_skip_verify = config.insecure_skip_tls_verify;
  // As client-go: PEM data overrides the file naming the same thing.
  if (!config.ca_pem.empty()) {
    options.ca_pem = config.ca_pem;
  } else {
    options.ca_file = config.ca_file;
  }
  if (!config.client_cert_pem.empty() || !config.client_key_pem.empty()) {
    options.client_cert_pem = config.client_cert_pem;
    options.client_key_pem = config.client_key_pem;
  } else {
    options.client_cert_file = config.client_cert_file;
    options.client_key_file = config.client_key_file;
  }
  options.user_agent = "modelfleet-k8s";
  if ((!config.ca_pem.empty() || !config.client_cert_pem.empty() || !config.client_key_pem.empty()) && !url.tls) {
    return InvalidArgument("certificates are configured but server " + config.server + " is not https");
  }
  std::string server = config.server;
  while (!server.empty() && server.back() == '/') server.pop_back();
  auto transport = std::shared_ptr<HttpTransport>(new HttpTransport(std::move(server), std::move(options)));
  if (url.tls) MF_RETURN_IF_ERROR(transport->client_.tls_status());
  return transport;
}

HttpTransport::HttpTransport(std::string server, http::ClientOptions options)
    : server_(std::move(server)), client_(std::move(options)) {}

HttpTransport::~HttpTransport() = default;

http::ClientRequest HttpTransport::ToClientRequest(const HttpRequest& request) const {
  http::ClientRequest out;
  out.method = request.method;
  out.url = server_ + request.target;
  for (const auto& [name, value] : request.headers) out.headers.Set(name, value);
  out.body = request.body;
  out.read_timeout = request.timeout;
  return out;
}

StatusOr<HttpResponse> HttpTransport::Send(const HttpRequest& request) {
  http::ClientRequest r = ToClientRequest(request);
  r.deadline = request.timeout;
  MF_ASSIGN_OR_RETURN(http::Response response, client_.Do(r));
  return FromClientResponse(std::move(response));
}

StatusOr<HttpResponse> HttpTransport::Stream(const HttpRequest& request, const ChunkHandler& on_chunk,
                                             std::stop_token stop) {
  http::CancelToken cancel;
  std::stop_callback on_stop(stop, [&cancel] { cancel.Cancel(); });
  MF_ASSIGN_OR_RETURN(http::Response response,
                      client_.Stream(
                          ToClientRequest(request), [&](std::string_view data) { return on_chunk(data); }, &cancel));
  return FromClientResponse(std::move(response));
}

StatusOr<std::unique_ptr<Client>> NewClient(const ClusterConfig& config, ClientOptions options) {
  MF_ASSIGN_OR_RETURN(std::shared_ptr<HttpTransport> transport, HttpTransport::Create(config));
  return std::make_unique<Client>(std::move(transport), config, std::move(options));
}

}  // namespace mf::k8s
