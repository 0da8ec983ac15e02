#pragma once
/// @file
/// Privacy events as a multiset of Gaussian steps: what every Gaussian-based accountant (RDP, PRV,
/// the analytic Gaussian, zCDP, ...) starts from. SelfComposed(PoissonSampled(0.01, Gaussian(1.1)),
/// 1000) is one step kind {q 0.01, sigma 1.1} taken 1000 times; compositions add counts.

#include <privdiff/components/privacy_event.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace privdiff::sdk {

struct GaussianSteps {
  double sampling_rate;     ///< q in (0, 1]; 1 for a plain Gaussian
  double noise_multiplier;  ///< sigma >= 0
  std::int64_t count;       ///< >= 1
};

/// The noise multiplier of the one Gaussian release equivalent to `event` when it is Gaussian releases
/// of one batch (Gaussian, SelfComposed and Composed of them, NoOp): (sum_i 1 / sigma_i^2)^(-1/2), exact
/// (the joint Gaussian rotated onto its mean shift), 0 when one has no noise. So
/// PoissonSampled(q, Composed([Gaussian(s1), Gaussian(s2)])), two releases of one Poisson batch (a
/// clipped sum and a noisy count, as adaptive clipping makes), is PoissonSampled(q, Gaussian(s)) with
/// 1/s^2 = 1/s1^2 + 1/s2^2, as dp-accounting's RDP accountant evaluates it. Two PoissonSampled events
/// recorded for the one batch would instead model two independent subsamples and under-count. nullopt
/// when `event` holds a PoissonSampled event (another subsample) or no Gaussian.
PRIVDIFF_SDK_API std::optional<double> same_batch_noise_multiplier(const PrivacyEvent& event);

/// Empty when `event` is made of Gaussian events, each possibly Poisson-subsampled, composed in any
/// way (subsampling with q = 1 is no subsampling and q = 0 spends nothing, whatever they wrap), a
/// Poisson-subsampled event being a Gaussian or Gaussian releases of its one batch
/// (same_batch_noise_multiplier); otherwise why not, naming the event that is not.
PRIVDIFF_SDK_API std::string non_gaussian_reason(const PrivacyEvent& event);

/// The steps of `event`, equal (q, sigma) merged, ordered by (q, sigma). Steps that spend nothing
/// (q = 0, NoOp, zero counts) are left out. Throws std::invalid_argument with non_gaussian_reason.
PRIVDIFF_SDK_API std::vector<GaussianSteps> gaussian_steps(const PrivacyEvent& event);

}  // namespace privdiff::sdk
