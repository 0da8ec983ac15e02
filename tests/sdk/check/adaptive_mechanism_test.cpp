// Mechanisms that release more than their gradient or keep state between steps (issue 66): the
// adaptive-clipping example (examples/out_of_tree_plugin) passes every check, resumes exactly and states
// its two releases of a batch as one event; adaptive clippings whose clip norm follows something
// unreleased fail the next-steps replay; a second PoissonSampled event for the step's batch is refused;
// a declared release must be made once per step, and nothing undeclared can be released.
#include "../../../examples/out_of_tree_plugin/adaptive_clipping.hpp"
#include "../../fixtures/engines/broken_engines.hpp"
#include "../engine/record_replay.hpp"

#include <privdiff/audit/mechanism_check.hpp>
#include <privdiff/check/mechanism_under_test.hpp>
#include <privdiff/check/noise_calibration.hpp>
#include <privdiff/check/replay_check.hpp>
#include <privdiff/privacy/ledger.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <iostream>
#include <string>

using namespace privdiff;
using namespace privdiff::testing::replay;
namespace check = privdiff::sdk::check;

namespace {

check::MechanismUnderTest adaptive() {
  return check::mechanism_from_config(
      adaptive_clipping::schema(), "stage", {{"batch_size", sdk::ConfigValue{std::int64_t{8}}}},
      [](const sdk::Config& config) { return std::make_unique<adaptive_clipping::AdaptiveClipping>(config); });
}

// A factory of the mechanism under test for run_stage: `steps` steps, reproducible streams keyed by the seed.
MechanismFactory runs_of(const check::MechanismUnderTest& make, std::int64_t steps, std::int64_t batch = 7) {
  return [make, steps, batch](std::uint64_t seed) {
    check::MechanismSettings s;
    s.batch_size = batch;
    s.steps = steps;
    s.noise_multiplier = 0.5;
    s.seed = seed;
    return make(s);
  };
}

bool any_has(const std::vector<std::string>& lines, const std::string& text) {
  for (const auto& l : lines) {
    if (l.find(text) != std::string::npos) return true;
  }
  return false;
}

// Declares a release it never makes / makes a release it never declared.
class ForgetsItsRelease : public engine::DpSgdMechanism {
 public:
  using DpSgdMechanism::DpSgdMechanism;

 protected:
  std::vector<StepRelease> step_releases() const override { return {{"count", 1.0, 5.0}}; }
};
class ReleasesUndeclared : public engine::DpSgdMechanism {
 public:
  using DpSgdMechanism::DpSgdMechanism;

 protected:
  void after_step_gradient(const at::Tensor& norms) override {
    release_statistic("count", at::full({1}, static_cast<double>(norms.numel()), at::kDouble));
  }
};

}  // namespace

TEST(AdaptiveMechanisms, AdaptiveQuantileClippingPassesEveryCheck) {
  const sdk::audit::MechanismCheck r = sdk::audit::check_mechanism(adaptive(), {});
  std::cout << r.describe();
  EXPECT_TRUE(r.replay.violations.empty()) << r.describe();
  EXPECT_TRUE(r.noise.passed()) << r.describe();
  ASSERT_EQ(r.noise.releases.size(), 1u);  // the count's noise, measured
  EXPECT_NEAR(r.noise.releases[0].measured_std / r.noise.releases[0].stated_std, 1.0, 0.5);
  EXPECT_NE(r.noise.ledger.find("Composed([Gaussian(1), Gaussian(10)])"), std::string::npos) << r.noise.ledger;
}

TEST(AdaptiveMechanisms, TheClipNormMovesIsPublishedAndIsRestoredOnResume) {
  const ReplayData data(random_images(21));
  const StageRun run = run_stage(runs_of(adaptive(), 4), 3, ModelSpec{}, data);
  ASSERT_EQ(run.sensitivities.size(), 4u);
  EXPECT_EQ(run.sensitivities[0], 1.0);  // C_0 = max_grad_norm
  EXPECT_NE(run.sensitivities[1], 1.0);  // then the quantile's
  EXPECT_EQ(run.metrics[0].at("clip_norm"), run.sensitivities[1]);  // step 1 reports the next step's C
  ASSERT_EQ(run.statistics[0].size(), 1u);
  EXPECT_EQ(run.statistics[0][0].name, "unclipped count, step 1");
  const Report same = audit_resume("adaptive clipping, resumed after step 2", runs_of(adaptive(), 4),
                                   runs_of(adaptive(), 4), 3, ModelSpec{}, data, 2);
  std::cout << same.describe();
  EXPECT_TRUE(same.violations.empty()) << same.describe();
}

TEST(AdaptiveMechanisms, StateKeptWithoutNoiseFailsTheNextStepsReplay) {
  const std::vector<std::pair<std::string, check::MechanismUnderTest>> planted{
      {"mean norm", check::engine_under_test<privdiff::testing::MeanNormClippingEngine>(engine::DpSgdOptions{})},
      {"raw count", check::engine_under_test<privdiff::testing::RawCountClippingEngine>(engine::DpSgdOptions{})},
      {"unaccounted count",
       check::engine_under_test<privdiff::testing::UnaccountedCountClippingEngine>(engine::DpSgdOptions{})}};
  for (const auto& [name, make] : planted) {
    const Report r = check::check_by_record_replay(make, check::ReplayCheckOptions{});
    std::cout << name << ":\n" << r.describe();
    EXPECT_TRUE(any_has(r.violations, "x reaches a later step through something the mechanism did not release"))
        << name;
  }
}

TEST(AdaptiveMechanisms, ASecondEventForTheStepsBatchIsRefused) {
  const sdk::audit::MechanismCheck r = sdk::audit::check_mechanism(
      check::engine_under_test<privdiff::testing::TwoEventsPerStepEngine>(engine::DpSgdOptions{}), {});
  EXPECT_FALSE(r.passed());
  EXPECT_TRUE(any_has(r.replay.violations, "epsilon is under-counted")) << r.describe();
}

TEST(AdaptiveMechanisms, TheLedgerSaysWhenAStepHoldsTwoPoissonEventsOfOneRate) {
  sdk::PrivacyLedger ledger;
  const auto g = sdk::PrivacyEvent::poisson_sampled(0.01, sdk::PrivacyEvent::gaussian(1.0));
  ledger.record(g);
  EXPECT_EQ(ledger.separately_sampled(), "");
  ledger.record(sdk::PrivacyEvent::poisson_sampled(0.02, sdk::PrivacyEvent::gaussian(3.0)));
  EXPECT_EQ(ledger.separately_sampled(), "");  // other rates: other batches
  ledger.record(sdk::PrivacyEvent::poisson_sampled(0.01, sdk::PrivacyEvent::gaussian(9.0)));
  EXPECT_NE(ledger.separately_sampled().find("sampling rate 0.01"), std::string::npos);
  ledger.begin_step();
  ledger.record(g, 2);  // twice in a row, in one call
  EXPECT_NE(ledger.separately_sampled(), "");
  ledger.begin_step();
  ledger.record(g);
  EXPECT_EQ(ledger.separately_sampled(), "");
}

TEST(AdaptiveMechanisms, ADeclaredReleaseIsMadeOnceAStepAndNothingUndeclaredIsReleased) {
  const ReplayData data(random_images(21));
  auto expect_refused = [&](const MechanismFactory& make, const std::string& text, const std::string& what) {
    try {
      run_stage(make, 3, ModelSpec{}, data);
      ADD_FAILURE() << what << " went through";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_refused(runs_of(check::engine_under_test<ForgetsItsRelease>(engine::DpSgdOptions{}), 2),
                 "the declared release 'count' was not made", "a declared release that was not made");
  expect_refused(runs_of(check::engine_under_test<ReleasesUndeclared>(engine::DpSgdOptions{}), 2),
                 "not among the mechanism's step_releases()", "an undeclared release");
  // Planned: one event per step on the batch, the declared release composed with the gradient.
  check::MechanismSettings s;
  s.batch_size = 7;
  s.steps = 2;
  s.noise_multiplier = 0.5;
  const std::string plan = check::engine_under_test<ForgetsItsRelease>(engine::DpSgdOptions{})(s)->planned_events(700).to_string();
  EXPECT_EQ(plan, "SelfComposed(PoissonSampled(0.01, Composed([Gaussian(0.5), Gaussian(5)])), 2)");
}
