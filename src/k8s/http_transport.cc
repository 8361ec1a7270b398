#include "k8s/http_transport.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <fstream>

#include "http/url.h"

namespace mf::k8s {

namespace fs = std::filesystem;

namespace {

// Writes `pem` to dir/name readable by the owner only.
StatusOr<std::string> WritePrivateFile(const fs::path& dir, const char* name, const std::string& pem) {
  const fs::path path = dir / name;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return Internal("cannot write " + path.string());
    out << pem;
    if (!out.flush()) return Internal("cannot write " + path.string());
  }
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write);
  return path.string();
}

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
  options.ca_file = config.ca_file;
  options.client_cert_file = config.client_cert_file;
  options.client_key_file = config.client_key_file;
  options.user_agent = "modelfleet-k8s";
  fs::path pem_dir;
  if (!config.ca_pem.empty() || !config.client_cert_pem.empty() || !config.client_key_pem.empty()) {
    if (!url.tls) return InvalidArgument("certificates are configured but server " + config.server + " is not https");
    std::string pattern = (fs::temp_directory_path() / "modelfleet-k8s-XXXXXX").string();
    if (!mkdtemp(pattern.data())) return Internal("cannot create a private directory for TLS material");
    pem_dir = pattern;  // mkdtemp creates it 0700
    const auto write = [&](const std::string& pem, const char* name, std::string* target) -> Status {
      if (pem.empty()) return Status::Ok();
      MF_ASSIGN_OR_RETURN(*target, WritePrivateFile(pem_dir, name, pem));
      return Status::Ok();
    };
    Status s = write(config.ca_pem, "ca.pem", &options.ca_file);
    if (s.ok()) s = write(config.client_cert_pem, "client.pem", &options.client_cert_file);
    if (s.ok()) s = write(config.client_key_pem, "client-key.pem", &options.client_key_file);
    if (!s.ok()) {
      std::error_code ec;
      fs::remove_all(pem_dir, ec);
      return s;
    }
  }
  std::string server = config.server;
  while (!server.empty() && server.back() == '/') server.pop_back();
  return std::shared_ptr<HttpTransport>(new HttpTransport(std::move(server), std::move(options), std::move(pem_dir)));
}

HttpTransport::HttpTransport(std::string server, http::ClientOptions options, fs::path pem_dir)
    : server_(std::move(server)), pem_dir_(std::move(pem_dir)), client_(std::move(options)) {}

HttpTransport::~HttpTransport() {
  if (!pem_dir_.empty()) {
    std::error_code ec;
    fs::remove_all(pem_dir_, ec);
  }
}

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
