// A Gaussian-process regression model on the unit cube, for Bayesian optimisation of a study:
// a Matern 5/2 kernel over Euclidean distance (categorical parameters as one-hot coordinates),
// observations standardised to zero mean and unit variance, and the length scale and noise chosen
// by maximising the marginal likelihood times priors on both, over a fixed grid (the signal
// variance has a closed-form maximum for each), so a fit is deterministic. Small dense linear
// algebra only: a study has at most 1000 trials and the caller keeps the fitted set to a few hundred.
#pragma once

#include <vector>

namespace mf::op::study {

class GaussianProcess {
 public:
  // Fits to points `x` (each of the same size) and values `y`, choosing the hyperparameters.
  // Needs at least one point.
  void Fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y);
  // Refits to new data with the hyperparameters the last Fit() chose (for "kriging believer"
  // fantasies of pending trials).
  void Refit(const std::vector<std::vector<double>>& x, const std::vector<double>& y);

  // Posterior mean and standard deviation of the latent function at `x`, in the units of y.
  void Predict(const std::vector<double>& x, double* mean, double* stddev) const;
  // The largest observed value.
  double BestObserved() const { return best_; }

  // Expected improvement over `best` at `x` (maximisation), with exploration margin `xi` in
  // standard deviations of the observations.
  double ExpectedImprovement(const std::vector<double>& x, double best, double xi = 0.01) const;

  double length_scale() const { return length_scale_; }
  double noise() const { return noise_; }

 private:
  // Factorises K + noise*I for the current data; returns the log marginal likelihood with the
  // signal variance at its maximum, or -inf when the matrix is not positive definite.
  double Factorise();

  std::vector<std::vector<double>> x_;
  std::vector<double> z_;  // standardised observations
  double y_mean_ = 0, y_scale_ = 1, best_ = 0;
  double length_scale_ = 0.3, noise_ = 1e-4, signal_ = 1;
  std::vector<double> chol_;   // lower-triangular Cholesky factor, row-major n x n
  std::vector<double> alpha_;  // (K + noise I)^-1 z
};

// Standard normal density and distribution function.
double NormalPdf(double z);
double NormalCdf(double z);

}  // namespace mf::op::study
