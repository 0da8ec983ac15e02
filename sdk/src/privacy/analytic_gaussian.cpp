#include <privdiff/numerics/log_math.hpp>
#include <privdiff/privacy/analytic_gaussian.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace privdiff::sdk::analytic_gaussian {

using numerics::log_erfcx;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double rel_tolerance = 1e-13;

// log Phi(x) = log(1/2) + log erfcx(-x/sqrt 2) - x^2/2.
double log_phi_parts(double x, double& log_erfcx_part) {
  log_erfcx_part = log_erfcx(-x / std::sqrt(2.0));
  return -std::log(2.0) + log_erfcx_part - 0.5 * x * x;
}

}  // namespace

double log_delta(double sigma, double epsilon) {
  if (!(sigma > 0)) throw std::invalid_argument("analytic_gaussian: sigma must be > 0");
  if (!(epsilon >= 0)) throw std::invalid_argument("analytic_gaussian: epsilon must be >= 0");
  if (std::isinf(sigma)) return -inf;
  if (std::isinf(epsilon)) return -inf;
  const double a = 1 / (2 * sigma) - epsilon * sigma;
  const double b = -1 / (2 * sigma) - epsilon * sigma;
  double ex_a, ex_b;
  const double log_phi_a = log_phi_parts(a, ex_a);
  log_phi_parts(b, ex_b);
  // log(e^eps Phi(b) / Phi(a)) = eps - (b^2 - a^2)/2 + log erfcx(-b/sqrt2) - log erfcx(-a/sqrt2),
  // and (b^2 - a^2)/2 = eps exactly: the ratio needs no e^eps at all.
  const double log_ratio = ex_b - ex_a;
  if (log_ratio >= 0) return -inf;
  return log_phi_a + std::log(-std::expm1(log_ratio));
}

double delta(double sigma, double epsilon) { return std::exp(log_delta(sigma, epsilon)); }

double epsilon(double sigma, double target_delta) {
  if (!(target_delta > 0 && target_delta < 1)) throw std::invalid_argument("analytic_gaussian: delta must be in (0, 1)");
  const double log_target = std::log(target_delta);
  if (log_delta(sigma, 0) <= log_target) return 0;
  double lo = 0, hi = 1;
  while (log_delta(sigma, hi) > log_target) {
    lo = hi;
    hi *= 2;
    if (hi > 1e12) return inf;
  }
  while (hi - lo > rel_tolerance * hi) {
    const double mid = 0.5 * (lo + hi);
    if (log_delta(sigma, mid) <= log_target) hi = mid;
    else lo = mid;
  }
  return hi;
}

double sigma(double epsilon, double target_delta) {
  if (!(epsilon >= 0)) throw std::invalid_argument("analytic_gaussian: epsilon must be >= 0");
  if (!(target_delta > 0 && target_delta < 1)) throw std::invalid_argument("analytic_gaussian: delta must be in (0, 1)");
  const double log_target = std::log(target_delta);
  double lo = 1, hi = 1;
  while (log_delta(hi, epsilon) > log_target) {
    lo = hi;
    hi *= 2;
    if (hi > 1e300) return inf;
  }
  if (lo == hi) {
    while (lo > 1e-300 && log_delta(lo, epsilon) <= log_target) {
      hi = lo;
      lo /= 2;
    }
  }
  // Bisection in log sigma; hi always meets the target.
  while (hi - lo > rel_tolerance * hi) {
    const double mid = std::sqrt(lo * hi);
    if (mid <= lo || mid >= hi) break;
    if (log_delta(mid, epsilon) <= log_target) hi = mid;
    else lo = mid;
  }
  return hi;
}

}  // namespace privdiff::sdk::analytic_gaussian
