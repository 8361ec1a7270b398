#include "server/router/retry_policy.h"

namespace mf::router {

std::string_view AttemptFailureName(AttemptFailure failure) {
  switch (failure) {
    case AttemptFailure::kNotDelivered:
      return "not_delivered";
    case AttemptFailure::kNoResponse:
      return "no_response";
    case AttemptFailure::kTimeout:
      return "timeout";
    case AttemptFailure::kResponseStarted:
      return "response_started";
  }
  return "unknown";
}

std::string_view RetryDecisionName(RetryDecision decision) {
  switch (decision) {
    case RetryDecision::kGiveUp:
      return "give_up";
    case RetryDecision::kSameVersion:
      return "same_version";
    case RetryDecision::kOtherVersion:
      return "other_version";
    case RetryDecision::kWaitForEndpoints:
      return "wait_for_endpoints";
  }
  return "unknown";
}

RetryDecision DecideRetry(const RetryInputs& in) {
  if (in.deadline_passed || in.attempts >= kMaxAttempts) return RetryDecision::kGiveUp;
  switch (in.failure) {
    case AttemptFailure::kNotDelivered:
      break;
    case AttemptFailure::kNoResponse:
      if (!in.retry_safe || in.maybe_processed_retries > 0) return RetryDecision::kGiveUp;
      break;
    case AttemptFailure::kTimeout:
    case AttemptFailure::kResponseStarted:
      return RetryDecision::kGiveUp;
  }
  if (in.untried_in_version) return RetryDecision::kSameVersion;
  if (in.untried_elsewhere) return RetryDecision::kOtherVersion;
  return in.may_wait ? RetryDecision::kWaitForEndpoints : RetryDecision::kGiveUp;
}

}  // namespace mf::router
