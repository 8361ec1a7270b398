// PlanStudy() proposing one new trial after N finished ones (maxParallelTrials 1), for the
// bayesian and random algorithms: the cost a study adds to a reconcile. The Gaussian process fits
// at most 250 of the trials (the best 100 and the latest 150), so the cost levels off there.
#include <benchmark/benchmark.h>

#include <cmath>

#include "trainingjob/study/planner.h"
#include "trainingjob/study/suggest.h"

namespace mf::op::study {
namespace {

StudySpec Spec(const char* algorithm) {
  Json h = Json::parse(R"({"metricTag": "accuracy", "maxTrials": 1000, "maxParallelTrials": 1,
      "params": [{"name": "lr", "type": "DOUBLE", "min": 0.0001, "max": 1, "scaleType": "UNIT_LOG_SCALE"},
                 {"name": "layers", "type": "INTEGER", "min": 1, "max": 8},
                 {"name": "opt", "type": "CATEGORICAL", "values": ["sgd", "adam", "rmsprop"]}]})");
  h["algorithm"] = algorithm;
  return *ParseStudySpec(h);
}

std::vector<Trial> Finished(const StudySpec& spec, int n) {
  const ParamSpace space(spec.params);
  Rng rng(1);
  std::vector<Trial> trials;
  for (int i = 0; i < n; ++i) {
    Trial t;
    t.name = "b-trial-" + std::to_string(i + 1);
    t.parameters = space.FromUnit(SampleRandom(space, rng));
    t.phase = TrialPhase::kSucceeded;
    const double l = std::log10(t.parameters["lr"].get<double>()) + 2;
    t.metric = 1 - l * l / 4 - 0.01 * std::pow(t.parameters["layers"].get<double>() - 4, 2);
    trials.push_back(std::move(t));
  }
  return trials;
}

void Plan(benchmark::State& state, const char* algorithm) {
  const StudySpec spec = Spec(algorithm);
  const std::vector<Trial> trials = Finished(spec, static_cast<int>(state.range(0)));
  for (auto _ : state) {
    StudyPlan plan = PlanStudy(spec, trials, 7, "b", "2026-01-01T00:00:00Z");
    benchmark::DoNotOptimize(plan.trials.back().parameters);
  }
}

void BM_PlanBayesian(benchmark::State& state) { Plan(state, "bayesian"); }
void BM_PlanRandom(benchmark::State& state) { Plan(state, "random"); }
BENCHMARK(BM_PlanBayesian)->Arg(10)->Arg(50)->Arg(250)->Arg(999)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanRandom)->Arg(10)->Arg(999)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace mf::op::study

BENCHMARK_MAIN();
