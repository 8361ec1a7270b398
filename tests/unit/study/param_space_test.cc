#include "trainingjob/study/param_space.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "trainingjob/study/suggest.h"

namespace mf::op::study {
namespace {

Json Spec(const char* params, const char* extra = "{}") {
  Json h = {{"goal", "MAXIMIZE"}, {"metricTag", "accuracy"}, {"maxTrials", 10}, {"params", Json::parse(params)}};
  h.merge_patch(Json::parse(extra));
  return h;
}

StudySpec MustParse(const Json& h) {
  auto spec = ParseStudySpec(h);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  return spec.ok() ? *spec : StudySpec{};
}

TEST(StudySpecTest, ParsesTheApiExample) {
  auto spec = MustParse(Spec(R"([
      {"name": "n_layers", "type": "INTEGER", "min": 10, "max": 100, "scaleType": "UNIT_LINEAR_SCALE"},
      {"name": "momentum", "type": "DOUBLE", "min": 0.1, "max": 1.0, "scaleType": "UNIT_LOG_SCALE"},
      {"name": "optimizer", "type": "CATEGORICAL", "values": ["sgd", "adam"]},
      {"name": "batch", "type": "DISCRETE", "discreteValues": [64, 16, 32]}])",
                             R"({"maxParallelTrials": 2, "algorithm": "bayesian", "enableTrialEarlyStopping": true})"));
  EXPECT_TRUE(spec.maximize);
  EXPECT_EQ(spec.metric_tag, "accuracy");
  EXPECT_EQ(spec.max_trials, 10);
  EXPECT_EQ(spec.max_parallel_trials, 2);
  EXPECT_EQ(spec.algorithm, Algorithm::kBayesian);
  EXPECT_TRUE(spec.early_stopping);
  ASSERT_EQ(spec.params.size(), 4u);
  EXPECT_EQ(spec.params[0].type, ParamType::kInteger);
  EXPECT_EQ(spec.params[1].scale, Scale::kLog);
  EXPECT_EQ(spec.params[2].categories, (std::vector<std::string>{"sgd", "adam"}));
  EXPECT_EQ(spec.params[3].discrete, (std::vector<double>{16, 32, 64}));
  EXPECT_EQ(ParamSpace(spec.params).dims(), 5);
}

TEST(StudySpecTest, BadSpecsSayWhatIsWrong) {
  struct Case {
    Json spec;
    const char* message;
  };
  const Case cases[] = {
      {Spec(R"([{"name": "lr", "type": "DOUBLE", "min": 1, "max": 0.1}])"),
       "params[0] (lr).min (1) is greater than max"},
      {Spec(R"([{"name": "lr", "type": "DOUBLE", "min": 0, "max": 1, "scaleType": "UNIT_LOG_SCALE"}])"),
       "UNIT_LOG_SCALE needs every value greater than 0, but the smallest is 0"},
      {Spec(R"([{"name": "lr", "type": "DOUBLE", "min": -1, "max": 1, "scaleType": "UNIT_REVERSE_LOG_SCALE"}])"),
       "UNIT_REVERSE_LOG_SCALE needs every value greater than 0"},
      {Spec(R"([{"name": "opt", "type": "CATEGORICAL", "values": []}])"), "CATEGORICAL and needs a non-empty list"},
      {Spec(R"([{"name": "opt", "type": "CATEGORICAL", "values": ["a", "a"]}])"), "lists \"a\" twice"},
      {Spec(R"([{"name": "lr", "type": "DOUBLE", "min": 0, "max": 1}])", R"({"algorithm": "grid"})"),
       "grid search cannot enumerate a DOUBLE range; give it a step"},
      {Spec(R"([{"name": "lr", "type": "DOUBLE", "min": 0, "max": 1, "step": 0}])"), "step must be greater than 0"},
      {Spec(R"([{"name": "n", "type": "INTEGER", "min": 1, "max": 5, "step": 1}])"), "step is only for DOUBLE"},
      {Spec(R"([{"name": "n", "type": "INTEGER", "min": 1.5, "max": 5}])"), "whole-number min and max"},
      {Spec(R"([{"name": "n", "type": "INTEGER", "min": 1}])"), "needs min and max"},
      {Spec(R"([{"name": "b", "type": "DISCRETE"}])"), "DISCRETE and needs a non-empty list of numbers"},
      {Spec(R"([{"name": "b", "type": "DISCRETE", "discreteValues": [1, 2, 1]}])"), "discreteValues lists 1 twice"},
      {Spec(R"([{"name": "b", "type": "DISCRETE", "discreteValues": [0, 2], "scaleType": "UNIT_LOG_SCALE"}])"),
       "greater than 0, but the smallest is 0"},
      {Spec(R"([{"name": "--lr", "type": "DOUBLE", "min": 0, "max": 1}])"), "is not a command-line flag name"},
      {Spec(R"([{"name": "lr", "type": "DOUBLE", "min": 0, "max": 1}, {"name": "lr", "type": "INTEGER", "min": 0,
                 "max": 1}])"),
       "names \"lr\" twice"},
      {Spec(R"([{"name": "lr", "type": "FLOAT", "min": 0, "max": 1}])"), "type must be one of INTEGER, DOUBLE"},
      {Spec(R"([])"), "params must list at least one parameter"},
      {Spec(R"([{"name": "lr", "type": "DOUBLE", "min": 0, "max": 1}])", R"({"maxTrials": 0})"),
       "maxTrials is 0; it must be between 1 and 1000"},
      {Spec(R"([{"name": "lr", "type": "DOUBLE", "min": 0, "max": 1}])", R"({"metricTag": ""})"),
       "metricTag is required"},
      {Spec(R"([{"name": "lr", "type": "DOUBLE", "min": 0, "max": 1}])", R"({"metricTag": "a=b"})"),
       "may not contain spaces or '='"},
      {Spec(R"([{"name": "lr", "type": "DOUBLE", "min": 0, "max": 1}])", R"({"algorithm": "hyperband"})"),
       "algorithm must be one of random, grid, bayesian"},
      {Spec(R"([{"name": "lr", "type": "DOUBLE", "min": 0, "max": 1}])", R"({"goal": "BIGGER"})"),
       "goal must be one of MAXIMIZE, MINIMIZE"},
      {Spec(R"([{"name": "o", "type": "CATEGORICAL", "values": ["a"], "scaleType": "UNIT_LOG_SCALE"}])"),
       "a CATEGORICAL parameter has no scaleType"},
      {Json::array(), "spec.hyperparameters must be an object"},
  };
  for (const auto& c : cases) {
    auto spec = ParseStudySpec(c.spec);
    ASSERT_FALSE(spec.ok()) << c.spec.dump();
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(spec.status().message().find(c.message), std::string::npos)
        << "got: " << spec.status().message() << "\nwanted: " << c.message;
  }
}

TEST(ParamSpaceTest, ScalesPlaceValuesInTheCube) {
  const auto spec = MustParse(Spec(R"([
      {"name": "lin", "type": "DOUBLE", "min": 0, "max": 10},
      {"name": "log", "type": "DOUBLE", "min": 0.0001, "max": 1, "scaleType": "UNIT_LOG_SCALE"},
      {"name": "rev", "type": "DOUBLE", "min": 0.1, "max": 1, "scaleType": "UNIT_REVERSE_LOG_SCALE"}])"));
  const ParamSpace space(spec.params);
  auto mid = space.FromUnit({0.5, 0.5, 0.5});
  EXPECT_DOUBLE_EQ(mid["lin"].get<double>(), 5);
  EXPECT_NEAR(mid["log"].get<double>(), 0.01, 1e-12);  // the geometric middle
  EXPECT_NEAR(mid["rev"].get<double>(), 1.1 - std::sqrt(0.1), 1e-12);
  auto ends = space.FromUnit({0, 0, 1});
  EXPECT_DOUBLE_EQ(ends["lin"].get<double>(), 0);
  EXPECT_NEAR(ends["log"].get<double>(), 0.0001, 1e-15);
  EXPECT_NEAR(ends["rev"].get<double>(), 1, 1e-12);
  // Reverse log is dense near max: equal steps in the cube are smaller there.
  auto rev = [&](double u) { return space.FromUnit({0, 0, u})["rev"].get<double>(); };
  EXPECT_LT(rev(0.9) - rev(0.8), rev(0.2) - rev(0.1));
  // And back.
  for (double u : {0.0, 0.13, 0.5, 0.77, 1.0}) {
    auto unit = space.ToUnit(space.FromUnit({u, u, u}));
    ASSERT_TRUE(unit.ok());
    for (double x : *unit) EXPECT_NEAR(x, u, 1e-9);
  }
  // Out-of-cube coordinates are clamped to legal values.
  auto clamped = space.FromUnit({-3, 7, std::nan("")});
  EXPECT_DOUBLE_EQ(clamped["lin"].get<double>(), 0);
  EXPECT_NEAR(clamped["log"].get<double>(), 1, 1e-12);
}

TEST(ParamSpaceTest, IntegersDiscreteAndCategoriesAreLegalAndEvenlySampled) {
  const auto spec = MustParse(Spec(R"([
      {"name": "n", "type": "INTEGER", "min": 1, "max": 4},
      {"name": "units", "type": "INTEGER", "min": 1, "max": 1000, "scaleType": "UNIT_LOG_SCALE"},
      {"name": "batch", "type": "DISCRETE", "discreteValues": [16, 32, 64, 128], "scaleType": "UNIT_LOG_SCALE"},
      {"name": "opt", "type": "CATEGORICAL", "values": ["sgd", "adam", "rmsprop"]}])"));
  const ParamSpace space(spec.params);
  Rng rng(7);
  std::map<int64_t, int> n_counts;
  std::map<double, int> batch_counts;
  std::map<std::string, int> opt_counts;
  int small_units = 0;
  const int draws = 6000;
  for (int i = 0; i < draws; ++i) {
    auto point = space.FromUnit(SampleRandom(space, rng));
    ASSERT_TRUE(point["n"].is_number_integer());
    n_counts[point["n"].get<int64_t>()]++;
    if (point["units"].get<int64_t>() <= 31) ++small_units;
    batch_counts[point["batch"].get<double>()]++;
    opt_counts[point["opt"].get<std::string>()]++;
    ASSERT_TRUE(space.ToUnit(point).ok()) << point.dump();
  }
  ASSERT_EQ(n_counts.size(), 4u);  // both ends included, each about a quarter
  for (const auto& [n, count] : n_counts) EXPECT_NEAR(count, draws / 4, draws / 20) << n;
  EXPECT_NEAR(small_units, draws / 2, draws / 20);  // log scale: 1..31 is about half of 1..1000
  ASSERT_EQ(batch_counts.size(), 4u);
  for (const auto& [b, count] : batch_counts) EXPECT_GT(count, draws / 10) << b;
  ASSERT_EQ(opt_counts.size(), 3u);
  for (const auto& [o, count] : opt_counts) EXPECT_NEAR(count, draws / 3, draws / 20) << o;

  // A categorical block takes its largest coordinate; projection makes it one-hot.
  auto unit = space.Project({0.5, 0.5, 0.2, 0.1, 0.7, 0.3});
  EXPECT_EQ(unit[3], 0);
  EXPECT_EQ(unit[4], 1);
  EXPECT_EQ(unit[5], 0);
  EXPECT_EQ(space.FromUnit(unit)["opt"], "adam");
  EXPECT_EQ(space.FromUnit(unit)["batch"], 32.0);  // nearest on the log scale to 0.2 of 16..128
}

TEST(ParamSpaceTest, ToUnitRefusesPointsOutsideTheSpace) {
  const auto spec = MustParse(Spec(R"([
      {"name": "n", "type": "INTEGER", "min": 1, "max": 4},
      {"name": "opt", "type": "CATEGORICAL", "values": ["sgd", "adam"]}])"));
  const ParamSpace space(spec.params);
  EXPECT_TRUE(space.ToUnit({{"n", 2}, {"opt", "sgd"}}).ok());
  EXPECT_EQ(space.ToUnit({{"n", 2}}).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(space.ToUnit({{"n", 5}, {"opt", "sgd"}}).ok());
  EXPECT_FALSE(space.ToUnit({{"n", 2.5}, {"opt", "sgd"}}).ok());
  EXPECT_FALSE(space.ToUnit({{"n", 2}, {"opt", "adagrad"}}).ok());
  EXPECT_FALSE(space.ToUnit({{"n", "2"}, {"opt", "sgd"}}).ok());
  EXPECT_FALSE(space.ToUnit(Json::array()).ok());
}

TEST(ParamSpaceTest, GridEnumeratesEveryPointLastParameterFastest) {
  const auto spec = MustParse(Spec(R"([
      {"name": "opt", "type": "CATEGORICAL", "values": ["sgd", "adam"]},
      {"name": "n", "type": "INTEGER", "min": 2, "max": 4},
      {"name": "lr", "type": "DOUBLE", "min": 0.1, "max": 0.3, "step": 0.1}])",
                                   R"({"algorithm": "grid"})"));
  const ParamSpace space(spec.params);
  ASSERT_EQ(space.GridSize(), 2 * 3 * 3);
  EXPECT_EQ(space.GridPoint(0), Json::parse(R"({"opt": "sgd", "n": 2, "lr": 0.1})"));
  EXPECT_EQ(space.GridPoint(1)["lr"].get<double>(), 0.2);
  EXPECT_EQ(space.GridPoint(3), Json::parse(R"({"opt": "sgd", "n": 3, "lr": 0.1})"));
  auto last = space.GridPoint(17);
  EXPECT_EQ(last["opt"], "adam");
  EXPECT_EQ(last["n"], 4);
  EXPECT_NEAR(last["lr"].get<double>(), 0.3, 1e-12);  // max included despite 0.1 + 2 * 0.1 rounding
  std::set<std::string> seen;
  for (int64_t i = 0; i < space.GridSize(); ++i) seen.insert(space.GridPoint(i).dump());
  EXPECT_EQ(seen.size(), 18u);

  // A huge product saturates instead of overflowing.
  const auto big = MustParse(Spec(R"([
      {"name": "a", "type": "INTEGER", "min": 0, "max": 4000000000},
      {"name": "b", "type": "INTEGER", "min": 0, "max": 4000000000},
      {"name": "c", "type": "INTEGER", "min": 0, "max": 4000000000}])"));
  EXPECT_EQ(ParamSpace(big.params).GridSize(), INT64_MAX);
}

TEST(ParamSpaceTest, ArgumentsReadAsTheTrainerExpects) {
  const auto spec = MustParse(Spec(R"([
      {"name": "layers", "type": "INTEGER", "min": 1, "max": 100},
      {"name": "lr", "type": "DOUBLE", "min": 0.0001, "max": 1},
      {"name": "batch", "type": "DISCRETE", "discreteValues": [32, 64]},
      {"name": "optimizer", "type": "CATEGORICAL", "values": ["sgd", "adam"]}])"));
  const Json point = {{"layers", 42}, {"lr", 0.001}, {"batch", 64.0}, {"optimizer", "adam"}};
  EXPECT_EQ(TrialArgs(spec.params, point),
            (std::vector<std::string>{"--layers=42", "--lr=0.001", "--batch=64", "--optimizer=adam"}));
  EXPECT_EQ(FormatValue(Json(0.1 + 0.2)), "0.30000000000000004");  // exact, so the record matches the run
  EXPECT_EQ(FormatValue(Json(1e-7)), "1e-07");
}

}  // namespace
}  // namespace mf::op::study
