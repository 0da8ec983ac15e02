// adaptive_clipping's own privacy test: the SDK's mechanism checks (record replay of its step and of
// the two steps after it, the noise of its gradient and of its count, the canary audit) run its code,
// and its ledger's event is the exact one of two releases of one Poisson batch.
#include "adaptive_clipping.hpp"

#include <privdiff/audit/mechanism_check.hpp>
#include <privdiff/privacy/rdp_accountant.hpp>

#include <gtest/gtest.h>

#include <iostream>
#include <memory>

using namespace privdiff::sdk;

namespace {
check::MechanismUnderTest mechanism() {
  return check::mechanism_from_config(
      adaptive_clipping::schema(), "stage", {{"batch_size", ConfigValue{std::int64_t{8}}}},
      [](const Config& config) { return std::make_unique<adaptive_clipping::AdaptiveClipping>(config); });
}
}  // namespace

TEST(AdaptiveClipping, PassesTheMechanismChecks) {
  const RdpAccountant rdp;  // the SDK's own: no plugins to load
  audit::MechanismCheckOptions options;
  options.accountant = &rdp;  // (c) the canary audit, at epsilon 2
  const audit::MechanismCheck result = audit::check_mechanism(mechanism(), options);
  std::cout << result.describe();
  EXPECT_TRUE(result.passed());
}

// Steps of sigma 1.25 and a count of sigma_b 10 on one batch: PoissonSampled(q, Composed([...])).
TEST(AdaptiveClipping, StatesBothReleasesOfABatchAsOneEvent) {
  check::MechanismSettings s;
  s.batch_size = 8;
  s.steps = 3;
  s.noise_multiplier = 1.25;
  const std::unique_ptr<Mechanism> m = mechanism()(s);
  const PrivacyEvent plan = m->planned_events(800);
  EXPECT_EQ(plan.to_string(), "SelfComposed(PoissonSampled(0.01, Composed([Gaussian(1.25), Gaussian(10)])), 3)")
      << plan.to_string();
}
