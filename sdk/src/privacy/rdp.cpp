#include <privdiff/numerics/integrate.hpp>
#include <privdiff/numerics/log_math.hpp>
#include <privdiff/privacy/gaussian_steps.hpp>
#include <privdiff/privacy/rdp.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace privdiff::sdk::rdp {

using numerics::log_abs_binomial;
using numerics::log_add;
using numerics::log_erfc;
using numerics::log_sub;

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// log A_alpha for integer alpha. A = sum_i C(a,i) q^i (1-q)^(a-i) exp((i^2 - i) / (2 s^2)), and
// the binomial weights sum to 1, so A - 1 = sum_{i>=2} C(a,i) q^i (1-q)^(a-i) expm1((i^2-i)/(2s^2)):
// positive terms only, and log A = log1p(A - 1) keeps full relative precision even when A - 1 is
// 1e-20 (tiny q, large sigma), where summing A itself would round log A to 0.
double log_a_integer(double q, double sigma, long alpha) {
  const double log_q = std::log(q), log_1mq = std::log1p(-q);
  const double inv_2s2 = 1 / (2 * sigma * sigma);
  double log_a_minus_1 = -inf;
  for (long i = 2; i <= alpha; ++i) {
    const double di = static_cast<double>(i);
    const double x = (di * di - di) * inv_2s2;
    const double log_expm1 = x > 30 ? x + std::log1p(-std::exp(-x)) : std::log(std::expm1(x));
    const double term = log_abs_binomial(static_cast<double>(alpha), di) + di * log_q +
                        static_cast<double>(alpha - i) * log_1mq + log_expm1;
    log_a_minus_1 = log_add(log_a_minus_1, term);
  }
  return log_add(0.0, log_a_minus_1);
}

// log((1 + u)^a - 1 - a u) (the argument is >= 0 for u >= -1, a > 1), without cancellation near
// u = 0 and without overflow for large u.
double log_excess_power(double u, double a) {
  if (std::fabs(u) * std::max(a, 1.0) < 0.5) {
    // sum_{k>=2} C(a, k) u^k: terms shrink at least geometrically (ratio < 1/2) here. Beyond it the
    // closed form below loses at most ~2e-16 / (a u) relative: the two branches agree to ~1e-15,
    // so the adaptive quadrature sees a smooth integrand.
    double term = a * (a - 1) / 2 * u * u, sum = term;
    for (int k = 3; k < 400 && std::fabs(term) > 1e-18 * std::fabs(sum); ++k) {
      term *= (a - k + 1) / k * u;
      sum += term;
    }
    return std::log(sum);
  }
  const double p = a * std::log1p(u);  // log (1 + u)^a
  if (u < 0) return std::log(std::expm1(p) - a * u);
  return p + std::log1p(-(1 + a * u) * std::exp(-p));
}

// log(A_alpha - 1) for fractional alpha by quadrature, for when A is so close to 1 that the
// series (which sums A itself) would lose relative precision. With u = q (e^{(2z-1)/(2s^2)} - 1),
// E[u] = 0, so A - 1 = E[(1 + u)^alpha - 1 - alpha u]: an integral of a non-negative function.
double log_a_minus_1_quadrature(double q, double sigma, double alpha) {
  constexpr double inv_sqrt_2pi = 0.39894228040143267794;
  auto integrand = [&](double z) {
    const double u = q * std::expm1((2 * z - 1) / (2 * sigma * sigma));
    const double w = z / sigma;
    if (u == 0) return 0.0;
    return inv_sqrt_2pi / sigma * std::exp(-0.5 * w * w + log_excess_power(u, alpha));
  };
  // The integrand lives within 40 sigma of 0 and of alpha (the mode of the q e^{...} part).
  const double value = numerics::integrate(integrand, -40 * sigma, std::max(alpha, 1.0) + 40 * sigma, 1e-11, 0, 32);
  return value > 0 ? std::log(value) : -inf;
}

// log A_alpha for fractional alpha: the series of Mironov, Talwar & Zhang (2019) §3.3, split at
// z0 = s^2 log(1/q - 1) + 1/2, keeping the signs of the binomial coefficients. Positive and
// negative terms are accumulated separately. Past i = alpha the terms alternate in sign and shrink,
// so the tail is smaller than the first term left out: stop when that is 36 e-folds (2e-16) below
// the total.
double log_a_fractional(double q, double sigma, double alpha) {
  const double log_q = std::log(q), log_1mq = std::log1p(-q);
  const double inv_2s2 = 1 / (2 * sigma * sigma);
  const double z0 = sigma * sigma * std::log(1 / q - 1) + 0.5;
  const double scale = std::sqrt(2.0) * sigma;
  const double log_half = -std::log(2.0);
  double pos0 = -inf, neg0 = -inf, pos1 = -inf, neg1 = -inf;
  int sign = 1;  // sign of C(alpha, i): C(alpha, i) = C(alpha, i - 1) (alpha - i + 1) / i
  constexpr long max_terms = 2000000;
  for (long i = 0; i < max_terms; ++i) {
    const double di = static_cast<double>(i);
    if (i > 0 && alpha - di + 1 < 0) sign = -sign;
    const double j = alpha - di;
    const double log_coef = log_abs_binomial(alpha, di);
    const double log_s0 = log_coef + di * log_q + j * log_1mq + (di * di - di) * inv_2s2 + log_half +
                          log_erfc((di - z0) / scale);
    const double log_s1 = log_coef + j * log_q + di * log_1mq + (j * j - j) * inv_2s2 + log_half +
                          log_erfc((z0 - j) / scale);
    if (sign > 0) {
      pos0 = log_add(pos0, log_s0);
      pos1 = log_add(pos1, log_s1);
    } else {
      neg0 = log_add(neg0, log_s0);
      neg1 = log_add(neg1, log_s1);
    }
    const double total = log_add(pos0, pos1);
    if (di > alpha + 1 && std::max(log_s0, log_s1) < total - 36) {
      // a0 and a1 are integrals of positive functions; rounding can only make neg ~ pos.
      const double a0 = neg0 < pos0 ? log_sub(pos0, neg0) : -inf;
      const double a1 = neg1 < pos1 ? log_sub(pos1, neg1) : -inf;
      return log_add(a0, a1);
    }
  }
  return inf;  // did not converge: conservative
}

}  // namespace

const std::vector<double>& default_orders() {
  static const std::vector<double> orders = [] {
    std::vector<double> o;
    for (int x = 1; x <= 99; ++x) o.push_back(1 + x / 10.0);
    for (int a = 11; a <= 64; ++a) o.push_back(a);
    for (double a : {80, 96, 128, 160, 192, 256, 384, 512, 768, 1024}) o.push_back(a);
    return o;
  }();
  return orders;
}

double subsampled_gaussian(double q, double sigma, double order) {
  if (!(q >= 0 && q <= 1)) throw std::invalid_argument("rdp: sampling rate must be in [0, 1]");
  if (!(sigma >= 0)) throw std::invalid_argument("rdp: noise multiplier must be >= 0");
  if (!(order > 1)) throw std::invalid_argument("rdp: orders must be > 1");
  if (q == 0) return 0;
  if (sigma == 0 || std::isinf(order)) return inf;
  if (q == 1) return order / (2 * sigma * sigma);
  if (order == std::floor(order) && order < 1e7) {
    return std::max(0.0, log_a_integer(q, sigma, static_cast<long>(order)) / (order - 1));
  }
  double log_a = log_a_fractional(q, sigma, order);
  // A ~ 1: the series sums A itself, so log A keeps only ~1e-15 absolute precision; below 1e-5
  // that is worse than 1e-10 relative and the quadrature of A - 1 takes over.
  if (log_a < 1e-5) log_a = log_add(0.0, log_a_minus_1_quadrature(q, sigma, order));
  return std::max(0.0, log_a / (order - 1));
}

std::string cannot_evaluate(const PrivacyEvent& event) { return non_gaussian_reason(event); }

std::vector<double> event_rdp(const PrivacyEvent& event, const std::vector<double>& orders) {
  if (auto why = cannot_evaluate(event); !why.empty()) throw std::invalid_argument("rdp: " + why);
  for (double a : orders) {
    if (!(a > 1)) throw std::invalid_argument("rdp: orders must be > 1");
  }
  // Composition adds RDP: each kind of step once per order, times its count.
  std::vector<double> rdp(orders.size(), 0.0);
  for (const auto& steps : gaussian_steps(event)) {
    for (std::size_t k = 0; k < orders.size(); ++k) {
      rdp[k] += static_cast<double>(steps.count) * subsampled_gaussian(steps.sampling_rate, steps.noise_multiplier, orders[k]);
    }
  }
  return rdp;
}

namespace {
void check_curve(const std::vector<double>& orders, const std::vector<double>& rdp) {
  if (orders.size() != rdp.size() || orders.empty()) {
    throw std::invalid_argument("rdp: need one RDP value per order, and at least one order");
  }
}
}  // namespace

EpsilonAtOrder epsilon(const std::vector<double>& orders, const std::vector<double>& rdp, double delta,
                       Conversion conversion) {
  check_curve(orders, rdp);
  if (!(delta > 0 && delta < 1)) throw std::invalid_argument("rdp: delta must be in (0, 1)");
  const double log_delta = std::log(delta);
  EpsilonAtOrder best{inf, orders.front()};
  for (std::size_t k = 0; k < orders.size(); ++k) {
    const double a = orders[k], r = rdp[k];
    if (std::isinf(r)) continue;
    double eps;
    if (conversion == Conversion::classic) {
      eps = r - log_delta / (a - 1);
    } else if (delta * delta + std::expm1(-r) >= 0) {
      eps = 0;  // delta >= sqrt(1 - e^-r): the KL bound already gives (0, delta)
    } else {
      eps = r + std::log1p(-1 / a) - (log_delta + std::log(a)) / (a - 1);
    }
    eps = std::max(0.0, eps);
    if (eps < best.epsilon) best = {eps, a};
  }
  return best;
}

double delta(const std::vector<double>& orders, const std::vector<double>& rdp, double epsilon,
             Conversion conversion) {
  check_curve(orders, rdp);
  if (!(epsilon >= 0)) throw std::invalid_argument("rdp: epsilon must be >= 0");
  double best_log = 0;  // delta <= 1
  for (std::size_t k = 0; k < orders.size(); ++k) {
    const double a = orders[k], r = rdp[k];
    if (std::isinf(r)) continue;
    double log_d;
    if (conversion == Conversion::classic) {
      log_d = (a - 1) * (r - epsilon);
    } else {
      log_d = std::min(0.5 * std::log1p(-std::exp(-r)), (a - 1) * (r - epsilon + std::log1p(-1 / a)) - std::log(a));
    }
    best_log = std::min(best_log, log_d);
  }
  return std::exp(best_log);
}

}  // namespace privdiff::sdk::rdp
