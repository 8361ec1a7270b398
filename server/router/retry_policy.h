// Whether a failed attempt is sent again, and where: a pure function of what happened to the
// attempt and what is left, so the REST and gRPC proxies share it and it is tested as a table
// (tests/unit/router/retry_policy_test.cc).
//
// - A request that never reached an upstream (connection refused or reset while connecting, a
//   connect timeout, an HTTP/2 stream the upstream refused or left above its GOAWAY) was not
//   processed: it is sent again whatever its method, to another endpoint. This is what a pod that
//   went away between the router's last endpoint update and the request looks like, and a request
//   must not fail for it while any other endpoint can serve.
// - A request that may have reached the upstream (the connection ended after it was written,
//   before any response byte) is sent again only when running it twice is harmless (retry_safe:
//   idempotent methods, inference) and only once per request, as Envoy's default of one retry: a
//   request that crashes its upstream must not take down every endpoint in turn.
// - Nothing else: a timeout (the request's time is spent), a response that started (the answer
//   exists), an error status (the upstream answered).
//
// The next attempt goes to an untried ready endpoint of the same version, else of another
// version by weight (FallbackVersion). Every attempt uses an endpoint not tried before, so the
// endpoints bound the attempts; kMaxAttempts bounds them too, for a version with many endpoints
// that all refuse (a stale endpoint list after a whole version went away).
//
// When a retry is allowed but no untried endpoint is left anywhere (the only pod of a version
// went away and its replacement is not in the router's endpoint list yet), the request waits for
// the list to change, in steps of kEndpointWaitStep up to kMaxEndpointWait within its deadline,
// rather than fail: the gap between a pod's end and the EndpointSlice update that announces its
// successor is short, and a client should not see it (Envoy's retry back-off picks from the
// host set as it is after the back-off, too).
#pragma once

#include <chrono>
#include <string_view>

namespace mf::router {

// How an attempt failed, as far as retrying is concerned.
enum class AttemptFailure {
  kNotDelivered,     // the upstream never received the request
  kNoResponse,       // it may have received it; the connection ended before any response byte
  kTimeout,          // the request's deadline passed
  kResponseStarted,  // response bytes arrived (then the response broke off or was malformed)
};
std::string_view AttemptFailureName(AttemptFailure failure);

inline constexpr int kMaxAttempts = 5;
inline constexpr std::chrono::milliseconds kEndpointWaitStep{100};
inline constexpr std::chrono::milliseconds kMaxEndpointWait{3'000};

struct RetryInputs {
  AttemptFailure failure = AttemptFailure::kNotDelivered;
  bool retry_safe = false;          // the request may run twice (IsRetrySafe / IsRetrySafeGrpc)
  int attempts = 1;                 // attempts made so far, the failed one included
  int maybe_processed_retries = 0;  // retries already made after a kNoResponse failure
  bool deadline_passed = false;
  bool untried_in_version = false;  // the failed attempt's version has an untried ready endpoint
  bool untried_elsewhere = false;   // another version has one
  bool may_wait = false;            // the request has waited less than kMaxEndpointWait so far
};

// kWaitForEndpoints: nothing is left to try now; decide again after kEndpointWaitStep over the
// endpoint list as it is then.
enum class RetryDecision { kGiveUp, kSameVersion, kOtherVersion, kWaitForEndpoints };
std::string_view RetryDecisionName(RetryDecision decision);

RetryDecision DecideRetry(const RetryInputs& in);

}  // namespace mf::router
