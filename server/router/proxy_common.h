// What the REST and gRPC proxies share: per-thread random numbers, which requests may be sent
// twice, endpoint picking over a snapshot with ejection and exclusion, the outcome bookkeeping
// of one attempt (outstanding counts, outlier detection, metrics) and the comparison of a
// mirrored request's two answers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/router/endpoint.h"
#include "server/router/retry_policy.h"
#include "server/router/router_metrics.h"
#include "server/router/snapshot.h"

namespace mf::router {

// A fast per-thread generator (splitmix64), seeded from std::random_device.
uint64_t RandomBits();

// True for requests that may be sent again after the connection failed before any response
// byte: the idempotent methods (RFC 9110 9.2.2) and inference calls. Inference is a pure
// function of the request (TF Serving :predict/:classify/:regress, KServe v2 /infer): running it
// twice has no side effect beyond the compute, so a POST to it is safe to retry.
bool IsRetrySafe(std::string_view method, std::string_view path);

// True for gRPC methods that only read or infer (all of PredictionService, GRPCInferenceService
// and health): safe to retry before any response byte.
bool IsRetrySafeGrpc(std::string_view path);

// Picks an endpoint of `endpoints` by least outstanding requests (power of two choices),
// skipping `tried` ones, those with `max_outstanding` requests in flight (0: no limit) and
// ejected ones; when every other untried endpoint is ejected they are used anyway (better a
// suspect endpoint than none, as Envoy's panic threshold). Null when none is left.
std::shared_ptr<Endpoint> ChooseEndpoint(const std::vector<std::shared_ptr<Endpoint>>& endpoints,
                                         std::span<const std::shared_ptr<Endpoint>> tried, Clock::time_point now,
                                         int max_outstanding);

// The error when a version's endpoints are all tried or at their request limit.
std::string NoEndpointLeftMessage(const Snapshot& snapshot, int version, bool grpc, int max_outstanding);

// For a retry: the version to try after `failed_version`'s endpoints are exhausted, by weights
// among the other versions with an endpoint not yet tried; -1 when none. `failed_version` may be
// -1 (the version is no longer in the snapshot).
int FallbackVersion(const Snapshot& snapshot, int failed_version, bool grpc,
                    std::span<const std::shared_ptr<Endpoint>> tried);

// " (after a retry: ERRORS)" / " (after 2 retries: ERRORS)" for an error message, then
// " (waited N ms for another endpoint)" when the request waited for the endpoint list; "" for none.
std::string RetriedNote(size_t retries, const std::string& earlier_errors,
                        std::chrono::milliseconds waited = std::chrono::milliseconds(0));

// Where a failed attempt goes next. Decided over `latest`, the newest snapshot rather than the
// one the request started with: an endpoint that turned terminating or not ready since then is
// no longer in it, nor is a version that was removed. `inputs` says how the attempt failed; the
// untried_* fields are filled in here. The plan's version indexes `snapshot` (set only for the
// decisions that make another attempt).
struct RetryPlan {
  RetryDecision decision = RetryDecision::kGiveUp;
  std::shared_ptr<const Snapshot> snapshot;
  int version = -1;
};
RetryPlan PlanRetry(RetryInputs inputs, std::shared_ptr<const Snapshot> latest, std::string_view failed_version,
                    bool grpc, std::span<const std::shared_ptr<Endpoint>> tried);

// A mirrored request's two answers (status and body), compared by `agree` when the second one
// arrives, whichever it is; a disagreement counts in the mirror version's metrics. Thread-safe.
class MirrorPair {
 public:
  using Agree = std::function<bool(int primary_status, std::string_view primary_body, int mirror_status,
                                   std::string_view mirror_body)>;
  MirrorPair(VersionMetrics* mirror_metrics, std::string mirror_version, Agree agree)
      : metrics_(mirror_metrics), version_(std::move(mirror_version)), agree_(std::move(agree)) {}

  void Offer(bool is_primary, int status, std::string body);

 private:
  std::mutex mu_;
  std::optional<std::pair<int, std::string>> primary_, mirror_;
  VersionMetrics* const metrics_;
  const std::string version_;
  const Agree agree_;
};

}  // namespace mf::router
