#include "autoscale/autoscaler.h"

#include <gtest/gtest.h>

namespace mf::op {
namespace {

AutoscalingSpec Spec() {
  AutoscalingSpec s;
  s.target_per_replica = 100;
  s.min_replicas = 1;
  s.max_replicas = 20;
  s.scale_down_stabilization_seconds = 300;
  return s;
}

struct Step {
  int64_t at_s;
  double qps;
  int32_t expected;
};

// Walks a load curve through time, feeding each decision back as the current size.
void Walk(const std::vector<Step>& steps, AutoscalingSpec spec = Spec(), int32_t start = 1) {
  std::deque<Recommendation> history;
  int32_t current = start;
  for (const auto& step : steps) {
    ScaleInput in{.spec = spec, .current = current, .load = step.qps, .load_known = true, .now_ms = step.at_s * 1000};
    const auto d = DecideReplicas(in, &history);
    EXPECT_EQ(d.desired, step.expected) << "at " << step.at_s << " s, qps " << step.qps << ": " << d.reason;
    current = d.desired;
  }
}

TEST(AutoscalerTest, ScalesUpAtOnceAndDownAfterTheWindow) {
  Walk({{0, 90, 1}, {1, 250, 3}, {2, 260, 3}, {10, 40, 3}, {200, 40, 3}, {301, 40, 3}, {311, 40, 1}});
}

TEST(AutoscalerTest, ToleranceBandHoldsTheSize) {
  // 3 replicas at 100/replica: 290..330 qps is within 10%.
  Walk({{0, 300, 3}, {1, 320, 3}, {2, 275, 3}, {3, 331, 4}}, Spec(), 3);
}

TEST(AutoscalerTest, ADoublingIsFollowedAtOnce) { Walk({{0, 200, 2}, {1, 400, 4}, {2, 800, 8}}, Spec(), 2); }

TEST(AutoscalerTest, MinAndMaxBound) {
  auto spec = Spec();
  spec.min_replicas = 2;
  spec.max_replicas = 5;
  Walk({{0, 0, 2}, {1, 10000, 5}}, spec, 2);
}

TEST(AutoscalerTest, NoFlappingUnderNoisySteadyLoad) {
  // Noisy load around 2.5 replicas' worth for 10 minutes: at most one change of direction.
  std::deque<Recommendation> history;
  int32_t current = 3;
  int changes = 0, last_direction = 0;
  for (int t = 0; t < 600; ++t) {
    const double qps = 250 + ((t * 37) % 61 - 30);  // 220..280
    ScaleInput in{.spec = Spec(), .current = current, .load = qps, .load_known = true, .now_ms = t * 1000};
    const int32_t next = DecideReplicas(in, &history).desired;
    const int direction = next > current ? 1 : next < current ? -1 : 0;
    if (direction && direction != last_direction) {
      ++changes;
      last_direction = direction;
    }
    current = next;
  }
  EXPECT_LE(changes, 1);
}

TEST(AutoscalerTest, ARestartedOperatorDoesNotScaleDownAtOnce) {
  std::deque<Recommendation> history;  // empty: the operator just started
  ScaleInput in{.spec = Spec(), .current = 5, .load = 10, .load_known = true, .now_ms = 1'000'000};
  EXPECT_EQ(DecideReplicas(in, &history).desired, 5);
}

TEST(AutoscalerTest, UnknownLoadHoldsAndConcurrencyReads) {
  std::deque<Recommendation> history;
  ScaleInput in{.spec = Spec(), .current = 4, .load = 0, .load_known = false, .now_ms = 0};
  const auto d = DecideReplicas(in, &history);
  EXPECT_EQ(d.desired, 4);
  EXPECT_NE(d.reason.find("no load measured"), std::string::npos);
  auto spec = Spec();
  spec.metric = "concurrency";
  spec.target_per_replica = 4;
  history.clear();
  const auto c = DecideReplicas({.spec = spec, .current = 1, .load = 10, .load_known = true, .now_ms = 0}, &history);
  EXPECT_EQ(c.desired, 3);
  EXPECT_NE(c.reason.find("in-flight requests 10.0"), std::string::npos) << c.reason;
}

}  // namespace
}  // namespace mf::op
