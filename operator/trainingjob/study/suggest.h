// Where to run the next trial: uniformly at random, or by Bayesian optimisation (a Gaussian
// process fitted to the finished trials, the running ones filled in with its own predictions,
// "kriging believer", so parallel trials spread out; the next point maximises expected improvement
// over random candidates refined by a local search). Deterministic for a given seed, so a test of
// the algorithm is repeatable; the planner seeds from the study's identity and the trial index.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "trainingjob/study/param_space.h"

namespace mf::op::study {

// splitmix64: small, fast, and the same sequence on every platform (unlike <random>'s distributions).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  double Uniform();                          // [0, 1)
  double Normal();                           // standard normal
  uint64_t Below(uint64_t n);                // [0, n)
  static uint64_t Hash(std::string_view s);  // FNV-1a, for seeds from names

 private:
  uint64_t state_;
};

// A point of the unit cube (already projected onto legal values) and its metric, larger = better
// (the planner negates metrics of MINIMIZE studies).
struct Observation {
  std::vector<double> unit;
  double value = 0;
};

// A uniformly random legal point, projected.
std::vector<double> SampleRandom(const ParamSpace& space, Rng& rng);

// The point that maximises expected improvement given the finished trials `done` and the
// positions of running ones, `pending`. With fewer than two finished trials it samples at random.
// Avoids points already tried when the space has others left.
std::vector<double> SuggestBayesian(const ParamSpace& space, const std::vector<Observation>& done,
                                    const std::vector<std::vector<double>>& pending, Rng& rng);

}  // namespace mf::op::study
