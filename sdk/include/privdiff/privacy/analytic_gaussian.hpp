#pragma once
/// @file
/// The exact privacy curve of the Gaussian mechanism (Balle & Wang 2018, "Improving the Gaussian
/// mechanism for differential privacy"): with L2 sensitivity 1 and noise N(0, sigma^2),
///   delta(eps) = Phi(1/(2 sigma) - eps sigma) - e^eps Phi(-1/(2 sigma) - eps sigma).
/// Evaluated in log space through erfcx, where the e^eps factor cancels exactly, so it stays
/// accurate for delta down to 1e-300 and epsilon up to 1e3 (the reference code's absolute
/// tolerance and erf-based Phi lose both). Searches use relative tolerances and always return the
/// conservative end of the final bracket.

#include <privdiff/sdk_api.hpp>

namespace privdiff::sdk::analytic_gaussian {

/// log delta(eps) for noise multiplier sigma (> 0) and eps >= 0; -inf when delta is 0.
PRIVDIFF_SDK_API double log_delta(double sigma, double epsilon);
/// delta(eps); 0 when it underflows.
PRIVDIFF_SDK_API double delta(double sigma, double epsilon);
/// Smallest eps >= 0 with delta(sigma, eps) <= target (within relative 1e-13, never below).
PRIVDIFF_SDK_API double epsilon(double sigma, double target_delta);
/// Smallest sigma with delta(sigma, eps) <= target (within relative 1e-13, never below):
/// the analytically calibrated Gaussian mechanism.
PRIVDIFF_SDK_API double sigma(double epsilon, double target_delta);

}  // namespace privdiff::sdk::analytic_gaussian
