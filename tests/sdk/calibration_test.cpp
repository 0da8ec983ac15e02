#include <privdiff/privacy/calibration.hpp>

#include <gtest/gtest.h>

#include <cmath>

using namespace privdiff::sdk;

namespace {

// Gaussian compositions through zCDP: rho = count / (2 sigma^2); eps = rho + 2 sqrt(rho ln(1/delta)).
// Simple, exactly monotone, and invertible in closed form: a good reference for calibration.
class ZcdpGaussian : public Accountant {
 public:
  std::string cannot_evaluate(const PrivacyEvent& e) const override {
    return e.kind() == PrivacyEvent::Kind::self_composed && e.inner().kind() == PrivacyEvent::Kind::gaussian
               ? ""
               : "only SelfComposed(Gaussian)";
  }
  EpsilonResult epsilon(const PrivacyEvent& e, double delta) const override {
    const double s = e.inner().noise_multiplier();
    const double rho = e.count() / (2 * s * s);
    return {rho + 2 * std::sqrt(rho * std::log(1 / delta)), {}, {}};
  }
  double delta(const PrivacyEvent&, double) const override { return 0; }
};

// sigma for which zCDP gives exactly eps: solve rho + 2 sqrt(rho L) = eps for rho.
double exact_sigma(double eps, double delta, std::int64_t count) {
  const double L = std::log(1 / delta);
  const double sqrt_rho = -std::sqrt(L) + std::sqrt(L + eps);
  return std::sqrt(count / (2 * sqrt_rho * sqrt_rho));
}

}  // namespace

TEST(Calibration, FindsTheSmallestSigmaWithoutOvershooting) {
  ZcdpGaussian acc;
  for (double eps : {0.2, 1.0, 10.0}) {
    for (std::int64_t steps : {1, 100, 10000}) {
      auto events = [&](double s) { return PrivacyEvent::self_composed(PrivacyEvent::gaussian(s), steps); };
      const auto c = calibrate_noise_multiplier(acc, events, eps, 1e-5, 1e-4);
      const double exact = exact_sigma(eps, 1e-5, steps);
      EXPECT_LE(c.epsilon, eps);
      EXPECT_GE(c.noise_multiplier, exact * (1 - 1e-12));
      EXPECT_LE(c.noise_multiplier, exact * (1 + 1e-4));
    }
  }
}

TEST(Calibration, LargestStepCountNeverOvershoots) {
  ZcdpGaussian acc;
  auto events = [](std::int64_t t) { return PrivacyEvent::self_composed(PrivacyEvent::gaussian(10), t); };
  const std::int64_t t = calibrate_steps(acc, events, 1.0, 1e-5);
  EXPECT_LE(acc.epsilon(events(t), 1e-5).epsilon, 1.0);
  EXPECT_GT(acc.epsilon(events(t + 1), 1e-5).epsilon, 1.0);
  EXPECT_EQ(calibrate_steps(acc, events, 1e9, 1e-5, 1000), 1000);  // capped
}

TEST(Calibration, RejectsBadTargetsAndUnreachableOnes) {
  ZcdpGaussian acc;
  auto events = [](double s) { return PrivacyEvent::self_composed(PrivacyEvent::gaussian(s), 1); };
  EXPECT_THROW(calibrate_noise_multiplier(acc, events, 0, 1e-5), std::invalid_argument);
  EXPECT_THROW(calibrate_noise_multiplier(acc, events, 1, 1), std::invalid_argument);
  EXPECT_THROW(calibrate_noise_multiplier(acc, events, 1e-9, 1e-5, 1e-3, 10), std::runtime_error);
  auto unsupported = [](double s) { return PrivacyEvent::gaussian(s); };
  EXPECT_THROW(calibrate_noise_multiplier(acc, unsupported, 1, 1e-5), std::invalid_argument);
  // The message says what no noise can meet, in figures that show a small target (not "0.000000").
  try {
    calibrate_noise_multiplier(acc, events, 1e-9, 1e-5, 1e-3, 10);
    ADD_FAILURE() << "a target no noise meets was met";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no noise multiplier up to 10 meets the target epsilon 1e-09"), std::string::npos)
        << e.what();
  }
}

namespace {
// Cannot evaluate below sigma 4 (as PRV's grid cannot at a tiny sigma): runtime_error there.
class FailsAtLittleNoise : public ZcdpGaussian {
 public:
  explicit FailsAtLittleNoise(double below = 4) : below_(below) {}
  double below_;
  EpsilonResult epsilon(const PrivacyEvent& e, double delta) const override {
    if (e.inner().noise_multiplier() < below_) throw std::runtime_error("the grid would need 1e12 points");
    return ZcdpGaussian::epsilon(e, delta);
  }
};
}  // namespace

// While bracketing, an accountant that cannot evaluate little noise counts as above the target: the
// calibration goes on to more noise and finds the same sigma; where no sigma works it says so.
TEST(Calibration, LittleNoiseTheAccountantCannotEvaluateIsAboveTheTarget) {
  const ZcdpGaussian plain;
  const FailsAtLittleNoise fragile;
  auto events = [](double s) { return PrivacyEvent::self_composed(PrivacyEvent::gaussian(s), 100); };
  const double expected = calibrate_noise_multiplier(plain, events, 2.0, 1e-5).noise_multiplier;
  ASSERT_GT(expected, 8);  // above the region the fragile accountant refuses
  EXPECT_DOUBLE_EQ(calibrate_noise_multiplier(fragile, events, 2.0, 1e-5).noise_multiplier, expected);
  // Failing up to just below the answer: the downward search and the bisection meet failures too.
  const FailsAtLittleNoise close(0.9 * expected);
  const NoiseCalibration near = calibrate_noise_multiplier(close, events, 2.0, 1e-5);
  EXPECT_NEAR(near.noise_multiplier, expected, 1e-3 * expected);
  EXPECT_LE(near.epsilon, 2.0);
  try {
    calibrate_noise_multiplier(fragile, events, 2.0, 1e-5, 1e-3, 2);
    ADD_FAILURE() << "calibrated where the accountant evaluates nothing";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("(the accountant: the grid would need"), std::string::npos) << e.what();
  }
}
