#include <privdiff/audit/one_run_bound.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace privdiff::sdk::audit {

namespace {

void check_counts(std::int64_t m, std::int64_t r, std::int64_t v, double delta) {
  if (!(0 <= v && v <= r && r <= m)) {
    throw std::invalid_argument("one-run audit: need 0 <= correct <= guesses <= canaries, got " + std::to_string(v) +
                                ", " + std::to_string(r) + ", " + std::to_string(m));
  }
  if (!(delta >= 0 && delta <= 1)) throw std::invalid_argument("one-run audit: delta must be in [0, 1]");
}

// log P[Binomial(r, q) = k] with log q and log(1 - q) given (both <= 0, exact for large eps).
double log_binomial_pmf(std::int64_t r, std::int64_t k, double log_q, double log_not_q) {
  const auto rd = static_cast<double>(r), kd = static_cast<double>(k);
  return std::lgamma(rd + 1) - std::lgamma(kd + 1) - std::lgamma(rd - kd + 1) + kd * log_q + (rd - kd) * log_not_q;
}

}  // namespace

double one_run_p_value(std::int64_t m, std::int64_t r, std::int64_t v, double eps, double delta) {
  check_counts(m, r, v, delta);
  if (!(eps >= 0) || !std::isfinite(eps)) throw std::invalid_argument("one-run audit: eps must be finite and >= 0");
  // q = e^eps / (1 + e^eps): the accuracy of eps-DP randomized response, in log space.
  const double log_q = -std::log1p(std::exp(-eps));
  const double log_not_q = -eps + log_q;
  std::vector<double> pmf(static_cast<std::size_t>(r) + 1);
  for (std::int64_t k = 0; k <= r; ++k) pmf[static_cast<std::size_t>(k)] = std::exp(log_binomial_pmf(r, k, log_q, log_not_q));
  // beta = P[Binomial(r, q) >= v], summed from the small tail end up for accuracy.
  double beta = 0;
  for (std::int64_t k = r; k >= v; --k) beta += pmf[static_cast<std::size_t>(k)];
  if (delta == 0) return std::min(beta, 1.0);
  // alpha = max_i P[v > Binomial(r, q) >= v - i] / i (Cor. 5.4's delta term).
  double alpha = 0, below = 0;
  for (std::int64_t i = 1; i <= v; ++i) {
    below += pmf[static_cast<std::size_t>(v - i)];
    alpha = std::max(alpha, below / static_cast<double>(i));
  }
  return std::min(beta + alpha * delta * 2 * static_cast<double>(m), 1.0);
}

double one_run_epsilon_lower_bound(std::int64_t m, std::int64_t r, std::int64_t v, double delta, double beta) {
  check_counts(m, r, v, delta);
  if (!(beta > 0 && beta < 1)) throw std::invalid_argument("one-run audit: significance must be in (0, 1)");
  // The p-value grows with eps; keep p(lo) < beta <= p(hi).
  if (one_run_p_value(m, r, v, 0, delta) >= beta) return 0;
  double lo = 0, hi = 1;
  while (one_run_p_value(m, r, v, hi, delta) < beta) {
    lo = hi;
    hi *= 2;
    if (hi > 1e4) return lo;  // every eps we can represent is rejected (v = r, tiny delta)
  }
  while (hi - lo > 1e-9 * std::max(1.0, hi)) {
    const double mid = (lo + hi) / 2;
    (one_run_p_value(m, r, v, mid, delta) < beta ? lo : hi) = mid;
  }
  return lo;
}

AuditResult audit_canary_scores(const std::vector<double>& scores, const std::vector<bool>& included,
                                      double delta, double confidence) {
  if (scores.size() != included.size()) throw std::invalid_argument("canary audit: one score per canary");
  if (!(confidence > 0 && confidence < 1)) throw std::invalid_argument("canary audit: confidence must be in (0, 1)");
  const auto m = static_cast<std::int64_t>(scores.size());
  AuditResult result;
  result.canaries = m;
  result.confidence = confidence;
  std::vector<std::int64_t> ks;
  for (const double share : {0.01, 0.02, 0.05, 0.1, 0.2, 0.5}) {
    const auto k = static_cast<std::int64_t>(share * static_cast<double>(m));
    if (k >= 1 && (ks.empty() || k > ks.back())) ks.push_back(k);
  }
  if (ks.empty()) return result;
  std::vector<std::int64_t> order(static_cast<std::size_t>(m));
  std::iota(order.begin(), order.end(), 0);
  // Highest score first; ties broken by index (fixed before the truth is looked at).
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return scores[static_cast<std::size_t>(a)] > scores[static_cast<std::size_t>(b)];
  });
  // Two rules per k: the k highest guessed in (the rest abstained), and that plus the k lowest
  // guessed out. The first wins when only some canaries stand out (e.g. a part of the model).
  const double beta = (1 - confidence) / static_cast<double>(2 * ks.size());
  auto consider = [&](std::int64_t guesses, std::int64_t correct) {
    const double eps = one_run_epsilon_lower_bound(m, guesses, correct, delta, beta);
    if (eps > result.epsilon_lower || result.guesses == 0) {
      result.epsilon_lower = eps;
      result.guesses = guesses;
      result.correct = correct;
    }
  };
  for (const std::int64_t k : ks) {
    std::int64_t top = 0, bottom = 0;
    for (std::int64_t j = 0; j < k; ++j) {
      top += included[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])] ? 1 : 0;
      bottom += included[static_cast<std::size_t>(order[static_cast<std::size_t>(m - 1 - j)])] ? 0 : 1;
    }
    consider(k, top);
    consider(2 * k, top + bottom);
  }
  return result;
}

}  // namespace privdiff::sdk::audit
