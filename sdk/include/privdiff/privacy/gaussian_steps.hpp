#pragma once
/// @file
/// Privacy events as a multiset of Gaussian steps: what every Gaussian-based accountant (RDP, PRV,
/// the analytic Gaussian, zCDP, ...) starts from. SelfComposed(PoissonSampled(0.01, Gaussian(1.1)),
/// 1000) is one step kind {q 0.01, sigma 1.1} taken 1000 times; compositions add counts.

#include <privdiff/components/privacy_event.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace privdiff::sdk {

struct GaussianSteps {
  double sampling_rate;     ///< q in (0, 1]; 1 for a plain Gaussian
  double noise_multiplier;  ///< sigma >= 0
  std::int64_t count;       ///< >= 1
};

/// Empty when `event` is made of Gaussian events, each possibly Poisson-subsampled, composed in any
/// way (subsampling with q = 1 is no subsampling and q = 0 spends nothing, whatever they wrap);
/// otherwise why not, naming the event that is not.
PRIVDIFF_SDK_API std::string non_gaussian_reason(const PrivacyEvent& event);

/// The steps of `event`, equal (q, sigma) merged, ordered by (q, sigma). Steps that spend nothing
/// (q = 0, NoOp, zero counts) are left out. Throws std::invalid_argument with non_gaussian_reason.
PRIVDIFF_SDK_API std::vector<GaussianSteps> gaussian_steps(const PrivacyEvent& event);

}  // namespace privdiff::sdk
