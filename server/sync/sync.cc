#include "server/sync/sync.h"

#include <algorithm>
#include <random>

#include "common/logging.h"
#include "server/sync/http_source.h"
#include "server/sync/local_source.h"

namespace mf::sync {
namespace {

namespace fs = std::filesystem;

Status ShaWithDirectory(const Source& source) {
  return InvalidArgument("--sha256 names the digest of a single file, but source " + source.uri +
                         " is a directory; drop --sha256 or name the file");
}

Status CheckDigest(const SyncRequest& request, const Content& content) {
  if (request.expected_sha256.empty()) return Status::Ok();
  if (content.file_name.empty()) return ShaWithDirectory(request.source);
  if (content.sha256 != request.expected_sha256) {
    return DataLoss("sha256 mismatch for " + request.source.uri + ": expected " + request.expected_sha256 + ", got " +
                    content.sha256 + " (" + std::to_string(content.bytes) + " bytes)");
  }
  return Status::Ok();
}

// The marker vouches for the content, but a single file may have been deleted or truncated by
// hand since: then the destination is rewritten.
bool StillIntact(const fs::path& dest, const Content& content) {
  if (content.file_name.empty()) return true;
  std::error_code ec;
  return fs::file_size(dest / content.file_name, ec) == content.bytes && !ec;
}

}  // namespace

StatusOr<SyncResult> SyncOnce(const SyncRequest& request, http::Client& client, Cancellation& cancellation) {
  const Source& source = request.source;
  const bool local = source.kind == Source::Kind::kLocal;
  std::optional<Marker> marker = ReadMarker(request.dest);
  if (marker && !StillIntact(request.dest, marker->content)) marker.reset();
  if (marker && !request.expected_sha256.empty() && marker->content.sha256 == request.expected_sha256 &&
      (local ? marker->content.file_name == source.path.filename().string()
             : marker->content.file_name == source.file_name)) {
    return SyncResult{marker->content, true};
  }
  if (local && marker) {
    // Reading is cheaper than copying and fsyncing: digest first when a copy may be unneeded.
    MF_ASSIGN_OR_RETURN(Content present, ReadLocalSource(source, nullptr, cancellation));
    MF_RETURN_IF_ERROR(CheckDigest(request, present));
    if (SameContent(present, marker->content)) return SyncResult{present, true};
  }
  if (local && !request.expected_sha256.empty() && fs::is_directory(source.path)) {
    return ShaWithDirectory(source);
  }

  MF_ASSIGN_OR_RETURN(Staging staging, Staging::Create(request.dest));
  MF_ASSIGN_OR_RETURN(Content content, local ? ReadLocalSource(source, &staging.path(), cancellation)
                                             : Download(source, staging.path(), client, cancellation));
  if (content.file_name == kMarkerName) {
    return InvalidArgument("source " + source.uri + " is named " + kMarkerName +
                           ", which modelfleet-sync writes itself; rename it");
  }
  MF_RETURN_IF_ERROR(CheckDigest(request, content));
  if (marker && SameContent(content, marker->content)) return SyncResult{content, true};
  MF_RETURN_IF_ERROR(staging.Publish(Marker{source.uri, content}));
  return SyncResult{content, false};
}

std::chrono::milliseconds BackoffDelay(const RetryPolicy& policy, int retry, double jitter) {
  const auto cap = std::max(policy.max_backoff, std::chrono::milliseconds(0));
  auto delay = std::max(policy.initial_backoff, std::chrono::milliseconds(0));
  for (int i = 1; i < retry && delay < cap; ++i) delay *= 2;
  delay = std::min(delay, cap);
  jitter = std::clamp(jitter, 0.0, 1.0);
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(delay.count()) * (0.5 + jitter / 2)));
}

Status RetryWithBackoff(const RetryPolicy& policy, Cancellation& cancellation,
                        const std::function<Status(int attempt)>& attempt) {
  std::mt19937_64 random(std::random_device{}());
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int attempts = std::max(1, policy.attempts);
  Status last;
  for (int n = 1; n <= attempts; ++n) {
    if (cancellation.cancelled()) return Cancelled("stopped before attempt " + std::to_string(n));
    last = attempt(n);
    if (last.ok() || last.code() == StatusCode::kInvalidArgument || last.code() == StatusCode::kCancelled) {
      return last;
    }
    if (n == attempts) break;
    auto delay = BackoffDelay(policy, n, unit(random));
    log::Warning("sync attempt failed; retrying", {{"attempt", std::to_string(n) + "/" + std::to_string(attempts)},
                                                   {"retry_in_ms", std::to_string(delay.count())},
                                                   {"error", last.ToString()}});
    if (cancellation.WaitFor(delay)) return Cancelled("stopped while waiting to retry after: " + last.message());
  }
  return Status(last.code(),
                last.message() + " (after " + std::to_string(attempts) + (attempts == 1 ? " attempt)" : " attempts)"));
}

}  // namespace mf::sync
