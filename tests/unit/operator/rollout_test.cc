#include "rollout/rollout.h"

#include <gtest/gtest.h>

#include "test_objects.h"

namespace mf::op {
namespace {

ModelDeploymentSpec Md(const char* rollout, const char* extra = "{}") {
  auto obj = testing::SampleModelDeployment();
  obj["spec"]["rollout"] = Json::parse(rollout);
  obj["spec"].merge_patch(Json::parse(extra));
  auto md = ParseModelDeployment(obj);
  EXPECT_TRUE(md.ok()) << md.status().message();
  return *md;
}

constexpr const char* kSteps =
    R"({"steps": [{"percent": 10, "pauseSeconds": 60}, {"percent": 50, "pauseSeconds": 60}, {"percent": 100}],
        "analysis": {"intervalSeconds": 30, "minRequests": 100, "maxErrorRate": 0.01, "maxLatencyP99Ms": 250}})";

CanaryMetrics Good(int64_t requests = 500) { return {.known = true, .requests = requests, .errors = 0, .p99_ms = 20}; }

TEST(RolloutTest, AGoodCanaryWalksTheStepsAndIsPromoted) {
  const auto md = Md(kSteps);
  RolloutState s;
  struct Tick {
    int64_t at;
    int v2;
    const char* phase;
  };
  const Tick ticks[] = {{0, 10, "Progressing"},  {30, 10, "Progressing"},   {61, 50, "Progressing"},
                        {91, 50, "Progressing"}, {122, 100, "Progressing"}, {152, 100, "Promoted"},
                        {500, 100, "Promoted"}};  // the 100% step is judged too before promotion
  for (const auto& t : ticks) {
    auto d = StepRollout(md, s, true, Good(), t.at);
    EXPECT_EQ(d.weights["v2"], t.v2) << "at " << t.at << ": " << d.state.message;
    EXPECT_EQ(d.weights["v1"], 100 - t.v2);
    EXPECT_EQ(d.state.phase, t.phase) << "at " << t.at;
    s = RolloutState::FromStatus(d.state.ToStatus());  // as the next reconcile reads it back
  }
}

TEST(RolloutTest, AFailingCanaryIsRolledBack) {
  const auto md = Md(kSteps);
  RolloutState s = StepRollout(md, {}, true, Good(), 0).state;
  auto d = StepRollout(md, s, true, {.known = true, .requests = 400, .errors = 100, .p99_ms = 20}, 30);
  EXPECT_EQ(d.state.phase, "Aborted");
  EXPECT_EQ(d.state.abort_reason, "ErrorRate");
  EXPECT_EQ(d.weights["v1"], 100);
  EXPECT_EQ(d.weights["v2"], 0);
  EXPECT_EQ(d.event_reason, "RolledBack");
  EXPECT_TRUE(d.warning);
  EXPECT_NE(d.state.message.find("error rate 0.25"), std::string::npos) << d.state.message;
  // It stays rolled back; a new storageUri for the canary starts over.
  EXPECT_EQ(StepRollout(md, d.state, true, Good(), 1000).weights["v2"], 0);
  auto fixed = md;
  fixed.versions[1].storage_uri = "https://models.example/mnist/3/model.onnx";
  EXPECT_EQ(StepRollout(fixed, d.state, true, Good(), 1000).state.phase, "Progressing");
}

TEST(RolloutTest, ACanaryThatCannotServeIsRolledBack) {
  const auto md = Md(kSteps);
  RolloutState s = StepRollout(md, {}, false, {}, 0).state;
  auto d = StepRollout(md, s, false, {}, 20, "version 2 failed to load: INVALID_ARGUMENT: warm-up inference failed");
  EXPECT_EQ(d.state.phase, "Aborted");
  EXPECT_EQ(d.state.abort_reason, "CanaryFailed");
  EXPECT_EQ(d.weights["v2"], 0);
  EXPECT_NE(d.state.message.find("warm-up inference failed"), std::string::npos);
}

TEST(RolloutTest, SlowCanaryIsRolledBackOnLatency) {
  const auto md = Md(kSteps);
  RolloutState s = StepRollout(md, {}, true, Good(), 0).state;
  auto d = StepRollout(md, s, true, {.known = true, .requests = 400, .errors = 0, .p99_ms = 900}, 30);
  EXPECT_EQ(d.state.abort_reason, "LatencyP99");
}

TEST(RolloutTest, TooLittleTrafficIsInconclusiveAndNeverPassesSilently) {
  const auto md = Md(kSteps);
  RolloutState s = StepRollout(md, {}, true, Good(), 0).state;
  for (int64_t t : {30, 61, 300, 1000}) {
    auto d = StepRollout(md, s, true, Good(/*requests=*/12), t);
    EXPECT_EQ(d.weights["v2"], 10) << t;
    EXPECT_EQ(d.state.phase, "Progressing");
    EXPECT_NE(d.state.message.find("inconclusive: 12 requests"), std::string::npos) << d.state.message;
    s = d.state;
  }
  EXPECT_EQ(StepRollout(md, s, true, CanaryMetrics{}, 2000).state.message,
            "inconclusive: no measurements from the routers yet");
}

TEST(RolloutTest, AHandEditOfTrafficPausesTheSteps) {
  auto md = Md(kSteps);
  RolloutState s = StepRollout(md, {}, true, Good(), 0).state;
  md.traffic = {{"v1", 70}, {"v2", 30}};
  auto d = StepRollout(md, s, true, Good(), 100);
  EXPECT_EQ(d.state.phase, "Paused");
  EXPECT_EQ(d.weights, md.traffic);
  EXPECT_EQ(d.event_reason, "RolloutPaused");
  EXPECT_EQ(StepRollout(md, d.state, true, Good(), 500).weights, md.traffic);
  EXPECT_EQ(StepRollout(md, d.state, true, Good(), 500).event_reason, "");
}

TEST(RolloutTest, ACanaryThatIsNotReadyGetsNoStepTime) {
  const auto md = Md(kSteps);
  RolloutState s = StepRollout(md, {}, false, Good(), 0).state;
  s = StepRollout(md, s, false, Good(), 100).state;
  EXPECT_NE(s.message.find("waiting for canary v2"), std::string::npos);
  EXPECT_EQ(StepRollout(md, s, true, Good(), 120).weights["v2"], 10);  // the 60 s pause starts at 100
  EXPECT_EQ(StepRollout(md, s, true, Good(), 161).weights["v2"], 50);
}

TEST(RolloutTest, WithoutAnalysisOnlyThePausesCount) {
  const auto md = Md(R"({"steps": [{"percent": 20, "pauseSeconds": 10}, {"percent": 100}]})");
  RolloutState s = StepRollout(md, {}, true, CanaryMetrics{}, 0).state;
  EXPECT_EQ(StepRollout(md, s, true, CanaryMetrics{}, 5).weights["v2"], 20);
  s = StepRollout(md, s, true, CanaryMetrics{}, 10).state;
  EXPECT_EQ(s.step, 1);
  EXPECT_EQ(StepRollout(md, s, true, CanaryMetrics{}, 11).state.phase, "Promoted");
}

TEST(RolloutTest, MirroredAnswersAreComparedBeforeRealTrafficMoves) {
  const auto md = Md(R"({"steps": [{"percent": 10, "pauseSeconds": 0}, {"percent": 100}],
                         "analysis": {"minRequests": 50, "maxDisagreement": 0.05}})",
                     R"({"mirror": {"version": "v2", "percent": 100}})");
  RolloutState s = StepRollout(md, {}, true, {}, 0).state;
  EXPECT_EQ(s.step, -1);
  auto d = StepRollout(md, s, true, {.known = true, .mirrored = 10}, 5);
  EXPECT_EQ(d.weights["v2"], 0);
  EXPECT_NE(d.state.message.find("10 mirrored answers"), std::string::npos);
  d = StepRollout(md, s, true, {.known = true, .mirrored = 100, .disagreements = 2}, 10);
  EXPECT_EQ(d.state.step, 0);
  EXPECT_EQ(d.weights["v2"], 10);
  auto bad = StepRollout(md, s, true, {.known = true, .mirrored = 100, .disagreements = 30}, 10);
  EXPECT_EQ(bad.state.abort_reason, "Disagreement");
  EXPECT_EQ(bad.weights["v2"], 0);
}

TEST(RolloutTest, SpecValidation) {
  auto obj = testing::SampleModelDeployment();
  obj["spec"]["rollout"] = Json::parse(R"({"steps": [{"percent": 50}, {"percent": 10}]})");
  EXPECT_NE(ParseModelDeployment(obj).status().message().find("must not go down"), std::string::npos);
  obj["spec"]["rollout"] = Json::parse(R"({"steps": []})");
  EXPECT_FALSE(ParseModelDeployment(obj).ok());
  obj["spec"]["rollout"] = Json::parse(R"({"steps": [{"percent": 10}], "analysis": {"maxErrorRate": 2}})");
  EXPECT_FALSE(ParseModelDeployment(obj).ok());
}

}  // namespace
}  // namespace mf::op
