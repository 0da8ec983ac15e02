#pragma once
/// @file
/// Rényi DP of the (Poisson-subsampled) Gaussian mechanism and its conversion to (epsilon, delta).
///
/// RDP of one step at order alpha is log(A_alpha) / (alpha - 1) with
/// A_alpha = E_{z ~ N(0, s^2)} [((1 - q) + q exp((2z - 1) / (2 s^2)))^alpha] (Mironov, Talwar &
/// Zhang 2019). Integer orders use the exact binomial sum; fractional orders the two-sided series of
/// §3.3 of that paper with the signs of the binomial coefficients kept (exact, as Opacus; not the
/// always-add variant of dp_accounting >= 2024, which over-estimates by up to a few percent).
/// Everything is evaluated in log space.

#include <privdiff/components/privacy_event.hpp>
#include <privdiff/sdk_api.hpp>

#include <string>
#include <vector>

namespace privdiff::sdk::rdp {

/// 1.1, 1.2, ..., 10.9, 11, 12, ..., 64, 80, 96, 128, 160, 192, 256, 384, 512, 768, 1024.
PRIVDIFF_SDK_API const std::vector<double>& default_orders();

/// RDP at `order` (> 1) of one step of the Gaussian mechanism with noise multiplier `sigma`
/// applied to a Poisson subsample with rate `q` (q = 1: no subsampling). +inf when it is
/// unbounded (sigma = 0, order = inf) or when the fractional-order series fails to converge
/// (a conservative answer: that order then never gives the minimum).
PRIVDIFF_SDK_API double subsampled_gaussian(double q, double sigma, double order);

/// Empty when the event tree consists of Gaussian events, each possibly Poisson-subsampled,
/// composed in any way; otherwise why not.
PRIVDIFF_SDK_API std::string cannot_evaluate(const PrivacyEvent& event);

/// RDP of `event` at each order (composition adds RDP). Throws std::invalid_argument when
/// cannot_evaluate(event) is not empty.
PRIVDIFF_SDK_API std::vector<double> event_rdp(const PrivacyEvent& event, const std::vector<double>& orders);

enum class Conversion {
  improved,  ///< Balle et al. 2020 Thm 21 / Canonne, Kamath & Steinke 2020 Prop 12 (default)
  classic,   ///< Mironov 2017 Prop 3: eps = rdp + log(1/delta) / (alpha - 1), for old published numbers
};

struct EpsilonAtOrder {
  double epsilon = 0.0;
  double order = 0.0;  ///< the order that gave the minimum
};

/// Smallest epsilon over the orders at `delta` (0 < delta < 1).
PRIVDIFF_SDK_API EpsilonAtOrder epsilon(const std::vector<double>& orders, const std::vector<double>& rdp, double delta,
                                        Conversion conversion);
/// Smallest delta over the orders at `epsilon` (>= 0), at most 1.
PRIVDIFF_SDK_API double delta(const std::vector<double>& orders, const std::vector<double>& rdp, double epsilon,
                              Conversion conversion);

}  // namespace privdiff::sdk::rdp
