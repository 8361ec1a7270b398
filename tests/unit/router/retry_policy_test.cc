// The retry decision as a table (what failed, how safe the request is, what was tried, what is
// left), and retry planning over the newest snapshot: endpoints that turned terminating since the
// request started get no retry, a removed version's request falls back to the others.
#include "server/router/retry_policy.h"

#include <gtest/gtest.h>

#include "server/router/proxy_common.h"

namespace mf::router {
namespace {

using F = AttemptFailure;
using D = RetryDecision;

struct Row {
  const char* what;
  RetryInputs in;
  RetryDecision want;
};

TEST(DecideRetry, Table) {
  const Row rows[] = {
      // Never delivered: always retried, whatever the method, while an endpoint is left.
      {"refused, another endpoint of the version",
       {.failure = F::kNotDelivered, .untried_in_version = true, .untried_elsewhere = true},
       D::kSameVersion},
      {"refused, only other versions left",
       {.failure = F::kNotDelivered, .untried_in_version = false, .untried_elsewhere = true},
       D::kOtherVersion},
      {"refused, nothing left", {.failure = F::kNotDelivered}, D::kGiveUp},
      {"refused, nothing left yet, may wait for the endpoint list",
       {.failure = F::kNotDelivered, .may_wait = true},
       D::kWaitForEndpoints},
      {"refused, may wait, but an endpoint is left",
       {.failure = F::kNotDelivered, .untried_elsewhere = true, .may_wait = true},
       D::kOtherVersion},
      {"refused, may wait, attempts exhausted",
       {.failure = F::kNotDelivered, .attempts = kMaxAttempts, .may_wait = true},
       D::kGiveUp},
      {"refused, may wait, past the deadline",
       {.failure = F::kNotDelivered, .deadline_passed = true, .may_wait = true},
       D::kGiveUp},
      {"refused, a POST that must not run twice still retried",
       {.failure = F::kNotDelivered, .retry_safe = false, .untried_in_version = true},
       D::kSameVersion},
      {"refused twice (two pods gone), a third endpoint left",
       {.failure = F::kNotDelivered, .attempts = 2, .untried_in_version = true},
       D::kSameVersion},
      {"refused after a no-response retry",
       {.failure = F::kNotDelivered, .attempts = 2, .maybe_processed_retries = 1, .untried_elsewhere = true},
       D::kOtherVersion},
      {"refused, attempts exhausted",
       {.failure = F::kNotDelivered, .attempts = kMaxAttempts, .untried_in_version = true},
       D::kGiveUp},
      {"refused, one attempt below the cap",
       {.failure = F::kNotDelivered, .attempts = kMaxAttempts - 1, .untried_in_version = true},
       D::kSameVersion},
      {"refused past the deadline",
       {.failure = F::kNotDelivered, .deadline_passed = true, .untried_in_version = true},
       D::kGiveUp},
      // Maybe processed: once, and only when running twice is harmless.
      {"no response, inference",
       {.failure = F::kNoResponse, .retry_safe = true, .untried_in_version = true},
       D::kSameVersion},
      {"no response, inference, other version",
       {.failure = F::kNoResponse, .retry_safe = true, .untried_elsewhere = true},
       D::kOtherVersion},
      {"no response, not retry safe",
       {.failure = F::kNoResponse, .retry_safe = false, .untried_in_version = true},
       D::kGiveUp},
      {"no response a second time",
       {.failure = F::kNoResponse,
        .retry_safe = true,
        .attempts = 2,
        .maybe_processed_retries = 1,
        .untried_in_version = true},
       D::kGiveUp},
      {"no response after a refused attempt",
       {.failure = F::kNoResponse, .retry_safe = true, .attempts = 2, .untried_in_version = true},
       D::kSameVersion},
      {"no response, nothing left", {.failure = F::kNoResponse, .retry_safe = true}, D::kGiveUp},
      {"no response, inference, nothing left yet",
       {.failure = F::kNoResponse, .retry_safe = true, .may_wait = true},
       D::kWaitForEndpoints},
      {"no response, not retry safe, never waits",
       {.failure = F::kNoResponse, .retry_safe = false, .may_wait = true},
       D::kGiveUp},
      // Never retried.
      {"timeout", {.failure = F::kTimeout, .retry_safe = true, .untried_in_version = true}, D::kGiveUp},
      {"timeout, never waits", {.failure = F::kTimeout, .retry_safe = true, .may_wait = true}, D::kGiveUp},
      {"response started",
       {.failure = F::kResponseStarted, .retry_safe = true, .untried_in_version = true},
       D::kGiveUp},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(RetryDecisionName(DecideRetry(row.in)), RetryDecisionName(row.want))
        << row.what << " (" << AttemptFailureName(row.in.failure) << ")";
  }
}

// Static-mode snapshots: every listed endpoint is ready.
std::shared_ptr<const Snapshot> Build(EndpointRegistry& registry, std::vector<VersionConfig> versions,
                                      uint64_t generation) {
  RouterConfig config;
  config.model = "m";
  config.versions = std::move(versions);
  return BuildSnapshot(config, nullptr, generation, registry, nullptr);
}

std::vector<std::shared_ptr<Endpoint>> Tried(const Snapshot& snapshot, int version, std::vector<int> indexes) {
  std::vector<std::shared_ptr<Endpoint>> tried;
  for (int i : indexes) tried.push_back(snapshot.versions[version].rest[i]);
  return tried;
}

TEST(PlanRetry, AnotherEndpointOfTheSameVersion) {
  EndpointRegistry registry;
  auto snapshot = Build(registry,
                        {{.name = "v1", .weight = 90, .endpoints = {"10.0.0.1:8501", "10.0.0.2:8501"}},
                         {.name = "v2", .weight = 10, .endpoints = {"10.0.0.3:8501"}}},
                        1);
  auto tried = Tried(*snapshot, 0, {0});
  for (int i = 0; i < 50; ++i) {
    RetryPlan plan = PlanRetry({.failure = F::kNotDelivered}, snapshot, "v1", false, tried);
    ASSERT_EQ(plan.decision, D::kSameVersion);
    EXPECT_EQ(plan.version, 0);
    EXPECT_EQ(plan.snapshot, snapshot);
    EXPECT_EQ(ChooseEndpoint(plan.snapshot->versions[0].rest, tried, Clock::now(), 0)->address(), "10.0.0.2:8501");
  }
}

TEST(PlanRetry, TheNewestSnapshotLeavesOutEndpointsThatWentAway) {
  EndpointRegistry registry;
  auto routed = Build(registry,
                      {{.name = "v1", .weight = 90, .endpoints = {"10.0.0.1:8501", "10.0.0.2:8501"}},
                       {.name = "v2", .weight = 10, .endpoints = {"10.0.0.3:8501"}}},
                      1);
  // Both v1 pods were replaced while the request was in flight: the request's snapshot still
  // lists 10.0.0.2, the newest one lists only the new pod.
  auto latest = Build(registry,
                      {{.name = "v1", .weight = 90, .endpoints = {"10.0.0.9:8501"}},
                       {.name = "v2", .weight = 10, .endpoints = {"10.0.0.3:8501"}}},
                      2);
  auto tried = Tried(*routed, 0, {0});
  RetryPlan plan = PlanRetry({.failure = F::kNotDelivered}, latest, "v1", false, tried);
  ASSERT_EQ(plan.decision, D::kSameVersion);
  EXPECT_EQ(plan.snapshot, latest);
  EXPECT_EQ(ChooseEndpoint(plan.snapshot->versions[plan.version].rest, tried, Clock::now(), 0)->address(),
            "10.0.0.9:8501");
}

TEST(PlanRetry, ARemovedVersionFallsBackToTheOthers) {
  EndpointRegistry registry;
  auto routed = Build(registry,
                      {{.name = "v1", .weight = 90, .endpoints = {"10.0.0.1:8501"}},
                       {.name = "v2", .weight = 10, .endpoints = {"10.0.0.3:8501"}}},
                      1);
  auto latest = Build(registry, {{.name = "v1", .weight = 100, .endpoints = {"10.0.0.1:8501"}}}, 2);
  auto tried = Tried(*routed, 1, {0});
  RetryPlan plan = PlanRetry({.failure = F::kNotDelivered}, latest, "v2", false, tried);
  ASSERT_EQ(plan.decision, D::kOtherVersion);
  EXPECT_EQ(plan.version, 0);
  EXPECT_EQ(plan.snapshot->versions[0].name, "v1");
}

TEST(PlanRetry, TheLastEndpointOfAVersionFallsBackByWeight) {
  EndpointRegistry registry;
  auto snapshot = Build(registry,
                        {{.name = "v1", .weight = 90, .endpoints = {"10.0.0.1:8501"}},
                         {.name = "v2", .weight = 0, .endpoints = {"10.0.0.2:8501"}},
                         {.name = "v3", .weight = 10, .endpoints = {"10.0.0.3:8501"}}},
                        1);
  auto tried = Tried(*snapshot, 0, {0});
  for (int i = 0; i < 50; ++i) {
    RetryPlan plan = PlanRetry({.failure = F::kNotDelivered}, snapshot, "v1", false, tried);
    ASSERT_EQ(plan.decision, D::kOtherVersion);
    EXPECT_EQ(plan.version, 2);  // v2 has weight 0 while v3 is ready
  }
  // Once v3 failed too, the zero-weight version serves rather than the request failing.
  tried.push_back(snapshot->versions[2].rest[0]);
  RetryPlan plan = PlanRetry({.failure = F::kNotDelivered, .attempts = 2}, snapshot, "v1", false, tried);
  ASSERT_EQ(plan.decision, D::kOtherVersion);
  EXPECT_EQ(plan.version, 1);
}

TEST(PlanRetry, NothingLeftOrNotSafeGivesUp) {
  EndpointRegistry registry;
  auto snapshot = Build(registry, {{.name = "v1", .weight = 100, .endpoints = {"10.0.0.1:8501", "10.0.0.2:8501"}}}, 1);
  auto all = Tried(*snapshot, 0, {0, 1});
  EXPECT_EQ(PlanRetry({.failure = F::kNotDelivered, .attempts = 2}, snapshot, "v1", false, all).decision, D::kGiveUp);
  auto one = Tried(*snapshot, 0, {0});
  EXPECT_EQ(PlanRetry({.failure = F::kNoResponse, .retry_safe = false}, snapshot, "v1", false, one).decision,
            D::kGiveUp);
  EXPECT_EQ(PlanRetry({.failure = F::kNotDelivered}, nullptr, "v1", false, one).decision, D::kGiveUp);
}

TEST(PlanRetry, TheOnlyEndpointGoneWaitsForItsSuccessor) {
  // The version's one pod refused; the router's list has nothing else yet. The request waits,
  // and the list that announces the replacement pod gets the retry.
  EndpointRegistry registry;
  auto before = Build(registry, {{.name = "v1", .weight = 100, .endpoints = {"10.0.0.1:8501"}}}, 1);
  auto tried = Tried(*before, 0, {0});
  RetryPlan wait = PlanRetry({.failure = F::kNotDelivered, .may_wait = true}, before, "v1", false, tried);
  EXPECT_EQ(wait.decision, D::kWaitForEndpoints);
  EXPECT_EQ(wait.snapshot, nullptr);
  auto after = Build(registry, {{.name = "v1", .weight = 100, .endpoints = {"10.0.0.1:8501", "10.0.0.9:8501"}}}, 2);
  RetryPlan retry = PlanRetry({.failure = F::kNotDelivered, .may_wait = true}, after, "v1", false, tried);
  ASSERT_EQ(retry.decision, D::kSameVersion);
  EXPECT_EQ(ChooseEndpoint(retry.snapshot->versions[retry.version].rest, tried, Clock::now(), 0)->address(),
            "10.0.0.9:8501");
}

TEST(PlanRetry, GrpcUsesTheGrpcEndpoints) {
  EndpointRegistry registry;
  auto snapshot = Build(registry,
                        {{.name = "v1",
                          .weight = 100,
                          .endpoints = {"10.0.0.1:8501", "10.0.0.2:8501"},
                          .grpc_endpoints = {"10.0.0.1:8500"}}},
                        1);
  std::vector<std::shared_ptr<Endpoint>> tried = {snapshot->versions[0].grpc[0]};
  // Two REST endpoints, but the only gRPC one failed.
  EXPECT_EQ(PlanRetry({.failure = F::kNotDelivered}, snapshot, "v1", true, tried).decision, D::kGiveUp);
}

TEST(RetriedNote, SaysHowManyRetriesAndWhy) {
  EXPECT_EQ(RetriedNote(0, ""), "");
  EXPECT_EQ(RetriedNote(1, "refused"), " (after a retry: refused)");
  EXPECT_EQ(RetriedNote(2, "a; b"), " (after 2 retries: a; b)");
  EXPECT_EQ(RetriedNote(0, "", std::chrono::milliseconds(3000)), " (waited 3000 ms for another endpoint)");
  EXPECT_EQ(RetriedNote(1, "refused", std::chrono::milliseconds(200)),
            " (after a retry: refused) (waited 200 ms for another endpoint)");
}

}  // namespace
}  // namespace mf::router
