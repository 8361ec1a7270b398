#include "trainingjob/study/suggest.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "trainingjob/study/gaussian_process.h"

namespace mf::op::study {
namespace {

// How many random candidates the acquisition function is evaluated at, how many of the best
// are refined, and for how many steps.
constexpr int kRandomCandidates = 1000;
constexpr int kCandidatesPerIncumbent = 20;
constexpr size_t kRefined = 5;
constexpr int kRefineSteps = 30;
// The fitted set is kept small enough for a reconcile: the best and the most recent trials.
constexpr size_t kMaxFitBest = 100;
constexpr size_t kMaxFitRecent = 150;

double SquaredDistance(const std::vector<double>& a, const std::vector<double>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d += (a[i] - b[i]) * (a[i] - b[i]);
  return d;
}

// A random neighbour: numeric coordinates moved by N(0, sigma), each categorical switched with
// probability `switch_p`; projected onto legal values.
std::vector<double> Perturb(const ParamSpace& space, const std::vector<double>& u, double sigma, double switch_p,
                            Rng& rng) {
  std::vector<double> v = u;
  size_t d = 0;
  for (const auto& p : space.params()) {
    if (p.type == ParamType::kCategorical) {
      if (rng.Uniform() < switch_p) {
        const size_t pick = rng.Below(p.categories.size());
        for (size_t k = 0; k < p.categories.size(); ++k) v[d + k] = k == pick ? 1 : 0;
      }
    } else {
      v[d] = std::clamp(v[d] + sigma * rng.Normal(), 0.0, 1.0);
    }
    d += static_cast<size_t>(p.Dims());
  }
  return space.Project(v);
}

std::vector<Observation> FitSet(const std::vector<Observation>& done) {
  if (done.size() <= kMaxFitBest + kMaxFitRecent) return done;
  std::vector<size_t> order(done.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return done[a].value > done[b].value; });
  std::vector<bool> keep(done.size(), false);
  for (size_t i = 0; i < kMaxFitBest; ++i) keep[order[i]] = true;
  for (size_t i = done.size() - kMaxFitRecent; i < done.size(); ++i) keep[i] = true;
  std::vector<Observation> fit;
  for (size_t i = 0; i < done.size(); ++i) {
    if (keep[i]) fit.push_back(done[i]);
  }
  return fit;
}

}  // namespace

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

double Rng::Normal() {
  // Box-Muller; 1 - Uniform() is in (0, 1], so the log is finite.
  const double r = std::sqrt(-2.0 * std::log(1.0 - Uniform()));
  return r * std::cos(2.0 * std::numbers::pi * Uniform());
}

uint64_t Rng::Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }

uint64_t Rng::Hash(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

std::vector<double> SampleRandom(const ParamSpace& space, Rng& rng) {
  std::vector<double> u;
  u.reserve(static_cast<size_t>(space.dims()));
  for (const auto& p : space.params()) {
    if (p.type == ParamType::kCategorical) {
      const size_t pick = rng.Below(p.categories.size());
      for (size_t k = 0; k < p.categories.size(); ++k) u.push_back(k == pick ? 1 : 0);
    } else {
      u.push_back(rng.Uniform());
    }
  }
  return space.Project(u);
}

std::vector<double> SuggestBayesian(const ParamSpace& space, const std::vector<Observation>& done,
                                    const std::vector<std::vector<double>>& pending, Rng& rng) {
  if (done.size() < 2) return SampleRandom(space, rng);

  const std::vector<Observation> fit = FitSet(done);
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const auto& o : fit) x.push_back(o.unit), y.push_back(o.value);
  GaussianProcess gp;
  gp.Fit(x, y);
  const double best = gp.BestObserved();
  if (!pending.empty()) {
    for (const auto& p : pending) {
      double mean = 0, sd = 0;
      gp.Predict(p, &mean, &sd);
      x.push_back(p), y.push_back(mean);
    }
    gp.Refit(x, y);
  }

  auto tried = [&](const std::vector<double>& u) {
    for (const auto& o : done) {
      if (SquaredDistance(o.unit, u) < 1e-18) return true;
    }
    for (const auto& p : pending) {
      if (SquaredDistance(p, u) < 1e-18) return true;
    }
    return false;
  };
  struct Candidate {
    double ei;
    std::vector<double> unit;
  };
  std::vector<Candidate> candidates;
  auto consider = [&](std::vector<double> u) {
    if (!tried(u)) candidates.push_back({gp.ExpectedImprovement(u, best), std::move(u)});
  };
  for (int i = 0; i < kRandomCandidates; ++i) consider(SampleRandom(space, rng));
  // Near the best trials too: the optimum is often a small step from the incumbent.
  std::vector<const Observation*> incumbents;
  for (const auto& o : done) incumbents.push_back(&o);
  std::stable_sort(incumbents.begin(), incumbents.end(),
                   [](const Observation* a, const Observation* b) { return a->value > b->value; });
  incumbents.resize(std::min(incumbents.size(), kRefined));
  for (const auto* o : incumbents) {
    for (int i = 0; i < kCandidatesPerIncumbent; ++i) consider(Perturb(space, o->unit, 0.05, 0.1, rng));
  }
  if (candidates.empty()) return SampleRandom(space, rng);  // everything near was tried: explore

  const size_t top = std::min(candidates.size(), kRefined);
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(top), candidates.end(),
                    [](const Candidate& a, const Candidate& b) { return a.ei > b.ei; });
  Candidate winner = candidates.front();
  for (size_t c = 0; c < top; ++c) {
    Candidate current = candidates[c];
    double sigma = 0.1;
    int failures = 0;
    for (int step = 0; step < kRefineSteps; ++step) {
      auto next = Perturb(space, current.unit, sigma, 0.1, rng);
      const double ei = tried(next) ? -1 : gp.ExpectedImprovement(next, best);
      if (ei > current.ei) {
        current = {ei, std::move(next)};
        failures = 0;
      } else if (++failures >= 5) {
        sigma /= 2;
        failures = 0;
      }
    }
    if (current.ei > winner.ei) winner = std::move(current);
  }
  return winner.unit;
}

}  // namespace mf::op::study
