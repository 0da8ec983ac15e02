#include <privdiff/numerics/log_math.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace privdiff::sdk::numerics {

namespace {
constexpr double inf = std::numeric_limits<double>::infinity();
constexpr double log_sqrt_2pi = 0.91893853320467274178;
}  // namespace

double log_add(double a, double b) {
  if (a == -inf) return b;
  if (b == -inf) return a;
  const double hi = std::max(a, b), lo = std::min(a, b);
  return hi + std::log1p(std::exp(lo - hi));
}

double log_sub(double a, double b) {
  if (b == -inf) return a;
  if (a < b) throw std::domain_error("log_sub: a < b");
  if (a == b) return -inf;
  const double d = b - a;  // <= 0
  // log(1 - e^d): expm1 near 0, log1p far from it.
  return a + (d > -0.6931471805599453 ? std::log(-std::expm1(d)) : std::log1p(-std::exp(d)));
}

double log_sum_exp(const std::vector<double>& x) {
  if (x.empty()) return -inf;
  const double hi = *std::max_element(x.begin(), x.end());
  if (hi == -inf || hi == inf) return hi;
  double sum = 0;
  for (double v : x) sum += std::exp(v - hi);
  return hi + std::log(sum);
}

double log_ndtr(double x) {
  if (std::isnan(x)) return x;
  if (x > 6) return std::log1p(-0.5 * std::erfc(x / std::sqrt(2.0)));  // 1 - tiny
  if (x > -20) return std::log(0.5 * std::erfc(-x / std::sqrt(2.0)));  // erfc keeps full relative precision here
  // Asymptotic series: Phi(x) = phi(x)/|x| * (1 - 1/x^2 + 3/x^4 - 15/x^6 + ...), |x| >= 20.
  const double x2 = x * x;
  double term = 1, sum = 1;
  for (int n = 1; n < 40; ++n) {
    term *= -(2.0 * n - 1) / x2;
    sum += term;
    if (std::fabs(term) < 1e-17) break;
  }
  return -0.5 * x2 - log_sqrt_2pi - std::log(-x) + std::log(sum);
}

double log_erfcx(double x) {
  if (x < 25) return x * x + std::log(std::erfc(x));  // erfc(25) ~ 8e-274: still a normal double
  // erfcx(x) = 1/(x sqrt(pi)) * (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6) + ...), converging fast for x >= 25.
  const double inv_2x2 = 1 / (2 * x * x);
  double term = 1, sum = 1;
  for (int n = 1; n < 30; ++n) {
    term *= -(2.0 * n - 1) * inv_2x2;
    sum += term;
    if (std::fabs(term) < 1e-17) break;
  }
  return -std::log(x) - 0.5 * std::log(M_PI) + std::log(sum);
}

double log_erfc(double x) {
  // erfc(x) = 2 Phi(-x sqrt 2)
  return std::log(2.0) + log_ndtr(-x * std::sqrt(2.0));
}

double log_abs_binomial(double n, double k) {
  if (k < 0) return -inf;
  // |C(n, k)| = |Gamma(n+1)| / (Gamma(k+1) |Gamma(n-k+1)|); lgamma returns log|Gamma|.
  const double nk = n - k + 1;
  if (nk <= 0 && nk == std::floor(nk)) return -inf;  // pole: C(n, k) = 0 for integer n < k
  return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(nk);
}

}  // namespace privdiff::sdk::numerics
