// The analytic Gaussian mechanism against mpmath (100+ digits) over eps in [0.01, 1000] and
// delta in [1e-300, 1e-3].
#include "../test_csv.hpp"

#include <privdiff/privacy/analytic_gaussian.hpp>

#include <gtest/gtest.h>

#include <cmath>

using namespace privdiff::sdk;
using privdiff::testing::num;

TEST(AnalyticGaussian, SigmaMatchesHighPrecisionReferences) {
  const auto rows =
      privdiff::testing::read_csv(std::string(PRIVDIFF_TEST_FIXTURE_DIR) + "/accountants/analytic_gaussian.csv");
  ASSERT_EQ(rows.size(), 64u);
  for (const auto& row : rows) {
    const double eps = num(row, "epsilon"), delta = num(row, "delta"), expected = num(row, "sigma");
    const double got = analytic_gaussian::sigma(eps, delta);
    EXPECT_NEAR(got, expected, 1e-10 * expected) << "eps=" << row.at("epsilon") << " delta=" << row.at("delta");
    EXPECT_GE(got, expected * (1 - 1e-12));  // never less noise than needed, beyond double rounding
  }
}

TEST(AnalyticGaussian, EpsilonAndDeltaInvertEachOther) {
  for (double sigma : {0.05, 0.5, 1.0, 3.0, 30.0}) {
    for (double delta : {1e-3, 1e-8, 1e-50, 1e-200}) {
      const double eps = analytic_gaussian::epsilon(sigma, delta);
      EXPECT_LE(analytic_gaussian::delta(sigma, eps), delta * (1 + 1e-12));
      EXPECT_NEAR(std::log(analytic_gaussian::delta(sigma, eps)), std::log(delta), 1e-9 * std::fabs(std::log(delta)));
    }
  }
  // delta(0) = 2 Phi(1/(2 sigma)) - 1 >= any smaller target: epsilon 0 for large targets.
  EXPECT_EQ(analytic_gaussian::epsilon(100.0, 0.5), 0.0);
}

TEST(AnalyticGaussian, MonotoneInSigmaAndEpsilon) {
  double previous = 1;
  for (double sigma = 0.2; sigma < 20; sigma *= 1.3) {
    const double d = analytic_gaussian::delta(sigma, 1.0);
    EXPECT_LT(d, previous);
    previous = d;
  }
  previous = 1;
  for (double eps = 0; eps < 10; eps += 0.5) {
    const double d = analytic_gaussian::delta(1.0, eps);
    EXPECT_LT(d, previous);
    previous = d;
  }
}
