// Theorem 6's delta_hat from the PRV accountant (issue 50): privdiff's prv_delta_hat against
// Microsoft's prv-accountant 0.2.0, the RDP bound against Google's dp-accounting 0.6.0, and the theorem
// on those values (tests/fixtures/accountants/selection_prv_delta_hat.csv, written by
// scripts/generate_prv_delta_hat_fixtures.py; its docstring says what each column is). Then what a
// sweep does with it: the PRV bound is tighter, so the same budget admits less noise, and a candidate
// calibrated to it is within the budget that the release gate checks.
#include "../test_csv.hpp"

#include <privdiff/privacy/private_selection.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

using namespace privdiff::sdk;
using privdiff::testing::num;
using selection::CandidateCount;
using selection::DeltaHatSource;

namespace {

PrivacyEvent dp_sgd(double q, double sigma, std::int64_t steps) {
  return PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(q, PrivacyEvent::gaussian(sigma)), steps);
}

std::vector<double> integer_grid() {  // the fixture's GRID
  std::vector<double> g;
  for (int a = 2; a <= 16; ++a) g.push_back(a);
  for (double a : {20, 24, 32, 48, 64, 128, 256}) g.push_back(a);
  return g;
}

CandidateCount poisson(double mu) {
  CandidateCount c;
  c.kind = CandidateCount::Kind::poisson;
  c.mu = mu;
  return c;
}

}  // namespace

TEST(PrivateSelectionPrv, DeltaHatMatchesPrvAccountantAndTheoremSixMatchesOnIt) {
  const auto rows =
      privdiff::testing::read_csv(std::string(PRIVDIFF_TEST_FIXTURE_DIR) + "/accountants/selection_prv_delta_hat.csv");
  ASSERT_EQ(rows.size(), 36u);
  const auto grid = integer_grid();
  std::map<std::string, double> ours_by_row;
  for (const auto& row : rows) {
    const std::string name = "q=" + row.at("q") + " sigma=" + row.at("sigma") + " steps=" + row.at("steps") +
                             " mean=" + row.at("mean") + " order=" + row.at("order");
    const auto event = dp_sgd(num(row, "q"), num(row, "sigma"), static_cast<std::int64_t>(num(row, "steps")));
    const double order = num(row, "order"), eps_hat = num(row, "eps_hat");
    EXPECT_DOUBLE_EQ(eps_hat, std::log1p(1 / (order - 1))) << name;

    // privdiff's PRV bound: never below prv-accountant's lower bound on the true delta, and as tight as
    // its upper bound (the two discretise differently: within 1%). Rows of two means share it.
    const std::string key = name.substr(0, name.find(" mean=")) + " order=" + row.at("order");
    if (!ours_by_row.count(key)) ours_by_row[key] = selection::prv_delta_hat(event, eps_hat);
    const double ours = ours_by_row[key];
    EXPECT_GE(ours, num(row, "delta_hat_lower")) << name;
    EXPECT_NEAR(ours, num(row, "delta_hat_upper"), 0.01 * num(row, "delta_hat_upper")) << name;
    // The RDP bound, as dp-accounting computes it, and the PRV one is tighter (1.6-3.4x here).
    const double from_rdp = selection::candidate_delta_hat(event, order, grid, rdp::Conversion::improved, DeltaHatSource::rdp);
    EXPECT_NEAR(from_rdp, num(row, "delta_hat_rdp"), 1e-9 * num(row, "delta_hat_rdp")) << name;
    EXPECT_LT(ours, from_rdp / 1.5) << name;
    EXPECT_DOUBLE_EQ(selection::candidate_delta_hat(event, order, grid, rdp::Conversion::improved,
                                                    DeltaHatSource::rdp_and_prv),
                     ours) << name;

    // The theorem on the libraries' own numbers, to 1e-9.
    const CandidateCount count = poisson(num(row, "mean"));
    for (const auto& [source, delta_hat] : {std::pair{"prv", num(row, "delta_hat_upper")},
                                            std::pair{"rdp", num(row, "delta_hat_rdp")}}) {
      selection::CandidateBudget b{order, num(row, "candidate_rdp"), 0, 0, delta_hat};
      const std::string sel = std::string("selection_rdp_") + source, eps = std::string("epsilon_") + source;
      EXPECT_NEAR(selection::selection_rdp(count, b), num(row, sel), 1e-9 * num(row, sel)) << name << " " << source;
      EXPECT_NEAR(selection::selection_epsilon(count, b, 1e-5, rdp::Conversion::improved), num(row, eps),
                  1e-9 * num(row, eps)) << name << " " << source;
    }
  }
}

TEST(PrivateSelectionPrv, TheTighterDeltaHatBuysLessNoiseAndTheCalibratedCandidateIsWithinBudget) {
  const CandidateCount count = poisson(4);
  const auto grid = integer_grid();
  const auto reference = dp_sgd(256.0 / 60000, 0.6, 719);
  const auto with_rdp = selection::best_budget(count, selection::candidate_curve(reference, grid), 1e-5,
                                               rdp::Conversion::improved);
  const auto with_prv = selection::best_budget(count, selection::candidate_curve(reference, grid, DeltaHatSource::rdp_and_prv),
                                               1e-5, rdp::Conversion::improved);
  EXPECT_LT(with_prv.epsilon, with_rdp.epsilon);
  EXPECT_LT(with_prv.budget.delta_hat, with_rdp.budget.delta_hat);
  // The budget's own delta_hat is the candidate's: at its order, from the smaller bound.
  EXPECT_DOUBLE_EQ(with_prv.budget.delta_hat, selection::candidate_delta_hat(reference, with_prv.budget.order, grid,
                                                                             rdp::Conversion::improved,
                                                                             DeltaHatSource::rdp_and_prv));

  // A candidate of 500 steps calibrated to each budget: the PRV one needs less noise at the same epsilon
  // target ... and is within its budget only when delta_hat is asked of the same source.
  const auto events = [](double sigma) { return dp_sgd(256.0 / 60000, sigma, 500); };
  const double sigma_prv = selection::calibrate_candidate(count, with_prv.budget, events, grid, rdp::Conversion::improved,
                                                          DeltaHatSource::rdp_and_prv);
  EXPECT_TRUE(selection::within_budget(count, with_prv.budget, events(sigma_prv), grid, rdp::Conversion::improved,
                                       DeltaHatSource::rdp_and_prv));
  EXPECT_FALSE(selection::within_budget(count, with_prv.budget, events(sigma_prv * 0.99), grid,
                                        rdp::Conversion::improved, DeltaHatSource::rdp_and_prv));
  EXPECT_FALSE(selection::within_budget(count, with_prv.budget, events(sigma_prv), grid, rdp::Conversion::improved,
                                        DeltaHatSource::rdp));
}

TEST(PrivateSelectionPrv, CandidatesThatAreNotGaussianStepsFallBackToRdp) {
  EXPECT_EQ(selection::prv_delta_hat(PrivacyEvent::no_op(), 0.1), 0);
  EXPECT_EQ(selection::prv_delta_hat(dp_sgd(0.01, 0, 10), 0.1), 1);
  EXPECT_THROW(selection::prv_delta_hat(dp_sgd(0.01, 1, 10), 0), std::invalid_argument);
}
