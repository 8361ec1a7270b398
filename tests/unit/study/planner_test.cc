#include "trainingjob/study/planner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace mf::op::study {
namespace {

constexpr const char* kNow = "2026-11-27T02:00:00Z";

StudySpec Study(const char* extra = "{}") {
  Json h = Json::parse(R"({"goal": "MAXIMIZE", "metricTag": "accuracy", "maxTrials": 6, "maxParallelTrials": 2,
      "params": [{"name": "lr", "type": "DOUBLE", "min": 0.001, "max": 1, "scaleType": "UNIT_LOG_SCALE"},
                 {"name": "opt", "type": "CATEGORICAL", "values": ["sgd", "adam"]}]})");
  h.merge_patch(Json::parse(extra));
  auto spec = ParseStudySpec(h);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return *spec;
}

// The trials as the next reconcile reads them back from status.
std::vector<Trial> RoundTrip(const std::vector<Trial>& trials) {
  Json status = Json::array();
  for (const auto& t : trials) status.push_back(t.ToStatus());
  std::vector<Trial> back;
  for (const auto& t : Json::parse(status.dump())) back.push_back(Trial::FromStatus(t));
  return back;
}

Trial Finished(const std::string& name, double metric, std::vector<double> curve = {}) {
  Trial t;
  t.name = name;
  t.parameters = {{"lr", 0.01}, {"opt", "sgd"}};
  t.phase = TrialPhase::kSucceeded;
  t.metric = metric;
  t.intermediate = std::move(curve);
  return t;
}

TEST(ParseMetricsTest, TakesTheTagFromMarkedLines) {
  const std::string log =
      "epoch 1\n"
      "modelfleet-metric accuracy=0.5\n"
      "INFO:root:modelfleet-metric loss=0.9 accuracy=0.75\r\n"
      "modelfleet-metric accuracy=nan\n"       // not a number: ignored
      "modelfleet-metric accuracy=0.8x\n"      // trailing junk: ignored
      "modelfleet-metricaccuracy=0.99\n"       // no separator: not the marker
      "modelfleet-metric val_accuracy=0.99\n"  // another tag
      "accuracy=0.98\n"                        // unmarked
      "modelfleet-metric  accuracy=-1e-3";     // last line, no newline
  EXPECT_EQ(ParseMetrics(log, "accuracy"), (std::vector<double>{0.5, 0.75, -0.001}));
  EXPECT_EQ(ParseMetrics(log, "loss"), (std::vector<double>{0.9}));
  EXPECT_TRUE(ParseMetrics("", "accuracy").empty());
  EXPECT_TRUE(ParseMetrics("modelfleet-metric", "accuracy").empty());
  EXPECT_TRUE(ParseMetrics("modelfleet-metric accuracy=", "accuracy").empty());
  // A metrics file may hold bare tag=value lines.
  EXPECT_EQ(ParseMetrics("accuracy=0.7\nmodelfleet-metric accuracy=0.9\n", "accuracy", true),
            (std::vector<double>{0.7, 0.9}));
}

TEST(ObserveTrialTest, FoldsTheChildJobIntoTheRecord) {
  const StudySpec spec = Study(R"({"enableTrialEarlyStopping": true})");
  Trial pending;
  pending.name = "s-trial-1";
  pending.parameters = {{"lr", 0.01}, {"opt", "sgd"}};
  Trial running = pending;
  running.phase = TrialPhase::kRunning;
  running.start_time = "2026-11-27T01:00:00Z";

  struct Case {
    const char* what;
    Trial before;
    TrialObservation observed;
    TrialPhase phase;
    std::optional<double> metric;
    const char* reason;
    const char* message;  // substring
  };
  const std::string log = "modelfleet-metric accuracy=0.6\nmodelfleet-metric accuracy=0.7\n";
  const Case cases[] = {
      {"not created yet", pending, {}, TrialPhase::kPending, std::nullopt, "", ""},
      {"created", pending, {.exists = true}, TrialPhase::kRunning, std::nullopt, "", ""},
      {"reporting", running, {.exists = true, .chief_pod = "p", .log = log}, TrialPhase::kRunning, 0.7, "", ""},
      {"succeeded, metric in the log",
       running,
       {.exists = true, .state = "Succeeded", .chief_pod = "p", .log = log},
       TrialPhase::kSucceeded,
       0.7,
       "",
       ""},
      {"succeeded, metrics file wins",
       running,
       {.exists = true, .state = "Succeeded", .chief_pod = "p", .log = log, .metrics_file = "accuracy=0.91\n"},
       TrialPhase::kSucceeded,
       0.91,
       "",
       ""},
      {"succeeded, file without the tag falls back to the log",
       running,
       {.exists = true, .state = "Succeeded", .chief_pod = "p", .log = log, .metrics_file = "loss=0.2\n"},
       TrialPhase::kSucceeded,
       0.7,
       "",
       ""},
      {"succeeded without a metric",
       running,
       {.exists = true, .state = "Succeeded", .chief_pod = "s-trial-1-chief-0", .log = "done\n", .metrics_file = ""},
       TrialPhase::kFailed,
       std::nullopt,
       "MetricNotReported",
       "the log of pod s-trial-1-chief-0 has no line 'modelfleet-metric accuracy=<number>'; its "
       "MODELFLEET_METRICS_FILE (termination message) has no accuracy=<number> line"},
      {"succeeded, log unreadable",
       running,
       {.exists = true, .state = "Succeeded", .chief_pod = "s-trial-1-chief-0", .log_error = "pod not found"},
       TrialPhase::kFailed,
       std::nullopt,
       "MetricUnreadable",
       "could not be read (pod not found)"},
      {"failed",
       running,
       {.exists = true, .state = "Failed", .reason = "BackoffLimitExceeded", .message = "worker 0 exited 1"},
       TrialPhase::kFailed,
       std::nullopt,
       "TrialFailed",
       "TrainingJob s-trial-1 failed (BackoffLimitExceeded): worker 0 exited 1"},
      {"deleted while running", running, {}, TrialPhase::kFailed, std::nullopt, "TrialDeleted", "was deleted"},
      {"terminal records never change",
       Finished("s-trial-1", 0.5),
       {.exists = true, .state = "Failed"},
       TrialPhase::kSucceeded,
       0.5,
       "",
       ""},
  };
  for (const auto& c : cases) {
    const Trial after = ObserveTrial(spec, c.before, c.observed, kNow);
    EXPECT_EQ(after.phase, c.phase) << c.what;
    EXPECT_EQ(after.metric, c.metric) << c.what;
    EXPECT_EQ(after.reason, c.reason) << c.what;
    EXPECT_NE(after.message.find(c.message), std::string::npos) << c.what << ": " << after.message;
    EXPECT_EQ(after.parameters, c.before.parameters) << c.what;
  }
  // With early stopping the curve is kept (bounded).
  std::string long_log;
  for (int i = 0; i < 80; ++i) long_log += "modelfleet-metric accuracy=" + std::to_string(i) + "\n";
  const Trial curve = ObserveTrial(spec, running, {.exists = true, .log = long_log}, kNow);
  EXPECT_EQ(curve.intermediate.size(), kMaxIntermediateMetrics);
  EXPECT_EQ(curve.metric, 79);
  EXPECT_TRUE(ObserveTrial(Study(), running, {.exists = true, .log = long_log}, kNow).intermediate.empty());
}

TEST(PlanStudyTest, SixTrialsTwoAtATimeThenTheBest) {
  const StudySpec spec = Study(R"({"algorithm": "random"})");
  std::vector<Trial> trials;
  size_t max_active = 0;
  for (int round = 0; round < 20; ++round) {
    StudyPlan plan = PlanStudy(spec, RoundTrip(trials), 42, "s", kNow);
    size_t active = 0;
    for (const auto& t : plan.trials) active += t.Active();
    max_active = std::max(max_active, active);
    EXPECT_LE(active, 2u);
    if (plan.finished) {
      EXPECT_EQ(plan.trials.size(), 6u);
      EXPECT_EQ(plan.finish_reason, "MaxTrialsReached");
      EXPECT_FALSE(plan.failed);
      ASSERT_TRUE(plan.best.has_value());
      // The metric below is largest for the smallest learning rate.
      double best_lr = 1;
      for (const auto& t : plan.trials) best_lr = std::min(best_lr, t.parameters["lr"].get<double>());
      EXPECT_EQ(plan.trials[*plan.best].parameters["lr"].get<double>(), best_lr);
      const Json best = BestTrialStatus(plan);
      EXPECT_EQ(best["name"], plan.trials[*plan.best].name);
      EXPECT_EQ(best["metric"].get<double>(), -best_lr);
      EXPECT_EQ(plan.summary, "6/6 done, best accuracy=" + FormatValue(Json(-best_lr)));
      EXPECT_EQ(max_active, 2u);
      return;
    }
    // The cluster: each running trial finishes with accuracy = -lr; new ones start.
    trials = plan.trials;
    for (auto& t : trials) {
      TrialObservation seen{.exists = true};
      if (t.phase == TrialPhase::kRunning) {
        seen.state = "Succeeded";
        seen.log = "modelfleet-metric accuracy=" + FormatValue(Json(-t.parameters["lr"].get<double>())) + "\n";
      }
      t = ObserveTrial(spec, t, seen, kNow);
    }
  }
  FAIL() << "the study never finished";
}

TEST(PlanStudyTest, RecordedTrialsAreNotProposedAgainAfterARestart) {
  const StudySpec spec = Study(R"({"algorithm": "bayesian"})");
  const StudyPlan first = PlanStudy(spec, {}, 7, "s", kNow);
  ASSERT_EQ(first.trials.size(), 2u);
  EXPECT_EQ(first.trials[0].name, "s-trial-1");
  EXPECT_EQ(first.trials[1].name, "s-trial-2");
  EXPECT_EQ(first.trials[0].phase, TrialPhase::kPending);
  EXPECT_EQ(first.summary, "0/6 done, 2 running");
  // A restarted operator reads them back (children maybe never created): the same two, nothing new.
  const StudyPlan again = PlanStudy(spec, RoundTrip(first.trials), 7, "s", kNow);
  ASSERT_EQ(again.trials.size(), 2u);
  EXPECT_EQ(again.trials[0].ToStatus(), first.trials[0].ToStatus());
  EXPECT_EQ(again.trials[1].ToStatus(), first.trials[1].ToStatus());
  // The same seed gives the same choices; another seed other ones.
  EXPECT_EQ(PlanStudy(spec, {}, 7, "s", kNow).trials[1].parameters, first.trials[1].parameters);
  EXPECT_NE(PlanStudy(spec, {}, 8, "s", kNow).trials[1].parameters, first.trials[1].parameters);
}

TEST(PlanStudyTest, RaisingMaxTrialsExtendsAFinishedStudy) {
  std::vector<Trial> trials = {Finished("s-trial-1", 0.5), Finished("s-trial-2", 0.9)};
  const StudyPlan done = PlanStudy(Study(R"({"maxTrials": 2})"), trials, 1, "s", kNow);
  EXPECT_TRUE(done.finished);
  EXPECT_EQ(done.trials.size(), 2u);
  EXPECT_NE(done.finish_message.find("best: s-trial-2 with accuracy=0.9"), std::string::npos) << done.finish_message;
  const StudyPlan more = PlanStudy(Study(R"({"maxTrials": 5})"), trials, 1, "s", kNow);
  EXPECT_FALSE(more.finished);
  ASSERT_EQ(more.trials.size(), 4u);
  EXPECT_EQ(more.trials[2].name, "s-trial-3");
  EXPECT_EQ(more.trials[3].phase, TrialPhase::kPending);
  EXPECT_EQ(*more.best, 1u);
}

TEST(PlanStudyTest, GridStopsWhenEveryPointWasTried) {
  const StudySpec spec = Study(R"({"algorithm": "grid", "maxTrials": 50, "maxParallelTrials": 10,
      "params": [{"name": "n", "type": "INTEGER", "min": 1, "max": 2},
                 {"name": "opt", "type": "CATEGORICAL", "values": ["sgd", "adam"]}]})");
  StudyPlan plan = PlanStudy(spec, {}, 1, "g", kNow);
  ASSERT_EQ(plan.trials.size(), 4u);
  std::set<std::string> points;
  for (auto& t : plan.trials) {
    points.insert(t.parameters.dump());
    t.phase = TrialPhase::kSucceeded;
    t.metric = t.parameters["n"].get<double>();
  }
  EXPECT_EQ(points.size(), 4u);
  plan = PlanStudy(spec, plan.trials, 1, "g", kNow);
  EXPECT_TRUE(plan.finished);
  EXPECT_EQ(plan.finish_reason, "GridExhausted");
  EXPECT_EQ(plan.summary.substr(0, 8), "4/4 done");
}

TEST(PlanStudyTest, GivesUpWhenTrialsKeepFailing) {
  auto failed = [](int i) {
    Trial t = Finished("s-trial-" + std::to_string(i), 0);
    t.phase = TrialPhase::kFailed;
    t.metric.reset();
    return t;
  };
  // Default: the first three trials all failed and none measured anything.
  StudyPlan plan = PlanStudy(Study(), {failed(1), failed(2), failed(3)}, 1, "s", kNow);
  EXPECT_TRUE(plan.finished);
  EXPECT_TRUE(plan.failed);
  EXPECT_EQ(plan.finish_reason, "TooManyFailedTrials");
  EXPECT_EQ(plan.trials.size(), 3u);
  // One success keeps it going.
  plan = PlanStudy(Study(), {failed(1), failed(2), Finished("s-trial-3", 0.4)}, 1, "s", kNow);
  EXPECT_FALSE(plan.finished);
  EXPECT_EQ(plan.trials.size(), 5u);
  // An explicit maxFailedTrials.
  plan =
      PlanStudy(Study(R"({"maxFailedTrials": 2})"), {failed(1), Finished("s-trial-2", 0.4), failed(3)}, 1, "s", kNow);
  EXPECT_TRUE(plan.finished);
  EXPECT_FALSE(plan.failed);  // it has a best trial
  EXPECT_NE(plan.finish_message.find("maxFailedTrials 2"), std::string::npos) << plan.finish_message;
}

TEST(PlanStudyTest, TrialsOfAnEarlierSpaceAreKeptAndIgnoredByTheModel) {
  // The study's params changed: old trials stay in status and still count toward maxTrials.
  Trial old = Finished("s-trial-1", 0.99);
  old.parameters = {{"momentum", 0.5}};
  const StudyPlan plan = PlanStudy(Study(R"({"algorithm": "bayesian", "maxTrials": 3})"), {old}, 1, "s", kNow);
  ASSERT_EQ(plan.trials.size(), 3u);
  EXPECT_EQ(plan.trials[0].parameters, old.parameters);
  EXPECT_TRUE(plan.trials[1].parameters.contains("lr"));
}

TEST(EarlyStoppingTest, TheMedianRule) {
  const StudySpec spec = Study(R"({"enableTrialEarlyStopping": true, "maxTrials": 10})");
  // Finished trials' running averages at step 2: 0.55, 0.65, 0.75 -> median 0.65.
  std::vector<Trial> trials = {Finished("s-trial-1", 0.6, {0.5, 0.6, 0.7}), Finished("s-trial-2", 0.7, {0.6, 0.7, 0.8}),
                               Finished("s-trial-3", 0.8, {0.7, 0.8, 0.9})};
  auto running = [](std::vector<double> curve) {
    Trial t = Finished("s-trial-4", curve.back(), curve);
    t.phase = TrialPhase::kRunning;
    return t;
  };
  EXPECT_TRUE(ShouldStopEarly(spec, running({0.3, 0.6}), trials));                   // best 0.6 < 0.65
  EXPECT_FALSE(ShouldStopEarly(spec, running({0.7, 0.6}), trials));                  // best 0.7 >= 0.65
  EXPECT_FALSE(ShouldStopEarly(spec, running({0.3, 0.6}), {trials[0], trials[1]}));  // too few to judge
  EXPECT_FALSE(ShouldStopEarly(Study(), running({0.1}), trials));                    // not enabled
  // Later steps than a finished trial reported use its whole curve: step 5 -> averages 0.6, 0.7, 0.8.
  EXPECT_TRUE(ShouldStopEarly(spec, running({0.1, 0.2, 0.3, 0.4, 0.65}), trials));
  EXPECT_FALSE(ShouldStopEarly(spec, running({0.1, 0.2, 0.3, 0.4, 0.71}), trials));
  // MINIMIZE: lower is better, so the same curves stop the other way round.
  const StudySpec minimize = Study(R"({"enableTrialEarlyStopping": true, "goal": "MINIMIZE"})");
  EXPECT_FALSE(ShouldStopEarly(minimize, running({0.3, 0.6}), trials));
  EXPECT_TRUE(ShouldStopEarly(minimize, running({0.9, 0.8}), trials));

  // The planner stops it, keeps its last value, and starts another trial in its place.
  trials.push_back(running({0.3, 0.6}));
  const StudyPlan plan = PlanStudy(spec, trials, 1, "s", kNow);
  EXPECT_EQ(plan.stopped, std::vector<std::string>{"s-trial-4"});
  EXPECT_EQ(plan.trials[3].phase, TrialPhase::kStopped);
  EXPECT_EQ(plan.trials[3].reason, "EarlyStopped");
  EXPECT_EQ(plan.trials[3].metric, 0.6);
  EXPECT_EQ(plan.trials.size(), 6u);  // two new ones: maxParallelTrials 2, none running now
  EXPECT_EQ(*plan.best, 2u);
}

TEST(TrialTest, StatusRoundTripAndHandEdits) {
  Trial t = Finished("s-trial-1", 0.5, {0.1, 0.5});
  t.reason = "EarlyStopped";
  t.phase = TrialPhase::kStopped;
  t.start_time = "2026-11-27T01:00:00Z";
  t.completion_time = kNow;
  EXPECT_EQ(Trial::FromStatus(t.ToStatus()).ToStatus(), t.ToStatus());
  EXPECT_EQ(t.ToStatus()["phase"], "Stopped");
  EXPECT_EQ(Trial::FromStatus(Json::parse(R"({"name": "x", "phase": "Bogus"})")).phase, TrialPhase::kFailed);
  EXPECT_EQ(Trial::FromStatus(Json("junk")).phase, TrialPhase::kFailed);
  EXPECT_FALSE(Trial::FromStatus(Json::parse(R"({"metric": "high"})")).metric.has_value());
}

}  // namespace
}  // namespace mf::op::study
