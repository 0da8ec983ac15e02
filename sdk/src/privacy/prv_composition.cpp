#include <privdiff/privacy/prv_composition.hpp>

#include <privdiff/numerics/log_math.hpp>
#include <privdiff/privacy/rdp.hpp>

#include <unsupported/Eigen/FFT>

#include <algorithm>
#include <cmath>
#include <complex>
#include <functional>
#include <iomanip>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace privdiff::sdk::prv {

namespace {

using numerics::log_add;
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

// FFT size >= n: even, of the form 2^a 3^b 5^c (fast for FFTW, at most a few percent above n).
std::int64_t fft_size(std::int64_t n) {
  for (std::int64_t m = std::max<std::int64_t>(2, n + (n & 1));; m += 2) {
    std::int64_t r = m;
    for (int f : {2, 3, 5}) {
      while (r % f == 0) r /= f;
    }
    if (r == 1) return m;
  }
}

// z^n by repeated squaring (error ~log2(n) roundings, not n * |arg z| as exp(n log z) has);
// 0 when |z|^n underflows, which most high-frequency bins of a many-fold composition do.
std::complex<double> integer_power(std::complex<double> z, std::int64_t n) {
  const double norm = std::norm(z);
  if (norm == 0 || 0.5 * std::log(norm) * static_cast<double>(n) < -745) return {0, 0};
  std::complex<double> result(1, 0);
  while (n > 0) {
    if (n & 1) result *= z;
    z *= z;
    n >>= 1;
  }
  return result;
}

// Runs body(begin, end) over [0, n) split across the machine's cores (pure arithmetic loops only).
void parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& body) {
  const std::size_t workers = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 16);
  if (workers == 1 || n < 20000) {
    body(0, n);
    return;
  }
  std::vector<std::thread> threads;
  const std::size_t chunk = (n + workers - 1) / workers;
  for (std::size_t w = 1; w < workers; ++w) {
    const std::size_t begin = std::min(n, w * chunk), end = std::min(n, begin + chunk);
    threads.emplace_back([&body, begin, end] { body(begin, end); });
  }
  body(0, std::min(n, chunk));
  for (auto& t : threads) t.join();
}

// One FFT object per thread: Eigen keeps its FFTW plans per size, and planning costs as much as
// the transform itself at these sizes.
Eigen::FFT<double>& thread_fft() {
  thread_local Eigen::FFT<double> fft;
  fft.SetFlag(Eigen::FFT<double>::HalfSpectrum);
  fft.SetFlag(Eigen::FFT<double>::Unscaled);  // the inverse's 1/M goes into the normaliser instead
  return fft;
}

// The discretisation: `size` cells of width dt centred on t_i = (i - half) dt, half = size / 2.
struct Grid {
  double dt;
  std::int64_t size, half;
  double t_at(std::int64_t i) const { return static_cast<double>(i - half) * dt; }
};

// The RDP curve of each step kind (at rdp::default_orders()) and the composition's: their
// count-weighted sum. They size the domain and choose the tilt.
struct RdpCurves {
  std::vector<std::vector<double>> steps;
  std::vector<double> total;
};

// Validates before any work is done, and counts the steps (the mesh shrinks with their number).
std::int64_t checked_step_count(const std::vector<GaussianSteps>& atoms, double eps_error, double delta_error) {
  if (!(eps_error > 0)) throw std::invalid_argument("prv: eps_error must be > 0");
  if (!(delta_error > 0 && delta_error < 1)) throw std::invalid_argument("prv: delta_error must be in (0, 1)");
  std::int64_t n_total = 0;
  for (const auto& a : atoms) {
    if (!(a.noise_multiplier > 0) || !(a.sampling_rate > 0 && a.sampling_rate <= 1) || a.count < 1) {
      throw std::invalid_argument("prv: bad step");
    }
    n_total += a.count;
  }
  return n_total;
}

// RDP bounds the tails cheaply, before any grid exists: one curve per atom, summed by count.
RdpCurves rdp_curves(const std::vector<GaussianSteps>& atoms) {
  const auto& orders = rdp::default_orders();
  RdpCurves curves{{}, std::vector<double>(orders.size(), 0.0)};
  for (const auto& a : atoms) {
    curves.steps.emplace_back();
    for (std::size_t k = 0; k < orders.size(); ++k) {
      curves.steps.back().push_back(rdp::subsampled_gaussian(a.sampling_rate, a.noise_multiplier, orders[k]));
      curves.total[k] += static_cast<double>(a.count) * curves.steps.back()[k];
    }
  }
  return curves;
}

// Domain [-L, L] (Remark 5.6): RDP bounds the composed tail at delta_error / 4, and each single
// step's at delta_error / (8 N); +3 turns a delta bound into a tail-mass bound.
double rdp_domain_half_width(const RdpCurves& curves, std::int64_t n_total, double eps_error, double delta_error) {
  const auto& orders = rdp::default_orders();
  double L = rdp::epsilon(orders, curves.total, delta_error / 4, rdp::Conversion::improved).epsilon;
  for (const auto& curve : curves.steps) {
    L = std::max(L, rdp::epsilon(orders, curve, delta_error / (8.0 * static_cast<double>(n_total)),
                                 rdp::Conversion::improved).epsilon);
  }
  return std::max(L, eps_error) + 3;
}

// The mesh of Thm 5.5 over [-L, L], refused before allocation when it would take over a GB and a minute.
Grid make_grid(double L, std::int64_t n_total, double eps_error, double delta_error) {
  const double dt = eps_error / std::sqrt(static_cast<double>(n_total) * std::log(12 / delta_error) / 2);
  const double cells = 2 * std::ceil(L / dt);
  if (cells > 1.5e8) {
    std::ostringstream os;
    os << "prv: the grid would need " << std::setprecision(3) << cells << " points (domain +-" << L << ", mesh "
       << dt << "): the plan's privacy loss is too spread out for its mesh (a tiny noise multiplier, or very many "
       << "steps, spends far beyond any useful epsilon: raise noise_multiplier or lower the steps; for a "
       << "plan that is right, raise [accountants.prv] eps_error)";
    throw std::runtime_error(os.str());
  }
  const std::int64_t M = fft_size(static_cast<std::int64_t>(cells));
  return Grid{dt, M, M / 2};
}

// The tilt: half the RDP-optimal order for the question, which makes the cells that decide the
// answer the largest ones (see the header).
double tilt_for(const RdpCurves& curves, const PrvComposition::Question& question) {
  const auto& orders = rdp::default_orders();
  double order = 1;
  if (question.epsilon_at_delta) {
    order = rdp::epsilon(orders, curves.total, question.value, rdp::Conversion::improved).order;
  } else {
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < orders.size(); ++k) {
      const double d = rdp::delta({orders[k]}, {curves.total[k]}, question.value, rdp::Conversion::improved);
      if (d < best) best = d, order = orders[k];
    }
  }
  return std::clamp((order - 1) / 2, 0.0, 64.0);
}

// The grid cells [lo, hi] a step's distribution can reach: between x_min and x_max of the mixture,
// cut where the tilted mass stops mattering (so large domains stay cheap).
std::pair<std::int64_t, std::int64_t> cell_range(const StepPrv& prv, const Grid& grid, double lambda) {
  const double dt = grid.dt;
  const double t_lo = std::max(grid.t_at(0) - dt / 2, prv.y_of(prv.x_min()));
  const double t_hi = std::min(grid.t_at(grid.size - 1) + dt / 2, prv.y_of(prv.x_max()));
  const std::int64_t i_lo =
      std::max<std::int64_t>(0, static_cast<std::int64_t>(std::floor(t_lo / dt + 0.5)) + grid.half);
  std::int64_t i_hi =
      std::min<std::int64_t>(grid.size - 1, static_cast<std::int64_t>(std::floor(t_hi / dt + 0.5)) + grid.half);
  // Cells whose tilted mass p e^{lambda t} is below e^-80 cannot change any answer (the tilted
  // normaliser is >= 1 because E[Y] >= 0): find where the upper tail gets there and stop.
  auto negligible = [&](std::int64_t i) {
    const double t = grid.t_at(i) - dt / 2, sf = prv.sf(t);
    return sf <= 0 || std::log(sf) + lambda * t < -80;
  };
  // log sf(t) + lambda t rises then falls (sf ~ 1 at the bottom, super-exponentially small at
  // the top), so the negligible cells form one upper block: bisect for its start.
  if (negligible(i_hi) && !negligible(i_lo)) {
    std::int64_t lo = i_lo, hi = i_hi;
    while (hi - lo > 1) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (negligible(mid)) hi = mid;
      else lo = mid;
    }
    i_hi = hi;
  }
  return {i_lo, i_hi};
}

// The masses of cells [i_lo, i_hi] (written into `cell`, zero elsewhere), with their total and
// first moment. CDF differences below the median and survival-function differences above it, so
// tail cells keep their relative precision.
struct CellMasses {
  double mass, first_moment;
};
CellMasses cell_masses(const StepPrv& prv, const Grid& grid, std::int64_t i_lo, std::int64_t i_hi,
                       std::vector<double>& cell) {
  std::fill(cell.begin(), cell.end(), 0.0);
  // Edge values first (in parallel), then differences; `split` is the first edge whose CDF exceeds 1/2.
  const std::int64_t n_edges = i_hi - i_lo + 2;
  auto edge_t = [&](std::int64_t e) { return grid.t_at(i_lo + e) - grid.dt / 2; };
  std::int64_t split = 0, above = n_edges;
  while (above - split > 0) {
    const std::int64_t mid = split + (above - split) / 2;
    if (prv.cdf(edge_t(mid)) > 0.5) above = mid;
    else split = mid + 1;
  }
  std::vector<double> edge(static_cast<std::size_t>(n_edges));  // CDF below split, SF from split on
  parallel_for(edge.size(), [&](std::size_t begin, std::size_t end) {
    for (std::size_t e = begin; e < end; ++e) {
      const auto ei = static_cast<std::int64_t>(e);
      edge[e] = ei < split ? prv.cdf(edge_t(ei)) : prv.sf(edge_t(ei));
    }
  });
  CellMasses out{0, 0};
  for (std::int64_t e = 0; e + 1 < n_edges; ++e) {
    const auto a0 = static_cast<std::size_t>(e), a1 = a0 + 1;
    double p;
    if (e + 1 < split) p = edge[a1] - edge[a0];             // CDF - CDF
    else if (e >= split) p = edge[a0] - edge[a1];           // SF - SF
    else p = (1 - edge[a1]) - edge[a0];                     // the cell holding the median
    p = std::max(0.0, p);
    cell[static_cast<std::size_t>(i_lo + e)] = p;
    out.mass += p;
    out.first_moment += p * grid.t_at(i_lo + e);
  }
  if (!(out.mass > 0)) throw std::runtime_error("prv: a step's privacy loss has no mass on the grid");
  return out;
}

// Mean correction: the shift that gives the cells the continuous (truncated) mean, so the
// discretisation error does not accumulate over many compositions.
double mean_shift(const StepPrv& prv, const Grid& grid, std::int64_t i_lo, std::int64_t i_hi, const CellMasses& cells) {
  const double x_lo = std::max(prv.x_min(), prv.x_of(grid.t_at(i_lo) - grid.dt / 2));
  const double x_hi = std::min(prv.x_max(), prv.x_of(grid.t_at(i_hi) + grid.dt / 2));
  const double shift = truncated_mean(prv, x_lo, x_hi) - cells.first_moment / cells.mass;
  if (!(std::fabs(shift) <= grid.dt)) {
    throw std::runtime_error("prv: mean correction " + std::to_string(shift) + " exceeds the mesh " +
                             std::to_string(grid.dt) + " (q = " + std::to_string(prv.q) +
                             ", sigma = " + std::to_string(prv.sigma) + ")");
  }
  return shift;
}

// Tilts cells [i_lo, i_lo + n_cells) in place to p_i e^{lambda (t_i + shift)} / Z and returns log Z;
// in log space (w_i = log p_i + lambda t_i), since e^{lambda t} alone overflows at the top.
double tilt_cells(double* w, std::size_t n_cells, const Grid& grid, std::int64_t i_lo, double mass, double lambda,
                  double shift) {
  parallel_for(n_cells, [&](std::size_t begin, std::size_t end) {
    for (std::size_t j = begin; j < end; ++j) {
      const double t = grid.t_at(i_lo + static_cast<std::int64_t>(j));
      w[j] = w[j] > 0 ? std::log(w[j] / mass) + lambda * (t + shift) : -inf;
    }
  });
  const double w_max = *std::max_element(w, w + n_cells);
  double sum = 0;
  for (std::size_t j = 0; j < n_cells; ++j) sum += std::exp(w[j] - w_max);
  const double log_z = w_max + std::log(sum);
  parallel_for(n_cells, [&](std::size_t begin, std::size_t end) {
    for (std::size_t j = begin; j < end; ++j) w[j] = std::exp(w[j] - log_z);
  });
  return log_z;
}

// One step kind on the grid: its tilted, mean-corrected cells (in `cell`), what untilting needs.
struct TiltedStep {
  double log_z, shift;
};
TiltedStep discretise_step(const StepPrv& prv, const Grid& grid, double lambda, std::vector<double>& cell) {
  const auto [i_lo, i_hi] = cell_range(prv, grid, lambda);
  const CellMasses masses = cell_masses(prv, grid, i_lo, i_hi, cell);
  const double shift = mean_shift(prv, grid, i_lo, i_hi, masses);
  const auto n_cells = static_cast<std::size_t>(i_hi - i_lo + 1);
  return {tilt_cells(cell.data() + i_lo, n_cells, grid, i_lo, masses.mass, lambda, shift), shift};
}

// The tilted composition (circular, as the inverse FFT leaves it) and what untilts it.
struct TiltedComposition {
  std::vector<double> masses;
  double log_normaliser;  // 1/M of the inverse FFT, + sum_j n_j log Z_j
  double total_shift;     // sum_j n_j shift_j
};

// Composition is a product of spectra: each step kind's spectrum raised to its count.
TiltedComposition compose_spectra(const std::vector<GaussianSteps>& atoms, const Grid& grid, double lambda) {
  Eigen::FFT<double>& fft = thread_fft();
  std::vector<std::complex<double>> total_spectrum, spectrum;
  std::vector<double> cell(static_cast<std::size_t>(grid.size));
  TiltedComposition out{{}, -std::log(static_cast<double>(grid.size)), 0};
  for (const auto& a : atoms) {
    const TiltedStep step = discretise_step(StepPrv{a.sampling_rate, a.noise_multiplier}, grid, lambda, cell);
    out.log_normaliser += static_cast<double>(a.count) * step.log_z;
    out.total_shift += static_cast<double>(a.count) * step.shift;
    fft.fwd(spectrum, cell);
    if (total_spectrum.empty()) total_spectrum.assign(spectrum.size(), std::complex<double>(1, 0));
    parallel_for(spectrum.size(), [&](std::size_t begin, std::size_t end) {
      for (std::size_t k = begin; k < end; ++k) total_spectrum[k] *= integer_power(spectrum[k], a.count);
    });
  }
  fft.inv(out.masses, total_spectrum, grid.size);
  return out;
}

// The composed distribution at t >= 0 (epsilon is never negative), untilted, in grid order.
struct UpperPart {
  std::vector<double> t, p;
};
UpperPart upper_part(const TiltedComposition& composed, const Grid& grid, std::int64_t n_total, double lambda) {
  const std::int64_t M = grid.size;
  // The sum of N variables on the grid: circular index k' holds value N t_0 + k' dt; on the grid
  // t_0 + k dt that is k = k' - (N - 1) M/2 (mod M).
  const std::int64_t offset = ((n_total - 1) % M) * grid.half % M;
  std::int64_t k0 = grid.half;
  while (k0 > 0 && grid.t_at(k0) + composed.total_shift >= 0) --k0;
  if (grid.t_at(k0) + composed.total_shift < 0) ++k0;
  const auto n = static_cast<std::size_t>(M - k0);
  UpperPart out{std::vector<double>(n), std::vector<double>(n)};
  parallel_for(out.t.size(), [&](std::size_t begin, std::size_t end) {
    for (std::size_t j = begin; j < end; ++j) {
      const std::int64_t k = k0 + static_cast<std::int64_t>(j);
      const double tilted = composed.masses[static_cast<std::size_t>((k + offset) % M)];
      const double t = grid.t_at(k) + composed.total_shift;
      out.t[j] = t;
      out.p[j] = tilted > 0 ? std::exp(std::log(tilted) + composed.log_normaliser - lambda * t) : 0.0;
    }
  });
  return out;
}

}  // namespace

PrvComposition::PrvComposition(const std::vector<GaussianSteps>& atoms, double eps_error, double delta_error,
                               Question question)
    : eps_error_(eps_error), delta_error_(delta_error) {
  const std::int64_t n_total = checked_step_count(atoms, eps_error, delta_error);
  if (n_total == 0) return;  // spends nothing: empty distribution above 0
  const RdpCurves curves = rdp_curves(atoms);
  const double L = rdp_domain_half_width(curves, n_total, eps_error, delta_error);
  const Grid grid = make_grid(L, n_total, eps_error, delta_error);
  dt_ = grid.dt;
  half_width_ = grid.half * dt_;
  const double lambda = tilt_for(curves, question);
  UpperPart upper = upper_part(compose_spectra(atoms, grid, lambda), grid, n_total, lambda);
  t_ = std::move(upper.t);
  p_ = std::move(upper.p);
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

}  // namespace privdiff::sdk::prv
