// The PRV composition as the SDK exports it (the `prv` plugin's accuracy against references is in
// tests/plugins/accountant_plugins_test.cpp): its bounds bracket the exact Gaussian curve, a step
// list composes the same however it is split, and bad input is refused.
#include <privdiff/privacy/analytic_gaussian.hpp>
#include <privdiff/privacy/prv_composition.hpp>

#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

using namespace privdiff::sdk;
using prv::PrvComposition;

TEST(PrvComposition, BoundsBracketTheExactGaussianCurve) {
  for (double sigma : {0.8, 2.0}) {
    const double delta = 1e-5;
    const PrvComposition composition({{1.0, sigma, 1}}, 0.01, 1e-8, {true, delta});
    const prv::EpsilonBounds b = composition.epsilon_bounds(delta);
    const double exact = analytic_gaussian::epsilon(sigma, delta);
    EXPECT_LE(b.lower, exact) << sigma;
    EXPECT_GE(b.upper, exact) << sigma;
    EXPECT_LE(b.lower, b.estimate);
    EXPECT_LE(b.estimate, b.upper);
    EXPECT_LE(composition.delta_upper(b.upper), delta * 1.01) << sigma;
  }
}

TEST(PrvComposition, SplittingTheStepsChangesNothingBeyondTheErrorBand) {
  const double delta = 1e-6, eps_error = 0.01;
  const PrvComposition whole({{0.01, 1.1, 1000}}, eps_error, 1e-9, {true, delta});
  const PrvComposition split({{0.01, 1.1, 400}, {0.01, 1.1, 600}}, eps_error, 1e-9, {true, delta});
  EXPECT_NEAR(whole.epsilon_bounds(delta).estimate, split.epsilon_bounds(delta).estimate, eps_error);
  EXPECT_GT(whole.grid_size(), 0);
  EXPECT_GT(whole.mesh(), 0);
  EXPECT_GT(whole.domain_half_width(), whole.epsilon_bounds(delta).upper);
}

TEST(PrvComposition, NoStepsSpendNothing) {
  const PrvComposition none({}, 0.01, 1e-9, {true, 1e-5});
  EXPECT_EQ(none.grid_size(), 0);
  EXPECT_EQ(none.epsilon_estimate(1e-5), 0.0);
  EXPECT_EQ(none.delta_estimate(0.0), 0.0);
}

TEST(PrvComposition, RefusesBadArguments) {
  const std::vector<GaussianSteps> steps{{0.1, 1.0, 10}};
  EXPECT_THROW(PrvComposition(steps, 0.0, 1e-9, {true, 1e-5}), std::invalid_argument);
  EXPECT_THROW(PrvComposition(steps, 0.01, 1.0, {true, 1e-5}), std::invalid_argument);
  EXPECT_THROW(PrvComposition({{0.1, 0.0, 10}}, 0.01, 1e-9, {true, 1e-5}), std::invalid_argument);
  EXPECT_THROW(PrvComposition({{1.5, 1.0, 10}}, 0.01, 1e-9, {true, 1e-5}), std::invalid_argument);
  EXPECT_THROW(PrvComposition(steps, 0.01, 1e-9, {true, 1e-5}).epsilon_bounds(1e-10), std::invalid_argument);
}
