#pragma once
/// @file
/// The privacy of hyperparameter tuning: run a DP candidate (each with hyperparameters drawn at
/// random) K times, K itself random, and release only the best. Papernot & Steinke, "Hyperparameter
/// Tuning with Renyi Differential Privacy" (ICLR 2022): if every candidate is (lambda, e)-RDP and
/// (lambda_hat, e_hat)-RDP and K ~ the truncated negative binomial D_{eta,gamma}, the selection is
/// (lambda, e')-RDP with
///   e' = e + (1 + eta)(1 - 1/lambda_hat) e_hat + (1 + eta) log(1/gamma) / lambda_hat + log(E[K]) / (lambda - 1)
/// (their Theorem 2); with K ~ Poisson(mu) and every candidate also (e_hat, d_hat)-DP where
/// e^e_hat <= 1 + 1/(lambda - 1), e' = e + mu d_hat + log(mu) / (lambda - 1) (their Theorem 6).
/// A fixed K releases nothing the theorems cover: its cost is the composition of all K runs.
/// The released output is the best candidate alone; K, the other candidates and their scores are not.

#include <privdiff/components/privacy_event.hpp>
#include <privdiff/privacy/rdp.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace privdiff::sdk::selection {

/// How many candidates a sweep runs.
struct CandidateCount {
  enum class Kind { truncated_negative_binomial, poisson, fixed };
  Kind kind = Kind::truncated_negative_binomial;
  double eta = 1, gamma = 0.25;  ///< D_{eta,gamma}: eta > -1 (eta = 1: geometric, 0: logarithmic), gamma in (0, 1)
  double mu = 4;                 ///< Poisson mean
  std::int64_t count = 4;        ///< fixed K
};

/// "truncated_negative_binomial", "poisson", "fixed" -> the kind; throws std::invalid_argument.
PRIVDIFF_SDK_API CandidateCount::Kind count_kind(const std::string& name);
/// Throws std::invalid_argument naming the parameter out of its range.
PRIVDIFF_SDK_API void check(const CandidateCount& count);
/// E[K]: eta (1 - gamma) / (gamma (1 - gamma^eta)) (eta != 0), (1/gamma - 1) / log(1/gamma) (eta = 0); mu; K.
PRIVDIFF_SDK_API double expected_count(const CandidateCount& count);
/// P[K = k] (k >= 0).
PRIVDIFF_SDK_API double count_probability(const CandidateCount& count, std::int64_t k);
/// K for a uniform draw u in [0, 1): the smallest k whose cumulative probability exceeds u.
PRIVDIFF_SDK_API std::int64_t count_for_uniform(const CandidateCount& count, double u);

/// What every candidate may spend: RDP at most `rdp` at order `order`, and `rdp_hat` at `order_hat`
/// (truncated negative binomial); (eps_hat, delta_hat)-DP with eps_hat = log1p(1/(order - 1)) (Poisson).
struct CandidateBudget {
  double order = 0, rdp = 0;
  double order_hat = 0, rdp_hat = 0;
  double delta_hat = 0;
};

/// The selection's RDP at budget.order (Theorem 2, Theorem 6, or K-fold composition).
PRIVDIFF_SDK_API double selection_rdp(const CandidateCount& count, const CandidateBudget& budget);
/// The selection's epsilon at `delta`: selection_rdp converted at budget.order.
PRIVDIFF_SDK_API double selection_epsilon(const CandidateCount& count, const CandidateBudget& budget, double delta,
                                          rdp::Conversion conversion);

/// Where Theorem 6's delta_hat (a candidate's delta at eps_hat) comes from: its RDP curve through the
/// conversion, or the smaller of that and the PRV accountant's upper bound (Gopi, Lee & Wutschitz 2021)
/// where the candidate is made of Gaussian steps. Both are upper bounds, so their minimum is one; PRV is
/// much tighter at the small eps_hat the theorem needs (log1p(1/(lambda - 1)): 0.05 at order 21).
enum class DeltaHatSource { rdp, rdp_and_prv };

/// A candidate's RDP curve and what it implies for a budget; with_prv: delta_hat(eps_hat) from the PRV
/// accountant too (DeltaHatSource::rdp_and_prv), for Poisson counts.
struct CandidateCurve {
  std::vector<double> orders, rdp;
  std::function<double(double eps_hat)> prv_delta;  ///< empty: RDP only
};
PRIVDIFF_SDK_API CandidateCurve candidate_curve(const PrivacyEvent& candidate, const std::vector<double>& orders,
                                                DeltaHatSource source = DeltaHatSource::rdp);

/// The PRV accountant's upper bound on `candidate`'s delta at `eps_hat` (> 0), its grid refined to 1% of
/// eps_hat (the bound is the estimate at eps_hat less the mesh, plus the truncated mass, 1e-12); +inf
/// where the candidate is not made of Gaussian steps; 1 where a step has no noise.
PRIVDIFF_SDK_API double prv_delta_hat(const PrivacyEvent& candidate, double eps_hat);

/// Theorem 6's delta_hat of `candidate` at the budget order `order` (eps_hat = log1p(1/(order - 1))).
PRIVDIFF_SDK_API double candidate_delta_hat(const PrivacyEvent& candidate, double order, const std::vector<double>& orders,
                                            rdp::Conversion conversion, DeltaHatSource source);

/// The budget a candidate with this curve spends that gives the smallest selection epsilon at
/// `delta`: over the order pairs (truncated negative binomial) or the orders (Poisson, with the curve's
/// delta_hat source; fixed).
struct BestBudget {
  CandidateBudget budget;
  double epsilon = 0;
};
PRIVDIFF_SDK_API BestBudget best_budget(const CandidateCount& count, const CandidateCurve& curve, double delta,
                                        rdp::Conversion conversion);
/// Whether a candidate spends at most `budget` (its RDP at the budget's orders; for Poisson its delta_hat
/// from `source`, its RDP over `orders`).
PRIVDIFF_SDK_API bool within_budget(const CandidateCount& count, const CandidateBudget& budget, const PrivacyEvent& candidate,
                                    const std::vector<double>& orders, rdp::Conversion conversion,
                                    DeltaHatSource source = DeltaHatSource::rdp);

/// The smallest noise multiplier (to a relative `tolerance`) whose candidate stays within `budget`;
/// `events(sigma)` is what the candidate spends. Throws std::runtime_error when even `max_sigma` does not.
PRIVDIFF_SDK_API double calibrate_candidate(const CandidateCount& count, const CandidateBudget& budget,
                                            const std::function<PrivacyEvent(double)>& events,
                                            const std::vector<double>& orders, rdp::Conversion conversion,
                                            DeltaHatSource source = DeltaHatSource::rdp, double tolerance = 1e-4,
                                            double max_sigma = 1e4);

}  // namespace privdiff::sdk::selection
