// The accounting of privdiff sweep against mpmath references (scripts/generate_selection_fixtures.py):
// the truncated negative binomial's probabilities and mean, and the selection's epsilon for three
// candidates (T steps of the subsampled Gaussian) under Papernot & Steinke's Theorem 2 (three
// (eta, gamma)), Theorem 6 (Poisson) and K-fold composition, minimised over the integer orders
// 2..64 — to 1e-6 relative, with the same minimising orders.
#include "../test_csv.hpp"

#include <privdiff/privacy/private_selection.hpp>

#include <gtest/gtest.h>

#include <cmath>

using namespace privdiff::sdk;
using privdiff::testing::num;
using selection::CandidateCount;

namespace {

CandidateCount count_of(const std::string& kind, const std::string& a, const std::string& b) {
  CandidateCount c;
  c.kind = selection::count_kind(kind);
  if (c.kind == CandidateCount::Kind::truncated_negative_binomial) c.eta = std::stod(a), c.gamma = std::stod(b);
  if (c.kind == CandidateCount::Kind::poisson) c.mu = std::stod(a);
  if (c.kind == CandidateCount::Kind::fixed) c.count = std::stoll(a);
  return c;
}

std::vector<double> integer_orders() {
  std::vector<double> out;
  for (int a = 2; a <= 64; ++a) out.push_back(a);
  return out;
}

}  // namespace

TEST(PrivateSelection, TruncatedNegativeBinomialMatchesItsDefinition) {
  const auto rows = privdiff::testing::read_csv(std::string(PRIVDIFF_TEST_FIXTURE_DIR) + "/accountants/selection_count.csv");
  ASSERT_EQ(rows.size(), 20u);
  for (const auto& row : rows) {
    const CandidateCount c = count_of("truncated_negative_binomial", row.at("eta"), row.at("gamma"));
    const auto k = static_cast<std::int64_t>(num(row, "k"));
    EXPECT_NEAR(selection::count_probability(c, k), num(row, "probability"), 1e-12 * num(row, "probability")) << row.at("eta");
    EXPECT_NEAR(selection::expected_count(c), num(row, "mean"), 1e-12 * num(row, "mean"));
    EXPECT_NEAR(num(row, "mean_by_sum"), num(row, "mean"), 1e-12 * num(row, "mean"));  // the closed form is E[K]
  }
}

TEST(PrivateSelection, EpsilonMatchesHighPrecisionReferences) {
  const auto rows = privdiff::testing::read_csv(std::string(PRIVDIFF_TEST_FIXTURE_DIR) + "/accountants/selection.csv");
  ASSERT_EQ(rows.size(), 15u);
  for (const auto& row : rows) {
    const CandidateCount c = count_of(row.at("distribution"), row.at("a"), row.at("b"));
    const auto candidate = PrivacyEvent::self_composed(
        PrivacyEvent::poisson_sampled(num(row, "q"), PrivacyEvent::gaussian(num(row, "sigma"))),
        static_cast<std::int64_t>(num(row, "steps")));
    const auto best = selection::best_budget(c, selection::candidate_curve(candidate, integer_orders()), num(row, "delta"),
                                             rdp::Conversion::improved);
    const std::string what = row.at("distribution") + " " + row.at("a") + " q=" + row.at("q");
    EXPECT_NEAR(best.epsilon, num(row, "epsilon"), 1e-6 * num(row, "epsilon")) << what;
    EXPECT_EQ(best.budget.order, num(row, "order")) << what;
    if (c.kind == CandidateCount::Kind::truncated_negative_binomial) {
      EXPECT_EQ(best.budget.order_hat, num(row, "order_hat")) << what;
    }
    // The budget reproduces its epsilon, and the candidate fits it.
    EXPECT_DOUBLE_EQ(selection::selection_epsilon(c, best.budget, num(row, "delta"), rdp::Conversion::improved), best.epsilon);
    EXPECT_TRUE(selection::within_budget(c, best.budget, candidate, integer_orders(), rdp::Conversion::improved));
  }
}

TEST(PrivateSelection, CalibratedCandidatesFitTheBudgetAndNoMore) {
  const CandidateCount c;  // geometric, gamma 0.25: E[K] = 4
  auto events = [](double steps) {
    return [steps](double sigma) {
      return PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(0.01, PrivacyEvent::gaussian(sigma)),
                                         static_cast<std::int64_t>(steps));
    };
  };
  const auto orders = rdp::default_orders();
  const auto best = selection::best_budget(c, selection::candidate_curve(events(1000)(1.1), orders), 1e-5, rdp::Conversion::improved);
  // A candidate with twice the steps needs more noise to stay within the same budget; one with half, less.
  const double longer = selection::calibrate_candidate(c, best.budget, events(2000), orders, rdp::Conversion::improved);
  const double shorter = selection::calibrate_candidate(c, best.budget, events(500), orders, rdp::Conversion::improved);
  EXPECT_GT(longer, 1.1);
  EXPECT_LT(shorter, 1.1);
  EXPECT_TRUE(selection::within_budget(c, best.budget, events(2000)(longer), orders, rdp::Conversion::improved));
  EXPECT_FALSE(selection::within_budget(c, best.budget, events(2000)(longer * 0.999), orders, rdp::Conversion::improved));
}

TEST(PrivateSelection, DrawsAndRefusals) {
  CandidateCount c;
  c.eta = 1, c.gamma = 0.5;  // geometric: P[K=1] = 0.5, P[K=2] = 0.25
  EXPECT_EQ(selection::count_for_uniform(c, 0.0), 1);
  EXPECT_EQ(selection::count_for_uniform(c, 0.49), 1);
  EXPECT_EQ(selection::count_for_uniform(c, 0.51), 2);
  EXPECT_EQ(selection::count_for_uniform(c, 0.76), 3);
  CandidateCount p;
  p.kind = CandidateCount::Kind::poisson, p.mu = 2;
  EXPECT_EQ(selection::count_for_uniform(p, std::exp(-2.0) * 0.5), 0);  // Poisson may run no candidate
  c.gamma = 1;
  EXPECT_THROW(selection::expected_count(c), std::invalid_argument);
  EXPECT_THROW(selection::count_kind("grid"), std::invalid_argument);
}
