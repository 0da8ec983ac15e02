#pragma once
/// @file
/// The numerical core of the PRV accountant: the privacy loss random variables (PRVs) of
/// Poisson-subsampled Gaussian steps, discretised on one grid and composed by FFT (Gopi, Lee &
/// Wutschitz 2021, "Numerical composition of differential privacy"). In the SDK so that an
/// out-of-tree accountant can compose Gaussian steps the same way (the `prv` plugin is this class
/// behind the Accountant interface).
///
/// Differences from the Python implementations, each for a failure their users hit:
///  * cell masses come from the survival function in the upper half (never 1 - CDF), so tail
///    cells keep relative precision;
///  * the composition runs on an exponentially tilted copy of the distribution (p_i e^{lambda t_i},
///    renormalised) and is untilted afterwards: FFT round-off is ~1e-16 of the *largest* cell, and
///    tilting makes the cells near epsilon the largest ones, so delta down to 1e-12 (and below) is
///    not drowned in round-off;
///  * the mean correction integrates the continuous mean with composite Gauss-Legendre in the
///    Gaussian variable, where the integrand is smooth for every epsilon and sigma;
///  * cells with no mass are never evaluated, so large domains (epsilon ~ 100) stay cheap.

#include <privdiff/privacy/gaussian_steps.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <vector>

namespace privdiff::sdk::prv {

/// Epsilon at one delta: the discretised composition's estimate, and bounds on the true epsilon
/// that account for the discretisation (eps_error) and the truncated domain (delta_error).
struct EpsilonBounds {
  double lower;     ///< never above the true epsilon
  double estimate;  ///< epsilon of the discretised composition
  double upper;     ///< never below the true epsilon (what a privacy report should state)
};

/// The composition of Poisson-subsampled Gaussian steps as a discretised privacy loss
/// distribution, queried for epsilon(delta) and delta(epsilon). Immutable once built; building
/// costs one FFT of the grid per distinct step kind (grids reach ~1e7 points, in parallel over the
/// machine's cores, at most 16).
class PRIVDIFF_SDK_API PrvComposition {
 public:
  /// What the composition will be asked, which sets the exponential tilt: the tilt is
  /// (alpha - 1) / 2 for the RDP order alpha that is optimal for this question.
  struct Question {
    bool epsilon_at_delta;  ///< true: epsilon(delta = value); false: delta(epsilon = value)
    double value;           ///< the delta (epsilon_at_delta) or the epsilon asked at
  };

  /// Discretises and composes `steps` (each: noise multiplier > 0, sampling rate in (0, 1],
  /// count >= 1; an empty list composes to "spends nothing"). `delta_error` in (0, 1) sizes the
  /// domain (truncated tail mass) and `eps_error` > 0 the mesh, as in Gopi et al. Thm 5.5 /
  /// Remark 5.6. Throws std::invalid_argument for bad arguments or steps, and std::runtime_error
  /// when the grid would be too large (over 1.5e8 points: raise eps_error) or a step's
  /// discretisation fails its mean check.
  PrvComposition(const std::vector<GaussianSteps>& steps, double eps_error, double delta_error, Question question);

  /// delta(epsilon) of the discretised composition (the estimate).
  double delta_estimate(double epsilon) const;
  /// epsilon(delta) of the discretised composition (the estimate); 0 when delta(0) <= delta,
  /// +inf for delta <= 0.
  double epsilon_estimate(double delta) const;
  /// Lower bound, estimate and upper bound of epsilon at delta. Throws std::invalid_argument
  /// unless delta > delta_error.
  EpsilonBounds epsilon_bounds(double delta) const;
  /// Upper bound on delta(epsilon), at most 1.
  double delta_upper(double epsilon) const;

  /// Cells kept of the composed distribution (those at privacy loss >= 0); 0 for a composition
  /// that spends nothing.
  std::int64_t grid_size() const { return static_cast<std::int64_t>(t_.size()); }
  /// L: the grid covers privacy losses in [-L, L).
  double domain_half_width() const { return half_width_; }
  /// Width of one grid cell in privacy loss.
  double mesh() const { return dt_; }

 private:
  double eps_error_, delta_error_;
  double dt_ = 0, half_width_ = 0;
  // The upper part of the composed distribution: positions t_ (ascending) and masses p_, kept
  // from the largest position down to where epsilon = 0.
  std::vector<double> t_, p_;
  // Suffix sums over j >= k: mass_above_[k] = sum p_j, discounted_[k] = sum p_j e^{t_k - t_j}.
  std::vector<double> mass_above_, discounted_;
};

}  // namespace privdiff::sdk::prv
