#include <privdiff/privacy/private_selection.hpp>

#include <privdiff/privacy/gaussian_steps.hpp>
#include <privdiff/privacy/prv_composition.hpp>

#include <algorithm>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace privdiff::sdk::selection {

namespace {

using Kind = CandidateCount::Kind;
constexpr std::int64_t max_candidates = 1'000'000;  // a draw beyond it is treated as this (never reached in practice)

// log of the truncated negative binomial's P[K = k] for k >= 1:
// (1-gamma)^k / (gamma^-eta - 1) * prod_{l<k} (l + eta) / (l + 1), or (1-gamma)^k / (k log(1/gamma)) at eta = 0.
double log_tnb_probability(double eta, double gamma, std::int64_t k) {
  const double kk = static_cast<double>(k);
  if (eta == 0) return kk * std::log1p(-gamma) - std::log(kk) - std::log(-std::log(gamma));
  // prod_{l<k} (l + eta) / (l + 1) = Gamma(k + eta) / (Gamma(eta) Gamma(k + 1)); for eta in (-1, 0)
  // Gamma(eta) and gamma^-eta - 1 are both negative, so the ratio of absolute values is the value.
  const double log_product = std::lgamma(kk + eta) - std::lgamma(eta) - std::lgamma(kk + 1);
  const double log_norm = std::log(std::abs(std::pow(gamma, -eta) - 1));
  return kk * std::log1p(-gamma) + log_product - log_norm;
}

double poisson_log_probability(double mu, std::int64_t k) {
  const double kk = static_cast<double>(k);
  return kk * std::log(mu) - mu - std::lgamma(kk + 1);
}

}  // namespace

CandidateCount::Kind count_kind(const std::string& name) {
  if (name == "truncated_negative_binomial") return Kind::truncated_negative_binomial;
  if (name == "poisson") return Kind::poisson;
  if (name == "fixed") return Kind::fixed;
  throw std::invalid_argument("candidates must be truncated_negative_binomial, poisson or fixed; got \"" + name + "\"");
}

void check(const CandidateCount& c) {
  if (c.kind == Kind::truncated_negative_binomial) {
    if (!(c.eta > -1)) throw std::invalid_argument("eta must be > -1");
    if (!(c.gamma > 0 && c.gamma < 1)) throw std::invalid_argument("gamma must be in (0, 1)");
  } else if (c.kind == Kind::poisson) {
    if (!(c.mu > 0)) throw std::invalid_argument("mu must be > 0");
  } else if (c.count < 1) {
    throw std::invalid_argument("count must be >= 1");
  }
}

double expected_count(const CandidateCount& c) {
  check(c);
  switch (c.kind) {
    case Kind::truncated_negative_binomial:
      if (c.eta == 0) return (1 / c.gamma - 1) / std::log(1 / c.gamma);
      return c.eta * (1 - c.gamma) / (c.gamma * (1 - std::pow(c.gamma, c.eta)));
    case Kind::poisson: return c.mu;
    case Kind::fixed: return static_cast<double>(c.count);
  }
  throw std::logic_error("unknown candidate count");
}

double count_probability(const CandidateCount& c, std::int64_t k) {
  check(c);
  if (k < 0) return 0;
  switch (c.kind) {
    case Kind::truncated_negative_binomial: return k == 0 ? 0 : std::exp(log_tnb_probability(c.eta, c.gamma, k));
    case Kind::poisson: return std::exp(poisson_log_probability(c.mu, k));
    case Kind::fixed: return k == c.count ? 1 : 0;
  }
  throw std::logic_error("unknown candidate count");
}

std::int64_t count_for_uniform(const CandidateCount& c, double u) {
  check(c);
  if (!(u >= 0 && u < 1)) throw std::invalid_argument("count_for_uniform: u must be in [0, 1)");
  if (c.kind == Kind::fixed) return c.count;
  double cumulative = 0;
  for (std::int64_t k = c.kind == Kind::poisson ? 0 : 1; k < max_candidates; ++k) {
    cumulative += count_probability(c, k);
    if (u < cumulative) return k;
  }
  return max_candidates;
}

double selection_rdp(const CandidateCount& c, const CandidateBudget& b) {
  check(c);
  if (!(b.order > 1)) throw std::invalid_argument("selection: the order must be > 1");
  const double l = b.order;
  switch (c.kind) {
    case Kind::truncated_negative_binomial:
      if (!(b.order_hat >= 1)) throw std::invalid_argument("selection: order_hat must be >= 1");
      return b.rdp + (1 + c.eta) * (1 - 1 / b.order_hat) * b.rdp_hat + (1 + c.eta) * std::log(1 / c.gamma) / b.order_hat +
             std::log(expected_count(c)) / (l - 1);
    case Kind::poisson: return b.rdp + c.mu * b.delta_hat + std::log(c.mu) / (l - 1);
    case Kind::fixed: return static_cast<double>(c.count) * b.rdp;
  }
  throw std::logic_error("unknown candidate count");
}

double selection_epsilon(const CandidateCount& c, const CandidateBudget& b, double delta, rdp::Conversion conversion) {
  return rdp::epsilon({b.order}, {selection_rdp(c, b)}, delta, conversion).epsilon;
}

double prv_delta_hat(const PrivacyEvent& candidate, double eps_hat) {
  if (!(eps_hat > 0)) throw std::invalid_argument("selection: eps_hat must be > 0");
  if (!non_gaussian_reason(candidate).empty()) return std::numeric_limits<double>::infinity();
  const auto steps = gaussian_steps(candidate);
  if (steps.empty()) return 0;
  for (const auto& s : steps) {
    if (s.noise_multiplier == 0) return 1;
  }
  constexpr double truncated_mass = 1e-12;
  return prv::PrvComposition(steps, eps_hat / 100, truncated_mass, {false, eps_hat}).delta_upper(eps_hat);
}

double candidate_delta_hat(const PrivacyEvent& candidate, double order, const std::vector<double>& orders,
                           rdp::Conversion conversion, DeltaHatSource source) {
  const double eps_hat = std::log1p(1 / (order - 1));
  const double from_rdp = rdp::delta(orders, rdp::event_rdp(candidate, orders), eps_hat, conversion);
  return source == DeltaHatSource::rdp ? from_rdp : std::min(from_rdp, prv_delta_hat(candidate, eps_hat));
}

CandidateCurve candidate_curve(const PrivacyEvent& candidate, const std::vector<double>& orders, DeltaHatSource source) {
  CandidateCurve curve{orders, rdp::event_rdp(candidate, orders), {}};
  if (source == DeltaHatSource::rdp_and_prv) {
    curve.prv_delta = [candidate](double eps_hat) { return prv_delta_hat(candidate, eps_hat); };
  }
  return curve;
}

namespace {

// Theorem 6 at each order, the PRV bound (a composition each) asked only at orders that could still win:
// with delta_hat = 0 an order's epsilon is a lower bound on what it gives, so orders are tried from the
// lowest such bound up, until one cannot beat the best so far.
BestBudget best_poisson_budget(const CandidateCount& c, const CandidateCurve& curve, double delta, rdp::Conversion conversion) {
  const auto& o = curve.orders;
  std::vector<std::pair<double, std::size_t>> floors;
  for (std::size_t i = 0; i < o.size(); ++i) {
    if (!(o[i] > 1) || std::isinf(curve.rdp[i])) continue;
    floors.emplace_back(selection_epsilon(c, {o[i], curve.rdp[i]}, delta, conversion), i);
  }
  std::sort(floors.begin(), floors.end());
  BestBudget best{{}, std::numeric_limits<double>::infinity()};
  for (const auto& [floor, i] : floors) {
    if (!(floor < best.epsilon)) break;
    const double eps_hat = std::log1p(1 / (o[i] - 1));
    CandidateBudget b{o[i], curve.rdp[i]};
    b.delta_hat = rdp::delta(o, curve.rdp, eps_hat, conversion);
    if (curve.prv_delta) b.delta_hat = std::min(b.delta_hat, curve.prv_delta(eps_hat));
    const double eps = selection_epsilon(c, b, delta, conversion);
    if (eps < best.epsilon) best = {b, eps};
  }
  return best;
}

// Theorem 2 over every order pair (lambda, lambda_hat), or composition (fixed K) over the orders.
BestBudget best_order_budget(const CandidateCount& c, const CandidateCurve& curve, double delta, rdp::Conversion conversion) {
  BestBudget best{{}, std::numeric_limits<double>::infinity()};
  const auto& o = curve.orders;
  for (std::size_t i = 0; i < o.size(); ++i) {
    if (!(o[i] > 1) || std::isinf(curve.rdp[i])) continue;
    CandidateBudget b{o[i], curve.rdp[i]};
    const std::size_t hats = c.kind == Kind::truncated_negative_binomial ? o.size() : 1;
    for (std::size_t j = 0; j < hats; ++j) {
      if (c.kind == Kind::truncated_negative_binomial) {
        if (std::isinf(curve.rdp[j])) continue;
        b.order_hat = o[j];
        b.rdp_hat = curve.rdp[j];
      }
      const double eps = selection_epsilon(c, b, delta, conversion);
      if (eps < best.epsilon) best = {b, eps};
    }
  }
  return best;
}

}  // namespace

BestBudget best_budget(const CandidateCount& c, const CandidateCurve& curve, double delta, rdp::Conversion conversion) {
  check(c);
  const BestBudget best = c.kind == Kind::poisson ? best_poisson_budget(c, curve, delta, conversion)
                                                  : best_order_budget(c, curve, delta, conversion);
  if (std::isinf(best.epsilon)) throw std::invalid_argument("selection: the candidate's RDP is unbounded at every order");
  return best;
}

bool within_budget(const CandidateCount& c, const CandidateBudget& b, const PrivacyEvent& candidate,
                   const std::vector<double>& orders, rdp::Conversion conversion, DeltaHatSource source) {
  const auto at = rdp::event_rdp(candidate, {b.order});
  if (!(at[0] <= b.rdp)) return false;
  if (c.kind == Kind::truncated_negative_binomial && !(rdp::event_rdp(candidate, {b.order_hat})[0] <= b.rdp_hat)) return false;
  if (c.kind == Kind::poisson && !(candidate_delta_hat(candidate, b.order, orders, conversion, source) <= b.delta_hat)) {
    return false;
  }
  return true;
}

double calibrate_candidate(const CandidateCount& c, const CandidateBudget& b, const std::function<PrivacyEvent(double)>& events,
                           const std::vector<double>& orders, rdp::Conversion conversion, DeltaHatSource source,
                           double tolerance, double max_sigma) {
  auto fits = [&](double sigma) { return within_budget(c, b, events(sigma), orders, conversion, source); };
  if (!fits(max_sigma)) {
    throw std::runtime_error("selection: even noise multiplier " + std::to_string(max_sigma) +
                             " spends more than the sweep's per-candidate budget");
  }
  double low = 0, high = 1;
  while (!fits(high)) low = high, high *= 2;
  while (high - low > tolerance * high) {
    const double mid = 0.5 * (low + high);
    (fits(mid) ? high : low) = mid;
  }
  return high;  // fits: never a value over the budget
}

}  // namespace privdiff::sdk::selection
