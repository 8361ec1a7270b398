// One model version sync, start to end: fetch the source into a staging directory, check its
// digest, publish it in place of the destination; or find the destination already holds it.
// SyncWithRetries() repeats failed attempts with exponential backoff, since a model is often
// still being uploaded when its pod starts.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

#include "common/status.h"
#include "http/client.h"
#include "server/sync/cancellation.h"
#include "server/sync/publish.h"
#include "server/sync/source_uri.h"

namespace mf::sync {

struct SyncRequest {
  Source source;
  std::filesystem::path dest;   // from ParseDestination
  std::string expected_sha256;  // lowercase hex, or empty
};

struct SyncResult {
  Content content;
  bool already_present = false;  // the destination held this content; nothing was copied
};

// One attempt. The destination counts as up to date when its marker records the same content:
// with --sha256 that digest (the source is not read at all), otherwise the digest of the source
// as read now. Errors: kInvalidArgument for what no retry can fix (--sha256 with a directory, a
// symlink leaving the source); kDataLoss for a digest mismatch; kCancelled on cancellation;
// others as the fetch reports them.
StatusOr<SyncResult> SyncOnce(const SyncRequest& request, http::Client& client, Cancellation& cancellation);

struct RetryPolicy {
  int attempts = 5;
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{30'000};
};

// The wait before retry number `retry` (1 for the first): initial_backoff doubled per retry and
// capped at max_backoff, then scaled into [half, all] of that by `jitter` in [0, 1), so sidecars
// started together do not retry in lockstep.
std::chrono::milliseconds BackoffDelay(const RetryPolicy& policy, int retry, double jitter);

// Calls `attempt` until it succeeds, fails with kInvalidArgument (a retry cannot help), the
// attempts run out (the last error is returned) or `cancellation` fires (kCancelled, at once
// also from inside a backoff wait).
Status RetryWithBackoff(const RetryPolicy& policy, Cancellation& cancellation,
                        const std::function<Status(int attempt)>& attempt);

}  // namespace mf::sync
