// RDP of the subsampled Gaussian against mpmath references (scripts/generate_accountant_fixtures.py):
// exact binomial sums for integer orders, adaptive quadrature of the defining integral for
// fractional ones, over q in [1e-7, 1] and sigma in [0.1, 100].
#include "../test_csv.hpp"

#include <privdiff/privacy/rdp.hpp>

#include <gtest/gtest.h>

#include <cmath>

using namespace privdiff::sdk;
using privdiff::testing::num;

TEST(Rdp, MatchesHighPrecisionReferencesAtIntegerAndFractionalOrders) {
  const auto rows = privdiff::testing::read_csv(std::string(PRIVDIFF_TEST_FIXTURE_DIR) + "/accountants/rdp.csv");
  ASSERT_GT(rows.size(), 600u);
  int fractional = 0;
  for (const auto& row : rows) {
    const double q = num(row, "q"), sigma = num(row, "sigma"), order = num(row, "order"), expected = num(row, "rdp");
    const double got = rdp::subsampled_gaussian(q, sigma, order);
    // Relative precision everywhere, down to RDP values of 1e-20 (tiny q, large sigma).
    EXPECT_NEAR(got, expected, 1e-9 * std::fabs(expected) + 1e-300)
        << "q=" << row.at("q") << " sigma=" << row.at("sigma") << " order=" << row.at("order");
    if (order != std::floor(order)) ++fractional;
  }
  EXPECT_GT(fractional, 200);
}

TEST(Rdp, SpecialCases) {
  EXPECT_EQ(rdp::subsampled_gaussian(0, 1, 2), 0);
  EXPECT_DOUBLE_EQ(rdp::subsampled_gaussian(1, 2, 3), 3 / 8.0);
  EXPECT_TRUE(std::isinf(rdp::subsampled_gaussian(0.1, 0, 2)));
  EXPECT_THROW(rdp::subsampled_gaussian(1.5, 1, 2), std::invalid_argument);
  EXPECT_THROW(rdp::subsampled_gaussian(0.1, 1, 1), std::invalid_argument);
}

TEST(Rdp, CompositionAddsAndRepeatsMultiply) {
  const std::vector<double> orders = {2, 4.5, 32};
  const auto step = PrivacyEvent::poisson_sampled(0.01, PrivacyEvent::gaussian(1.1));
  const auto one = rdp::event_rdp(step, orders);
  const auto many = rdp::event_rdp(PrivacyEvent::self_composed(step, 1000), orders);
  const auto mixed = rdp::event_rdp(
      PrivacyEvent::composed({PrivacyEvent::self_composed(step, 600), PrivacyEvent::self_composed(step, 400),
                              PrivacyEvent::gaussian(10), PrivacyEvent::no_op()}),
      orders);
  for (std::size_t k = 0; k < orders.size(); ++k) {
    EXPECT_NEAR(many[k], 1000 * one[k], 1e-12 * many[k]);
    EXPECT_NEAR(mixed[k], 1000 * one[k] + orders[k] / 200, 1e-12 * mixed[k]);
  }
  EXPECT_THROW(rdp::event_rdp(PrivacyEvent::poisson_sampled(0.1, PrivacyEvent::composed({})), orders),
               std::invalid_argument);
}

TEST(Rdp, ConversionsFollowTheirFormulas) {
  const std::vector<double> orders = {3.0};
  const std::vector<double> curve = {0.5};
  const double delta = 1e-5;
  // classic (Mironov 2017): r + log(1/delta)/(a-1)
  EXPECT_NEAR(rdp::epsilon(orders, curve, delta, rdp::Conversion::classic).epsilon, 0.5 + std::log(1e5) / 2, 1e-14);
  // improved (Balle et al. 2020): r + log((a-1)/a) - (log delta + log a)/(a-1)
  EXPECT_NEAR(rdp::epsilon(orders, curve, delta, rdp::Conversion::improved).epsilon,
              0.5 + std::log(2.0 / 3) - (std::log(delta) + std::log(3.0)) / 2, 1e-14);
  // delta(eps) inverts the same bound.
  const double eps = rdp::epsilon(orders, curve, delta, rdp::Conversion::improved).epsilon;
  EXPECT_NEAR(rdp::delta(orders, curve, eps, rdp::Conversion::improved), delta, 1e-12 * delta);
  EXPECT_NEAR(rdp::delta(orders, curve, rdp::epsilon(orders, curve, delta, rdp::Conversion::classic).epsilon,
                         rdp::Conversion::classic),
              delta, 1e-12 * delta);
  // Zero RDP spends nothing.
  EXPECT_EQ(rdp::epsilon(orders, {0.0}, delta, rdp::Conversion::improved).epsilon, 0.0);
  EXPECT_EQ(rdp::delta(orders, {0.0}, 0.0, rdp::Conversion::improved), 0.0);
}

TEST(Rdp, ImprovedConversionIsNeverWorseThanClassic) {
  const auto& orders = rdp::default_orders();
  for (double sigma : {0.6, 1.0, 2.0, 8.0}) {
    const auto curve = rdp::event_rdp(
        PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(0.01, PrivacyEvent::gaussian(sigma)), 5000), orders);
    for (double delta : {1e-3, 1e-5, 1e-10}) {
      EXPECT_LE(rdp::epsilon(orders, curve, delta, rdp::Conversion::improved).epsilon,
                rdp::epsilon(orders, curve, delta, rdp::Conversion::classic).epsilon);
    }
  }
}

TEST(Rdp, DefaultOrdersReachLargeOrders) {
  const auto& o = rdp::default_orders();
  EXPECT_DOUBLE_EQ(o.front(), 1.1);
  EXPECT_GE(o.back(), 1024);
  EXPECT_TRUE(std::is_sorted(o.begin(), o.end()));
  // A case whose optimum is far above 63 (where Opacus's list stops and inflates epsilon).
  const auto curve = rdp::event_rdp(
      PrivacyEvent::self_composed(PrivacyEvent::poisson_sampled(3.8e-4, PrivacyEvent::gaussian(4)), 1000), o);
  const auto best = rdp::epsilon(o, curve, 1e-5, rdp::Conversion::improved);
  EXPECT_GT(best.order, 63);
}
