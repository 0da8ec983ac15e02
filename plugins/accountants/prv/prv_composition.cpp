#include "prv_composition.hpp"

#include <privdiff/numerics/log_math.hpp>
#include <privdiff/privacy/rdp.hpp>

#include <unsupported/Eigen/FFT>

#include <algorithm>
#include <cmath>
#include <complex>
#include <iomanip>
#include <sstream>
#include <limits>
#include <stdexcept>
#include <string>

namespace privdiff::plugins::prv {

namespace {

using privdiff::sdk::numerics::log_add;
namespace rdp = privdiff::sdk::rdp;
constexpr double inf = std::numeric_limits<double>::infinity();

double phi_cdf(double u) { return 0.5 * std::erfc(-u / std::sqrt(2.0)); }

// One step's privacy loss Y under the "remove" pair N(0, s^2) vs (1-q) N(0, s^2) + q N(1, s^2), as a
// function of the Gaussian-mixture variable x ~ (1-q) N(0, s^2) + q N(1, s^2):
//   Y = log((1 - q) + q exp((2x - 1) / (2 s^2))), increasing in x.
struct StepPrv {
  double q, sigma;

  double x_of(double t) const {  // inverse of y_of; -inf below the support t > log(1 - q)
    const double v = q + std::expm1(t);
    if (!(v > 0)) return -inf;
    return sigma * sigma * (std::log(v) - std::log(q)) + 0.5;
  }
  double y_of(double x) const {
    const double z = (2 * x - 1) / (2 * sigma * sigma);
    if (q == 1) return z;
    return log_add(std::log1p(-q), std::log(q) + z);
  }
  double cdf(double t) const {
    const double x = x_of(t);
    if (x == -inf) return 0;
    return (1 - q) * phi_cdf(x / sigma) + q * phi_cdf((x - 1) / sigma);
  }
  double sf(double t) const {
    const double x = x_of(t);
    if (x == -inf) return 1;
    return (1 - q) * phi_cdf(-x / sigma) + q * phi_cdf((1 - x) / sigma);
  }
  double mixture_density(double x) const {
    constexpr double inv_sqrt_2pi = 0.39894228040143267794;
    const double a = x / sigma, b = (x - 1) / sigma;
    return inv_sqrt_2pi / sigma * ((1 - q) * std::exp(-0.5 * a * a) + q * std::exp(-0.5 * b * b));
  }
  // Where the mixture has mass above 1e-300: x in [-38 s, 1 + 38 s].
  double x_min() const { return -38 * sigma; }
  double x_max() const { return 1 + 38 * sigma; }
};

// 20-point Gauss-Legendre nodes and weights on [-1, 1] (Newton on P_20).
struct GaussLegendre {
  static constexpr int n = 20;
  double x[n], w[n];
  GaussLegendre() {
    for (int i = 0; i < n; ++i) {
      double z = std::cos(M_PI * (i + 0.75) / (n + 0.5)), dp = 0;
      for (int it = 0; it < 100; ++it) {
        double p0 = 1, p1 = 0;
        for (int k = 1; k <= n; ++k) {
          const double p2 = p1;
          p1 = p0;
          p0 = ((2.0 * k - 1) * z * p1 - (k - 1.0) * p2) / k;
        }
        dp = n * (z * p0 - p1) / (z * z - 1);
        const double dz = p0 / dp;
        z -= dz;
        if (std::fabs(dz) < 1e-16) break;
      }
      x[i] = z;
      w[i] = 2 / ((1 - z * z) * dp * dp);
    }
  }
};

// E[Y | x in [x_lo, x_hi]] by composite Gauss-Legendre; panels resolve both the Gaussians (scale s)
// and the bend of y(x) (scale s^2).
double truncated_mean(const StepPrv& prv, double x_lo, double x_hi) {
  static const GaussLegendre gl;
  const double h_max = std::min(prv.sigma / 4, prv.sigma * prv.sigma / 2);
  const double panels = std::min(2e6, std::max(1.0, std::ceil((x_hi - x_lo) / h_max)));
  const double h = (x_hi - x_lo) / panels;
  double mass = 0, first_moment = 0;
  for (long p = 0; p < static_cast<long>(panels); ++p) {
    const double mid = x_lo + (p + 0.5) * h;
    for (int i = 0; i < GaussLegendre::n; ++i) {
      const double x = mid + 0.5 * h * gl.x[i];
      const double m = gl.w[i] * prv.mixture_density(x);
      mass += m;
      first_moment += m * prv.y_of(x);
    }
  }
  return first_moment / mass;
}

// Fast FFT size >= n: even, of the form 2^a 3^b 5^c.
std::int64_t fast_size(std::int64_t n) {
  for (std::int64_t m = std::max<std::int64_t>(2, n + (n & 1));; m += 2) {
    std::int64_t r = m;
    for (int f : {2, 3, 5}) {
      while (r % f == 0) r /= f;
    }
    if (r == 1) return m;
  }
}

std::complex<double> integer_power(std::complex<double> z, std::int64_t n) {
  std::complex<double> result(1, 0);
  while (n > 0) {
    if (n & 1) result *= z;
    z *= z;
    n >>= 1;
  }
  return result;
}

sdk::PrivacyEvent atom_event(const PrvAtom& a) {
  auto step = sdk::PrivacyEvent::poisson_sampled(a.q, sdk::PrivacyEvent::gaussian(a.sigma));
  return sdk::PrivacyEvent::self_composed(step, a.count);
}

}  // namespace

PrvComposition::PrvComposition(const std::vector<PrvAtom>& atoms, double eps_error, double delta_error,
                               double tilt_order)
    : eps_error_(eps_error), delta_error_(delta_error) {
  if (!(eps_error > 0)) throw std::invalid_argument("prv: eps_error must be > 0");
  if (!(delta_error > 0 && delta_error < 1)) throw std::invalid_argument("prv: delta_error must be in (0, 1)");
  std::int64_t n_total = 0;
  std::vector<sdk::PrivacyEvent> events;
  for (const auto& a : atoms) {
    if (!(a.sigma > 0) || !(a.q > 0 && a.q <= 1) || a.count < 1) throw std::invalid_argument("prv: bad atom");
    n_total += a.count;
    events.push_back(atom_event(a));
  }
  if (n_total == 0) return;  // spends nothing: empty distribution above 0

  // Domain [-L, L] (Remark 5.6): RDP bounds the composed tail at delta_error / 4, and each single
  // step's at delta_error / (8 N); +3 turns a delta bound into a tail-mass bound.
  const auto& orders = rdp::default_orders();
  double L = rdp::epsilon(orders, rdp::event_rdp(sdk::PrivacyEvent::composed(events), orders), delta_error / 4,
                          rdp::Conversion::improved).epsilon;
  for (const auto& a : atoms) {
    auto single = sdk::PrivacyEvent::poisson_sampled(a.q, sdk::PrivacyEvent::gaussian(a.sigma));
    L = std::max(L, rdp::epsilon(orders, rdp::event_rdp(single, orders), delta_error / (8.0 * n_total),
                                 rdp::Conversion::improved).epsilon);
  }
  L = std::max(L, eps_error) + 3;
  // Mesh (Thm 5.5).
  dt_ = eps_error / std::sqrt(static_cast<double>(n_total) * std::log(12 / delta_error) / 2);
  const double cells = 2 * std::ceil(L / dt_);
  if (cells > 1.5e9) {
    std::ostringstream os;
    os << "prv: the grid would need " << std::setprecision(3) << cells << " points (domain +-" << L << ", mesh "
       << dt_ << "); raise [accountants.prv] eps_error";
    throw std::runtime_error(os.str());
  }
  const std::int64_t M = fast_size(static_cast<std::int64_t>(cells));
  const std::int64_t half = M / 2;
  half_width_ = half * dt_;
  auto t_at = [&](std::int64_t i) { return static_cast<double>(i - half) * dt_; };  // cell centres

  const double lambda = std::clamp((tilt_order - 1) / 2, 0.0, 64.0);

  Eigen::FFT<double> fft;
  fft.SetFlag(Eigen::FFT<double>::HalfSpectrum);
  std::vector<std::complex<double>> total_spectrum;
  std::vector<double> cell(static_cast<std::size_t>(M));
  std::vector<std::complex<double>> spectrum;
  double log_normaliser = 0;  // sum_j n_j log Z_j
  double total_shift = 0;     // sum_j n_j shift_j

  for (const auto& a : atoms) {
    const StepPrv prv{a.q, a.sigma};
    // Cells [t_i - dt/2, t_i + dt/2) with any mass: between x_min and x_max of the mixture.
    const double t_lo = std::max(t_at(0) - dt_ / 2, prv.y_of(prv.x_min()));
    const double t_hi = std::min(t_at(M - 1) + dt_ / 2, prv.y_of(prv.x_max()));
    const std::int64_t i_lo = std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(t_lo / dt_ + 0.5)) + half);
    const std::int64_t i_hi =
        std::min<std::int64_t>(M - 1, static_cast<std::int64_t>(std::floor(t_hi / dt_ + 0.5)) + half);
    std::fill(cell.begin(), cell.end(), 0.0);
    // Masses from CDF differences below the median, survival-function differences above it.
    double prev_cdf = prv.cdf(t_at(i_lo) - dt_ / 2), prev_sf = 1 - prev_cdf;
    bool upper = prev_sf < 0.5;
    if (upper) prev_sf = prv.sf(t_at(i_lo) - dt_ / 2);
    double mass = 0, first_moment = 0;
    for (std::int64_t i = i_lo; i <= i_hi; ++i) {
      const double edge = t_at(i) + dt_ / 2;
      double p;
      if (!upper) {
        const double c = prv.cdf(edge);
        if (c > 0.5) {
          const double s = prv.sf(edge);
          p = (1 - s) - prev_cdf;
          prev_sf = s;
          upper = true;
        } else {
          p = c - prev_cdf;
          prev_cdf = c;
        }
      } else {
        const double s = prv.sf(edge);
        p = prev_sf - s;
        prev_sf = s;
      }
      p = std::max(0.0, p);
      cell[static_cast<std::size_t>(i)] = p;
      mass += p;
      first_moment += p * t_at(i);
    }
    if (!(mass > 0)) throw std::runtime_error("prv: a step's privacy loss has no mass on the grid");
    // Mean correction: shift the cells so their mean is the continuous (truncated) mean.
    const double x_lo = std::max(prv.x_min(), prv.x_of(t_at(i_lo) - dt_ / 2));
    const double x_hi = std::min(prv.x_max(), prv.x_of(t_at(i_hi) + dt_ / 2));
    const double shift = truncated_mean(prv, x_lo, x_hi) - first_moment / mass;
    if (!(std::fabs(shift) <= dt_)) {
      throw std::runtime_error("prv: mean correction " + std::to_string(shift) + " exceeds the mesh " +
                               std::to_string(dt_) + " (q = " + std::to_string(a.q) +
                               ", sigma = " + std::to_string(a.sigma) + ")");
    }
    // Tilt: p_i e^{lambda (t_i + shift)} / Z, computed in log space.
    double log_z = -inf;
    for (std::int64_t i = i_lo; i <= i_hi; ++i) {
      const double p = cell[static_cast<std::size_t>(i)];
      if (p > 0) log_z = log_add(log_z, std::log(p / mass) + lambda * (t_at(i) + shift));
    }
    for (std::int64_t i = i_lo; i <= i_hi; ++i) {
      double& p = cell[static_cast<std::size_t>(i)];
      if (p > 0) p = std::exp(std::log(p / mass) + lambda * (t_at(i) + shift) - log_z);
    }
    log_normaliser += static_cast<double>(a.count) * log_z;
    total_shift += static_cast<double>(a.count) * shift;

    fft.fwd(spectrum, cell);
    if (total_spectrum.empty()) total_spectrum.assign(spectrum.size(), std::complex<double>(1, 0));
    for (std::size_t k = 0; k < spectrum.size(); ++k) total_spectrum[k] *= integer_power(spectrum[k], a.count);
  }

  std::vector<double> composed;
  fft.inv(composed, total_spectrum, M);
  // The sum of N variables on the grid: circular index k' holds value N t_0 + k' dt; on the grid
  // t_0 + k dt that is k = k' - (N - 1) M/2 (mod M).
  const std::int64_t offset = ((n_total - 1) % M) * half % M;
  // Keep the part at t >= 0 (epsilon is never negative), untilted.
  std::int64_t k0 = half;
  while (k0 > 0 && t_at(k0) + total_shift >= 0) --k0;
  if (t_at(k0) + total_shift < 0) ++k0;
  for (std::int64_t k = k0; k < M; ++k) {
    const double tilted = composed[static_cast<std::size_t>((k + offset) % M)];
    const double t = t_at(k) + total_shift;
    t_.push_back(t);
    p_.push_back(tilted > 0 ? std::exp(std::log(tilted) + log_normaliser - lambda * t) : 0.0);
  }
  // Suffix sums, all of positive terms (no cancellation).
  const std::size_t n = t_.size();
  mass_above_.assign(n + 1, 0.0);
  discounted_.assign(n + 1, 0.0);
  const double decay = std::exp(-dt_);
  for (std::size_t k = n; k-- > 0;) {
    mass_above_[k] = p_[k] + mass_above_[k + 1];
    discounted_[k] = p_[k] + decay * discounted_[k + 1];
  }
}

double PrvComposition::delta_estimate(double epsilon) const {
  if (t_.empty()) return 0;
  // delta(eps) = sum_{t_j >= eps} p_j (1 - e^{eps - t_j}).
  const auto it = std::lower_bound(t_.begin(), t_.end(), epsilon);
  if (it == t_.end()) return 0;
  const std::size_t k = static_cast<std::size_t>(it - t_.begin());
  const double d_k = mass_above_[k] - discounted_[k];  // delta at t_k
  return std::max(0.0, d_k - std::expm1(epsilon - t_[k]) * discounted_[k]);
}

double PrvComposition::epsilon_estimate(double delta) const {
  if (!(delta > 0)) return inf;
  if (t_.empty() || delta_estimate(0) <= delta) return 0;
  // delta(t_k) decreases in k: find the smallest k with delta(t_k) <= delta, then solve within
  // (t_{k-1}, t_k] where exactly the cells j >= k lie above epsilon.
  std::size_t lo = 0, hi = t_.size() - 1;  // delta(t_lo) > delta >= delta(t_hi) (the top cell has delta 0)
  auto delta_at = [&](std::size_t k) { return mass_above_[k] - discounted_[k]; };
  if (delta_at(0) <= delta) hi = 0;
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (delta_at(mid) <= delta) hi = mid;
    else lo = mid;
  }
  const double d_k = delta_at(hi);
  // d_k - expm1(eps - t_k) * discounted_k = delta
  const double eps = t_[hi] + std::log1p((d_k - delta) / discounted_[hi]);
  return std::max(0.0, hi > 0 ? std::max(eps, t_[hi - 1]) : eps);
}

EpsilonBounds PrvComposition::epsilon_bounds(double delta) const {
  if (!(delta > delta_error_)) throw std::invalid_argument("prv: delta must exceed delta_error");
  return {std::max(0.0, epsilon_estimate(delta + delta_error_) - eps_error_), epsilon_estimate(delta),
          epsilon_estimate(delta - delta_error_) + eps_error_};
}

double PrvComposition::delta_upper(double epsilon) const {
  return std::min(1.0, delta_estimate(std::max(0.0, epsilon - eps_error_)) + delta_error_);
}

}  // namespace privdiff::plugins::prv
