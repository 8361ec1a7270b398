// The Gaussian process, and Bayesian optimisation against random search on benchmark functions,
// run through PlanStudy() exactly as the operator runs a study (fixed seeds, so repeatable).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <numbers>

#include "trainingjob/study/gaussian_process.h"
#include "trainingjob/study/planner.h"
#include "trainingjob/study/suggest.h"

namespace mf::op::study {
namespace {

TEST(GaussianProcessTest, InterpolatesAndIsUnsureFarFromData) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (double t : {0.0, 0.2, 0.4, 0.6}) x.push_back({t}), y.push_back(std::sin(6 * t));
  GaussianProcess gp;
  gp.Fit(x, y);
  for (size_t i = 0; i < x.size(); ++i) {
    double mean = 0, sd = 0;
    gp.Predict(x[i], &mean, &sd);
    EXPECT_NEAR(mean, y[i], 0.05) << x[i][0];
  }
  double mean_in = 0, sd_in = 0, mean_out = 0, sd_out = 0;
  gp.Predict({0.3}, &mean_in, &sd_in);
  gp.Predict({1.0}, &mean_out, &sd_out);
  EXPECT_NEAR(mean_in, std::sin(1.8), 0.15);
  EXPECT_GT(sd_out, 3 * sd_in);
  // Expected improvement is larger where the model is unsure than at a known point.
  EXPECT_GT(gp.ExpectedImprovement({1.0}, gp.BestObserved()), gp.ExpectedImprovement({0.0}, gp.BestObserved()));
  EXPECT_DOUBLE_EQ(gp.BestObserved(), std::sin(6 * 0.2));
}

TEST(GaussianProcessTest, SurvivesDuplicatePointsAndConstantValues) {
  GaussianProcess gp;
  gp.Fit({{0.5, 0.5}, {0.5, 0.5}, {0.5, 0.5}}, {1, 1, 1});
  double mean = 0, sd = 0;
  gp.Predict({0.5, 0.5}, &mean, &sd);
  EXPECT_TRUE(std::isfinite(mean) && std::isfinite(sd));
  EXPECT_NEAR(mean, 1, 1e-6);
}

// Minimum 0.397887 at (-pi, 12.275), (pi, 2.275), (9.42478, 2.475).
double Branin(double x1, double x2) {
  const double b = 5.1 / (4 * std::numbers::pi * std::numbers::pi), c = 5 / std::numbers::pi;
  const double t = 1 / (8 * std::numbers::pi);
  return std::pow(x2 - b * x1 * x1 + c * x1 - 6, 2) + 10 * (1 - t) * std::cos(x1) + 10;
}

// Runs a study to its end, each trial finishing (with `metric` of its parameters) before the next
// plan, `parallel` at a time; returns the best metric.
double RunStudy(const StudySpec& spec, uint64_t seed, const std::function<double(const Json&)>& metric) {
  std::vector<Trial> trials;
  for (int round = 0; round < 1000; ++round) {
    StudyPlan plan = PlanStudy(spec, trials, seed, "bench", "2026-11-27T02:00:00Z");
    if (plan.finished) return *plan.trials[*plan.best].metric;
    trials = std::move(plan.trials);
    // The oldest running trial finishes: with maxParallelTrials > 1 the planner sees pending ones.
    for (auto& t : trials) {
      if (t.Active()) {
        t.phase = TrialPhase::kSucceeded;
        t.metric = metric(t.parameters);
        break;
      }
    }
  }
  ADD_FAILURE() << "the study never finished";
  return NAN;
}

StudySpec Parse(const char* json) {
  auto spec = ParseStudySpec(Json::parse(json));
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return *spec;
}

struct Comparison {
  double random_regret = 0;
  double bayesian_regret = 0;
};

Comparison Compare(std::string spec_json, double optimum, bool maximize,
                   const std::function<double(const Json&)>& metric, int seeds) {
  Comparison c;
  for (const char* algorithm : {"random", "bayesian"}) {
    Json h = Json::parse(spec_json);
    h["algorithm"] = algorithm;
    const StudySpec spec = Parse(h.dump().c_str());
    double regret = 0;
    for (int s = 0; s < seeds; ++s) {
      const double best = RunStudy(spec, 1000 + static_cast<uint64_t>(s), metric);
      regret += (maximize ? optimum - best : best - optimum) / seeds;
    }
    (std::string(algorithm) == "random" ? c.random_regret : c.bayesian_regret) = regret;
  }
  return c;
}

TEST(BayesianBenchmarkTest, BeatsRandomSearchOnBranin) {
  const Comparison c =
      Compare(R"({"goal": "MINIMIZE", "metricTag": "loss", "maxTrials": 25,
      "params": [{"name": "x1", "type": "DOUBLE", "min": -5, "max": 10},
                 {"name": "x2", "type": "DOUBLE", "min": 0, "max": 15}]})",
              0.397887, false, [](const Json& p) { return Branin(p["x1"].get<double>(), p["x2"].get<double>()); }, 8);
  std::printf("Branin, 25 trials, mean regret over 8 seeds: random %.4f, bayesian %.4f\n", c.random_regret,
              c.bayesian_regret);
  EXPECT_LT(c.bayesian_regret, 0.25 * c.random_regret);
  EXPECT_LT(c.bayesian_regret, 0.5);
}

TEST(BayesianBenchmarkTest, BeatsRandomSearchWithALogScaleAndACategoryTwoAtATime) {
  // Best at lr = 0.01 (the middle of its log range), y = 0.2, optimizer adam.
  const Comparison c = Compare(R"({"goal": "MAXIMIZE", "metricTag": "accuracy", "maxTrials": 20,
      "maxParallelTrials": 2,
      "params": [{"name": "lr", "type": "DOUBLE", "min": 0.0001, "max": 1, "scaleType": "UNIT_LOG_SCALE"},
                 {"name": "y", "type": "DOUBLE", "min": 0, "max": 1},
                 {"name": "opt", "type": "CATEGORICAL", "values": ["sgd", "adam", "rmsprop"]}]})",
                               1.0, true,
                               [](const Json& p) {
                                 const double l = std::log10(p["lr"].get<double>()) + 2;
                                 const double y = p["y"].get<double>() - 0.2;
                                 const std::string opt = p["opt"].get<std::string>();
                                 const double penalty = opt == "adam" ? 0 : opt == "sgd" ? 0.3 : 0.15;
                                 return 1.0 - l * l / 4 - y * y - penalty;
                               },
                               8);
  std::printf("quadratic + categorical, 20 trials 2 at a time, mean regret over 8 seeds: random %.4f, bayesian %.4f\n",
              c.random_regret, c.bayesian_regret);
  EXPECT_LT(c.bayesian_regret, 0.5 * c.random_regret);
}

TEST(SuggestTest, ParallelSuggestionsSpreadOut) {
  const StudySpec spec = Parse(R"({"metricTag": "m", "maxTrials": 10,
      "params": [{"name": "x", "type": "DOUBLE", "min": 0, "max": 1}]})");
  const ParamSpace space(spec.params);
  const std::vector<Observation> done = {{{0.1}, 0.1}, {{0.5}, 0.5}, {{0.9}, 0.2}};
  Rng rng(3);
  const auto first = SuggestBayesian(space, done, {}, rng);
  const auto second = SuggestBayesian(space, done, {first}, rng);
  EXPECT_GT(std::fabs(first[0] - second[0]), 1e-3);
  // A finite space that is fully tried still yields a legal point.
  const StudySpec tiny = Parse(R"({"metricTag": "m", "maxTrials": 10,
      "params": [{"name": "o", "type": "CATEGORICAL", "values": ["a", "b"]}]})");
  const ParamSpace tiny_space(tiny.params);
  const auto point = SuggestBayesian(tiny_space, {{{1, 0}, 1}, {{0, 1}, 2}}, {}, rng);
  EXPECT_TRUE(tiny_space.ToUnit(tiny_space.FromUnit(point)).ok());
}

}  // namespace
}  // namespace mf::op::study
