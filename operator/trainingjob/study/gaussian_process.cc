#include "trainingjob/study/gaussian_process.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

namespace mf::op::study {
namespace {

double Matern52(const std::vector<double>& a, const std::vector<double>& b, double length_scale) {
  double d2 = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d2 += (a[i] - b[i]) * (a[i] - b[i]);
  const double r = std::sqrt(5.0 * d2) / length_scale;
  return (1.0 + r + r * r / 3.0) * std::exp(-r);
}

// Solves L v = b in place (L lower-triangular, row-major n x n).
void ForwardSubstitute(const std::vector<double>& l, size_t n, std::vector<double>* b) {
  for (size_t i = 0; i < n; ++i) {
    double s = (*b)[i];
    for (size_t k = 0; k < i; ++k) s -= l[i * n + k] * (*b)[k];
    (*b)[i] = s / l[i * n + i];
  }
}

// Solves L^T v = b in place.
void BackSubstitute(const std::vector<double>& l, size_t n, std::vector<double>* b) {
  for (size_t i = n; i-- > 0;) {
    double s = (*b)[i];
    for (size_t k = i + 1; k < n; ++k) s -= l[k * n + i] * (*b)[k];
    (*b)[i] = s / l[i * n + i];
  }
}

}  // namespace

double NormalPdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2.0 * std::numbers::pi); }
double NormalCdf(double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); }

void GaussianProcess::Fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  x_ = x;
  const size_t n = y.size();
  y_mean_ = 0;
  for (double v : y) y_mean_ += v;
  y_mean_ /= static_cast<double>(n);
  double var = 0;
  for (double v : y) var += (v - y_mean_) * (v - y_mean_);
  y_scale_ = n > 1 && var > 0 ? std::sqrt(var / static_cast<double>(n)) : 1.0;
  z_.clear();
  for (double v : y) z_.push_back((v - y_mean_) / y_scale_);
  best_ = *std::max_element(y.begin(), y.end());

  // Length scales from "one corner to the next" down to "a few percent of the cube"; noise from
  // (nearly) noiseless to noisy.
  static constexpr double kLengthScales[] = {0.04, 0.07, 0.1, 0.15, 0.2, 0.3, 0.45, 0.7, 1.0, 1.5, 2.5};
  static constexpr double kNoises[] = {1e-6, 1e-4, 1e-3, 1e-2, 0.05, 0.2};
  double best_ll = -std::numeric_limits<double>::infinity();
  double best_l = kLengthScales[5], best_noise = kNoises[1];
  for (double l : kLengthScales) {
    for (double noise : kNoises) {
      length_scale_ = l;
      noise_ = noise;
      // Priors: Gamma(3, 6) on the length scale (BoTorch's default, mean 0.5) and exponential
      // (mean 0.1) on the noise; with few points the likelihood alone prefers "every point is noise
      // around a constant".
      const double ll = Factorise() + 2.0 * std::log(l) - 6.0 * l - 10.0 * noise;
      if (ll > best_ll) best_ll = ll, best_l = l, best_noise = noise;
    }
  }
  length_scale_ = best_l;
  noise_ = best_noise;
  if (!std::isfinite(Factorise())) {
    noise_ = 1.0;  // every candidate failed (duplicate points and tiny noise): a model that still works
    Factorise();
  }
}

void GaussianProcess::Refit(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  x_ = x;
  z_.clear();
  for (double v : y) z_.push_back((v - y_mean_) / y_scale_);
  if (!std::isfinite(Factorise())) {
    noise_ = std::max(noise_ * 100, 1e-2);
    Factorise();
  }
}

double GaussianProcess::Factorise() {
  const size_t n = z_.size();
  chol_.assign(n * n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j <= i; ++j) {
      double s = Matern52(x_[i], x_[j], length_scale_) + (i == j ? noise_ : 0.0);
      for (size_t k = 0; k < j; ++k) s -= chol_[i * n + k] * chol_[j * n + k];
      if (i == j) {
        if (s <= 1e-12) return -std::numeric_limits<double>::infinity();
        chol_[i * n + i] = std::sqrt(s);
      } else {
        chol_[i * n + j] = s / chol_[j * n + j];
      }
    }
  }
  alpha_ = z_;
  ForwardSubstitute(chol_, n, &alpha_);
  double quad = 0;
  for (double v : alpha_) quad += v * v;
  BackSubstitute(chol_, n, &alpha_);
  // With K = s^2 (R + noise I), the likelihood is largest at s^2 = z^T (R + noise I)^-1 z / n.
  signal_ = std::max(quad / static_cast<double>(n), 1e-12);
  double log_det = 0;
  for (size_t i = 0; i < n; ++i) log_det += std::log(chol_[i * n + i]);
  return -0.5 * static_cast<double>(n) * std::log(signal_) - log_det;
}

void GaussianProcess::Predict(const std::vector<double>& x, double* mean, double* stddev) const {
  const size_t n = z_.size();
  std::vector<double> k(n);
  double mu = 0;
  for (size_t i = 0; i < n; ++i) {
    k[i] = Matern52(x, x_[i], length_scale_);
    mu += k[i] * alpha_[i];
  }
  ForwardSubstitute(chol_, n, &k);
  double explained = 0;
  for (double v : k) explained += v * v;
  const double var = std::max(signal_ * (1.0 - explained), 1e-12);
  *mean = y_mean_ + y_scale_ * mu;
  *stddev = y_scale_ * std::sqrt(var);
}

double GaussianProcess::ExpectedImprovement(const std::vector<double>& x, double best, double xi) const {
  double mean = 0, sd = 0;
  Predict(x, &mean, &sd);
  const double improvement = mean - best - xi * y_scale_;
  const double z = improvement / sd;
  return improvement * NormalCdf(z) + sd * NormalPdf(z);
}

}  // namespace mf::op::study
