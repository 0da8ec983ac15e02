#pragma once
/// @file
/// Log-space arithmetic for privacy accounting, where probabilities run from 1 down to 1e-300 and
/// moments up to e^1000: never form 1 - Phi(x), never exponentiate before you must.

#include <privdiff/sdk_api.hpp>

#include <vector>

namespace privdiff::sdk::numerics {

/// log(e^a + e^b), exact for -inf inputs.
PRIVDIFF_SDK_API double log_add(double a, double b);
/// log(e^a - e^b) for a >= b; -inf when a == b. Throws std::domain_error when a < b.
PRIVDIFF_SDK_API double log_sub(double a, double b);
/// log(sum_i e^{x_i}); -inf for an empty input.
PRIVDIFF_SDK_API double log_sum_exp(const std::vector<double>& x);
/// log Phi(x), Phi the standard normal CDF, accurate (relative 1e-14) for every finite x,
/// including x << 0 where Phi(x) underflows double.
PRIVDIFF_SDK_API double log_ndtr(double x);
/// log erfcx(x) = x^2 + log erfc(x) (the scaled complementary error function), accurate for every
/// finite x without overflow.
PRIVDIFF_SDK_API double log_erfcx(double x);
/// log erfc(x), accurate for every finite x.
PRIVDIFF_SDK_API double log_erfc(double x);
/// log |binomial(n, k)| for real n and integer k >= 0 (generalised binomial coefficient);
/// -inf where it is zero.
PRIVDIFF_SDK_API double log_abs_binomial(double n, double k);

}  // namespace privdiff::sdk::numerics
