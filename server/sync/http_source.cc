#include "server/sync/http_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <string>

#include "common/logging.h"
#include "http/url.h"
#include "server/sync/file_util.h"
#include "server/sync/sha256.h"

namespace mf::sync {
namespace {

constexpr size_t kErrorBodyShown = 200;

bool IsRedirect(int status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// An absolute URL, or one relative to the origin ("/path", "//host/path"), resolved against `base`.
StatusOr<std::string> ResolveLocation(const std::string& base, std::string_view location) {
  MF_ASSIGN_OR_RETURN(http::Url from, http::ParseUrl(base));
  std::string next;
  if (location.starts_with("http://") || location.starts_with("https://")) {
    next = std::string(location);
  } else if (location.starts_with("//")) {
    next = (from.tls ? "https:" : "http:") + std::string(location);
  } else if (location.starts_with("/")) {
    next = (from.tls ? "https://" : "http://") + from.HostHeader() + std::string(location);
  } else {
    return Unimplemented("redirect from " + base + " to a relative location '" +
                         std::string(location.substr(0, kErrorBodyShown)) + "' is not followed");
  }
  MF_ASSIGN_OR_RETURN(http::Url to, http::ParseUrl(next));
  if (from.tls && !to.tls) return PermissionDenied("redirect from " + base + " to plain http " + next + " refused");
  return next;
}

Status HttpError(const std::string& url, const http::Response& response) {
  std::string message = "GET " + url + " answered " + std::to_string(response.status) + " " +
                        std::string(http::ReasonPhrase(response.status));
  std::string body = response.body.substr(0, kErrorBodyShown);
  for (char& c : body) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  if (!body.empty()) message += ": " + body;
  if (response.status == 404 || response.status == 410) return NotFound(std::move(message));
  if (response.status == 401 || response.status == 403) return PermissionDenied(std::move(message));
  return Unavailable(std::move(message));
}

}  // namespace

http::ClientOptions DownloadClientOptions() {
  http::ClientOptions options;
  options.connect_timeout = std::chrono::seconds(10);
  options.read_timeout = std::chrono::seconds(60);
  options.max_response_body_bytes = 64 * 1024;  // only non-2xx bodies are read whole
  options.max_idle_connections_per_host = 1;
  options.user_agent = "modelfleet-sync";
  return options;
}

StatusOr<Content> Download(const Source& source, const std::filesystem::path& staging, http::Client& client,
                           Cancellation& cancellation) {
  const std::filesystem::path path = staging / source.file_name;
  Fd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!out.valid()) return ErrnoStatus("creating " + path.string(), errno);

  std::string url = source.url;
  for (int redirects = 0;; ++redirects) {
    Sha256 sha;
    uint64_t bytes = 0;
    Status write_error;
    auto on_data = [&](std::string_view data) {
      if (bytes + data.size() > kMaxDownloadBytes) {
        write_error = ResourceExhausted("GET " + url + ": body is larger than " + std::to_string(kMaxDownloadBytes) +
                                        " bytes, the most modelfleet-sync downloads");
        return false;
      }
      write_error = WriteAll(out.get(), data, path.string());
      sha.Update(data);
      bytes += data.size();
      return write_error.ok();
    };
    http::CancelToken token;
    cancellation.SetHook([&token] { token.Cancel(); });
    http::ClientRequest request;
    request.url = url;
    auto response = client.Stream(request, on_data, &token);
    cancellation.ClearHook();

    if (!response.ok()) return response.status().WithContext("GET " + url);
    MF_RETURN_IF_ERROR(write_error);
    if (IsRedirect(response->status)) {
      auto location = response->headers.Get("Location");
      if (!location) return Unavailable("GET " + url + " answered a redirect without a Location");
      if (redirects == kMaxRedirects) {
        return Unavailable("GET " + source.url + ": more than " + std::to_string(kMaxRedirects) + " redirects");
      }
      MF_ASSIGN_OR_RETURN(url, ResolveLocation(url, *location));
      log::Debug("following redirect", {{"to", url}});
      continue;
    }
    if (response->status < 200 || response->status >= 300) return HttpError(url, *response);
    if (auto length = response->headers.Get("Content-Length")) {
      uint64_t expected = 0;
      auto [end, ec] = std::from_chars(length->data(), length->data() + length->size(), expected);
      if (ec == std::errc() && end == length->data() + length->size() && expected != bytes) {
        return Unavailable("GET " + url + ": got " + std::to_string(bytes) + " of " + std::to_string(expected) +
                           " bytes");
      }
    }
    if (::fsync(out.get()) != 0) return ErrnoStatus("fsync of " + path.string(), errno);
    MF_RETURN_IF_ERROR(out.Close(path.string()));
    Content content;
    content.bytes = bytes;
    content.sha256 = sha.HexDigest();
    content.file_name = source.file_name;
    return content;
  }
}

}  // namespace mf::sync
