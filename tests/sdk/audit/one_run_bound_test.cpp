// The one-run audit bound (Steinke et al. 2023) against 50-digit mpmath references
// (scripts/generate_audit_fixtures.py), and the guessing rules on scores whose answer is known.
#include "../../test_csv.hpp"

#include <privdiff/audit/one_run_bound.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace privdiff::sdk::audit;
using privdiff::testing::num;

TEST(OneRunBound, PValueAndLowerBoundMatchHighPrecisionReferences) {
  const auto rows = privdiff::testing::read_csv(std::string(PRIVDIFF_TEST_FIXTURE_DIR) + "/audit/one_run.csv");
  ASSERT_GE(rows.size(), 10u);
  for (const auto& row : rows) {
    const auto m = static_cast<std::int64_t>(num(row, "m")), r = static_cast<std::int64_t>(num(row, "r")),
               v = static_cast<std::int64_t>(num(row, "v"));
    const double eps = num(row, "eps"), delta = num(row, "delta"), beta = num(row, "beta");
    const double p = num(row, "p_value"), lower = num(row, "epsilon_lower");
    EXPECT_NEAR(one_run_p_value(m, r, v, eps, delta), p, 1e-10 * p + 1e-15) << row.at("m") << "," << row.at("v");
    const double got = one_run_epsilon_lower_bound(m, r, v, delta, beta);
    EXPECT_NEAR(got, lower, 1e-7 * std::max(1.0, lower)) << row.at("m") << "," << row.at("v");
    EXPECT_LE(got, lower + 1e-12);  // rounded down: never claims more than the data shows
  }
}

TEST(OneRunBound, RefusesImpossibleCounts) {
  EXPECT_THROW(one_run_p_value(10, 11, 5, 1, 0), std::invalid_argument);
  EXPECT_THROW(one_run_p_value(10, 5, 6, 1, 0), std::invalid_argument);
  EXPECT_THROW(one_run_p_value(10, 5, 3, -1, 0), std::invalid_argument);
  EXPECT_THROW(one_run_epsilon_lower_bound(10, 5, 3, 0, 1.0), std::invalid_argument);
}

TEST(OneRunBound, ChanceScoresGiveNothingAndSeparatedScoresALargeBound) {
  std::mt19937_64 rng(7);
  std::bernoulli_distribution coin(0.5);
  std::normal_distribution<double> normal;
  const int m = 2000;
  std::vector<bool> included(m);
  std::vector<double> chance(m), separated(m);
  for (int i = 0; i < m; ++i) {
    included[i] = coin(rng);
    chance[i] = normal(rng);
    separated[i] = included[i] ? 10 + normal(rng) : normal(rng);
  }
  const auto none = audit_canary_scores(chance, included, 1e-5);
  EXPECT_LT(none.epsilon_lower, 0.3);
  const auto all = audit_canary_scores(separated, included, 1e-5);
  // Near-perfect guesses (the widest rule guesses m/2 in, m/2 out, while about m/2 are in).
  EXPECT_GE(all.correct, all.guesses * 99 / 100);
  EXPECT_GT(all.epsilon_lower, 4.0);
  EXPECT_EQ(all.canaries, m);
}
