// Downloading an http:// or https:// source (one file) with our HTTP client: redirects followed
// (up to kMaxRedirects, never from https to http), the body streamed to disk while it is hashed,
// the size bounded by kMaxDownloadBytes, connects and stalls bounded by the client's timeouts.
#pragma once

#include <cstdint>
#include <filesystem>

#include "common/status.h"
#include "http/client.h"
#include "server/sync/cancellation.h"
#include "server/sync/publish.h"
#include "server/sync/source_uri.h"

namespace mf::sync {

inline constexpr int kMaxRedirects = 5;
inline constexpr uint64_t kMaxDownloadBytes = uint64_t{64} << 30;  // 64 GiB: beyond any single ONNX file

// Timeouts for a sidecar: 10 s to connect, 60 s of silence mid-body; error bodies cut at 64 KiB.
http::ClientOptions DownloadClientOptions();

// GETs `source` (Kind::kHttp) into `staging`/<file_name>, fsynced. A non-2xx answer is an error
// naming the URL and status (404: kNotFound); a body cut short or over the bound, too.
StatusOr<Content> Download(const Source& source, const std::filesystem::path& staging, http::Client& client,
                           Cancellation& cancellation);

}  // namespace mf::sync
