#pragma once
/// @file
/// Empirical lower bounds on epsilon from one training run (Steinke, Nasr, Jagielski, "Privacy
/// auditing with one (1) training run", NeurIPS 2023). m canaries are each included in the
/// training data independently with probability 1/2; after training, an auditor guesses for r of
/// them whether they were included and gets v right. Under (eps, delta)-DP the number of correct
/// guesses is dominated by Binomial(r, e^eps / (1 + e^eps)) up to a delta term (Cor. 5.4); a run
/// whose v is too large for that rejects the hypothesis "the algorithm is (eps, delta)-DP".
///
/// The bound is a statistical statement about the run: with probability >= confidence a correct
/// (eps, delta)-DP algorithm gives eps_lower <= eps. A bound above the accountant's epsilon means
/// the implementation (or its accounting) is wrong.

#include <privdiff/components/audit_result.hpp>
#include <privdiff/sdk_api.hpp>

#include <cstdint>
#include <vector>

namespace privdiff::sdk::audit {

/// P[>= v correct of r guesses] for m canaries under (eps, delta)-DP: Steinke et al.'s p-value
/// (App. D, p_value_DP_audit). Throws std::invalid_argument unless 0 <= v <= r <= m, eps >= 0,
/// 0 <= delta <= 1.
PRIVDIFF_SDK_API double one_run_p_value(std::int64_t m, std::int64_t r, std::int64_t v, double eps, double delta);

/// The largest eps whose hypothesis (eps, delta)-DP the run rejects at significance `beta`
/// (= 1 - confidence): p_value(eps) < beta, found by bracketing and bisection to 1e-9 and rounded
/// down. 0 when even eps = 0 is not rejected.
PRIVDIFF_SDK_API double one_run_epsilon_lower_bound(std::int64_t m, std::int64_t r, std::int64_t v, double delta,
                                                    double beta);

/// Turns scores into the best lower bound: a higher score means "more likely included". For each k
/// of a fixed grid (1%, 2%, 5%, 10%, 20%, 50% of m) two rules: the k highest scores guessed
/// included, and the same plus the k lowest guessed excluded, abstaining on the rest. Each rule is
/// tested at significance (1 - confidence) / (rules), so taking the best of them keeps the
/// confidence (Bonferroni). `included[i]` is the truth for canary i.
PRIVDIFF_SDK_API AuditResult audit_canary_scores(const std::vector<double>& scores,
                                                       const std::vector<bool>& included, double delta,
                                                       double confidence = 0.95);

}  // namespace privdiff::sdk::audit
